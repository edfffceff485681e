/**
 * Is hostwatch itself alive? The heartbeat pings a dead man's switch URL (a loopback server
 * here) while cycles succeed and stops when they do not, without ever showing its token;
 * the watchdog is an alert that always fires and is re-sent every `every`.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import { formatConfigErrors } from '../src/config/errors.js';
import { SOURCE_NAMES, sourceByName } from '../src/sources/registry.js';
import { cycleOutcome, heartbeatHealthy } from '../src/selfwatch/heartbeat.js';
import { testClock } from './clock.js';
import { names, sqliteOf, startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET } from './receiver.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const TOKEN = '0b1e6a6c-heartbeat-token-5f2d9';

/** A dead man's switch service on loopback: records the paths it is pinged on. */
async function pingServer(): Promise<{ url: string; pings: string[]; methods: string[] }> {
  const pings: string[] = [];
  const methods: string[] = [];
  const server: Server = createServer((req, res) => {
    pings.push(req.url ?? '');
    methods.push(req.method ?? '');
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('OK');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/ping/${TOKEN}`, pings, methods };
}

async function world(): Promise<World> {
  const w = await startWorld();
  cleanups.push(() => w.close());
  return w;
}

describe('the heartbeat', () => {
  it('pings (GET) after cycles that succeed, stops while every poll fails, and pings again once they succeed', async () => {
    const ping = await pingServer();
    const w = await world();
    const app = await w.app({ heartbeat: { url: ping.url, every: '1m' } });
    await app.runOnce();
    expect(ping.pings).toEqual([`/ping/${TOKEN}`]);
    expect(ping.methods).toEqual(['GET']);

    // The API answers 503 to everything: no cycle reads anything, so no ping.
    w.sim.faults.add({ path: '.*', kind: 'status', status: 503 });
    await app.runOnce();
    expect(ping.pings).toHaveLength(1);
    expect(app.heartbeat!.healthy()).toBe(false);
    expect(await app.heartbeat!.beat()).toBe('skipped');

    w.sim.faults.clear();
    await app.runOnce();
    expect(ping.pings).toHaveLength(2);
  });

  it('stops while the database cannot store what the polls read (a full disk), and pings again once it can; a poll not stored is no success for /readyz, and counts as failed', async () => {
    const ping = await pingServer();
    const w = await world();
    const failedPolls: string[] = [];
    const app = await w.app({ heartbeat: { url: ping.url, every: '1m' } }, { onPoll: (source, o) => void (o.status === 'failed' && failedPolls.push(source)) });
    await app.runOnce();
    expect(ping.pings).toHaveLength(1);
    // The disk is full: the database may not grow by one more page, and every site's health
    // changed and 30 sites were added, so the polls have much to store. The API answers
    // every request.
    const db = sqliteOf(app.store);
    db.exec('CREATE TABLE filler (b BLOB)');
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    // Its free pages taken too.
    const fill = db.prepare('INSERT INTO filler (b) VALUES (zeroblob(512))');
    expect(() => {
      for (;;) fill.run();
    }).toThrow(/full/);
    for (const id of [1, 2, 3]) w.sim.world.setHealth(id, { status: 'offline' });
    for (let i = 0; i < 30; i++) w.sim.world.addSite();
    await app.runOnce();
    // The cycles say why (the disk, not a missing savepoint of the batch the full disk ended).
    expect(w.logs.text).toContain('"err":"SqliteError: database or disk is full","msg":"cycle failed"');
    expect(w.logs.text).not.toContain('no such savepoint');
    expect(app.heartbeat!.healthy()).toBe(false);
    expect(ping.pings).toHaveLength(1);
    // Room again.
    db.pragma('max_page_count = 1073741823');
    await app.runOnce();
    expect(ping.pings).toHaveLength(2);

    // A poll whose reply came but whose change could not be stored (a real refused INSERT)
    // is not a success for /readyz's last_poll_success_at.
    db.exec("CREATE TRIGGER refuse_change BEFORE INSERT ON change_log BEGIN SELECT RAISE(ABORT, 'refused for this test'); END");
    w.sim.world.setHealth(1, { status: 'online' });
    const lastSuccess = app.poller.lastSuccessAt;
    await new Promise((r) => setTimeout(r, 5));
    const site1 = app.poller.sites().find((s) => s.id === 1)!;
    const o = await app.poller.poll(sourceByName('health')!, site1);
    expect(o).toMatchObject({ status: 'failed', error: { message: expect.stringContaining('refused for this test') } });
    expect(app.poller.lastSuccessAt).toBe(lastSuccess);
    // Nor can the failure be stored: the poll throws (failing its cycle), and is still
    // counted as a failed poll (hostwatch_polls_total{outcome="failed"}).
    db.exec("CREATE TRIGGER refuse_state BEFORE INSERT ON poll_state BEGIN SELECT RAISE(ABORT, 'refused for this test'); END");
    db.exec("CREATE TRIGGER refuse_state_update BEFORE UPDATE ON poll_state BEGIN SELECT RAISE(ABORT, 'refused for this test'); END");
    failedPolls.length = 0;
    await expect(app.poller.poll(sourceByName('health')!, site1)).rejects.toThrow(/refused for this test/);
    expect(failedPolls).toEqual(['health']);
    db.exec('DROP TRIGGER refuse_change; DROP TRIGGER refuse_state; DROP TRIGGER refuse_state_update');
    await app.poller.poll(sourceByName('health')!, site1);
    expect(app.poller.lastSuccessAt).toBeGreaterThan(lastSuccess);
  });

  it('stops when the last good cycle is older than twice the interval (a stuck daemon), with an injected clock', async () => {
    const ping = await pingServer();
    const w = await world();
    const clock = testClock();
    const app = await w.app({ heartbeat: { url: ping.url, every: '1m' } }, { now: clock.now });
    await app.runOnce();
    expect(ping.pings).toHaveLength(1);
    // The quickest enabled source polls every 5 minutes: stale after 2 × 5 minutes.
    clock.advance(9 * 60_000);
    expect(await app.heartbeat!.beat()).toBe('sent');
    clock.advance(2 * 60_000);
    expect(await app.heartbeat!.beat()).toBe('skipped');
  });

  it('never shows its URL or token: not in logs (a failed ping), not in a config error, not in the database', async () => {
    const ping = await pingServer();
    const dead = ping.url.replace(/:\d+\//, ':9/'); // port 9 (discard): nothing listens
    const w = await world();
    const app = await w.app({ heartbeat: { url: `${dead}?key=${TOKEN}-query`, every: '1m' } });
    await app.runOnce();
    expect(await app.heartbeat!.beat()).toBe('failed');
    expect(w.logs.text).toContain('heartbeat ping failed');
    expect(w.logs.text).not.toContain(TOKEN);
    await app.stop();
    expect(readFileSync(w.dbPath).includes(Buffer.from(TOKEN))).toBe(false);

    const r = parseConfig(`api: { base_url: https://p.example, key: k }\nheartbeat: { url: "ftp://hc.example/${TOKEN}" }\n`, 'hb.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    expect(r.ok).toBe(false);
    const text = r.ok ? '' : formatConfigErrors(r.errors);
    expect(text).toBe('hb.yaml:2:19: heartbeat.url: must be an http(s) URL like https://hc-ping.com/<uuid> (a dead man\'s switch check) (got "[redacted]")');
  });

  it('judges health from cycle outcomes (pure): a missing scope neither helps nor stops it', () => {
    const failed = { status: 'failed' as const, entity: 'x', events: 0 };
    expect(cycleOutcome({ outcomes: [] })).toBe('good');
    expect(cycleOutcome({ outcomes: [failed, { status: 'unchanged', entity: 'y', events: 0 }] })).toBe('good');
    expect(cycleOutcome({ outcomes: [failed] })).toBe('bad');
    expect(cycleOutcome({ outcomes: [{ ...failed, error: { code: 'scope_missing' } as never }] })).toBe('neutral');
    // A cycle that failed as a whole (its results could not be stored) is bad, whatever it read before.
    expect(cycleOutcome({ outcomes: [], error: 'SqliteError: database or disk is full' })).toBe('bad');
    expect(cycleOutcome({ outcomes: [{ status: 'unchanged', entity: 'y', events: 0 }], error: 'SqliteError: database or disk is full' })).toBe('bad');
    expect(heartbeatHealthy({ lastGood: 100, failing: new Set() }, 150, 60)).toBe(true);
    expect(heartbeatHealthy({ lastGood: 100, failing: new Set() }, 161, 60)).toBe(false);
    expect(heartbeatHealthy({ lastGood: 100, failing: new Set(['health']) }, 110, 60)).toBe(false);
    expect(heartbeatHealthy({ lastGood: null, failing: new Set() }, 0, 60)).toBe(false);
  });
});

describe('the watchdog', () => {
  it('always fires: once at start, re-sent every `every` with a new id and repeat number, across a restart, never resolved', async () => {
    const hook = await startReceiver();
    cleanups.push(() => hook.close());
    const w = await world();
    // Webhook receivers refuse a signature timestamp more than 5 minutes off their clock.
    const clock = testClock(new Date().toISOString());
    const config = { watchdog: { every: '1m' }, channels: [{ name: 'deadman', type: 'webhook', url: hook.url, secret: TEST_SECRET }] };
    const app = await w.app(config, { now: clock.now });
    await app.runOnce();
    clock.advance(30_000);
    await app.timekeeper.tick();
    clock.advance(31_000);
    await app.timekeeper.tick();
    await app.worker.drain(5_000);
    await app.stop();

    const again = await w.app(config, { now: clock.now });
    clock.advance(61_000);
    await again.runOnce();
    const dogs = hook.accepted().map((r) => r.event!).filter((e) => e.data.name === 'hostwatch.watchdog');
    expect(hook.requests.every((r) => r.signatureError === null && r.cloudEventError === null)).toBe(true);
    expect(names(dogs)).toEqual(['hostwatch.watchdog:firing', 'hostwatch.watchdog:firing', 'hostwatch.watchdog:firing']);
    expect(dogs.map((e) => e.data['repeat'] ?? 0)).toEqual([0, 1, 2]);
    expect(new Set(dogs.map((e) => e.id)).size).toBe(3);
    expect(dogs[0]).toMatchObject({ type: 'hostwatch.hostwatch.watchdog', subject: 'hostwatch/watchdog', data: { severity: 'info', every_seconds: 60 } });
  });

  it('is off without the config key', async () => {
    const w = await world();
    const app = await w.app();
    await app.runOnce();
    expect(w.events.filter((e) => e.data.name === 'hostwatch.watchdog')).toEqual([]);
  });
});
