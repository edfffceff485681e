/**
 * Failures are loud: a refused key or an unreachable panel raises an operator alert at
 * once, `poll --once` exits non-zero when nothing could be read, /readyz turns 503 after a
 * while without a successful poll, source.degraded fires on time as well as on a count, a
 * mass change becomes one summary event, a site list over `sites.max` is refused, and a
 * secret the API echoes back is stored nowhere.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { entityOf, sitesSource } from '../src/sources/registry.js';
import { names, rows, startWorld, TEST_KEY, type World } from './harness.js';
import { hostwatch } from './run-cli.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const only = (w: World, name: string): string[] => names(w.events).filter((n) => n.startsWith(name));

describe('a refused key or an unreachable panel', () => {
  it('fires api.unauthorized once, in the first cycle whose every request is refused, and resolves it with the next success', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    expect(only(world, 'api.')).toEqual([]);
    world.sim.api.deleteKey(TEST_KEY);
    await app.runOnce();
    // One alert for the whole API, not one per source.
    expect(only(world, 'api.')).toEqual(['api.unauthorized:firing']);
    const firing = world.events.find((e) => e.data.name === 'api.unauthorized')!;
    expect(firing).toMatchObject({ subject: 'api', type: 'hostwatch.api.unauthorized', data: { severity: 'critical', code: 'unauthorized', site_id: null } });
    // Fired once two sources' cycles failed alike: the site list, then the first to finish.
    expect((firing.data['sources'] as string[])[0]).toBe('sites');
    expect(firing.data['sources']).toHaveLength(2);
    expect(firing.data.summary).toContain('refuses the API key');
    await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unauthorized:firing']);
    world.sim.api.setKey(TEST_KEY, '*');
    await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unauthorized:firing', 'api.unauthorized:resolved']);
    // Shown while it fires, like every alert, and gone once it resolved.
    expect(rows<{ status: string }>(world, "SELECT status FROM alerts WHERE rule = 'api-unauthorized'")).toEqual([{ status: 'resolved' }]);
  });

  it('says a refused key once: no source.degraded for the failures api.unauthorized says, and a source degraded before keeps its alert until it polls normally', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    // The jobs endpoint fails on its own: three failed polls in a row, source.degraded.
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    for (let i = 0; i < 3; i++) await app.runOnce();
    expect(only(world, 'source.degraded')).toEqual(['source.degraded:firing']);
    expect(world.events.find((e) => e.data.name === 'source.degraded')!.subject).toBe('sources/jobs');
    // Then the key is revoked: every source fails, jobs with the rest, for four cycles.
    world.sim.faults.clear();
    world.sim.api.deleteKey(TEST_KEY);
    for (let i = 0; i < 4; i++) await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unauthorized:firing']);
    // Not one source.degraded per source on top, and the jobs alert is not resolved by it.
    expect(only(world, 'source.degraded')).toEqual(['source.degraded:firing']);
    world.sim.api.setKey(TEST_KEY, '*');
    await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unauthorized:firing', 'api.unauthorized:resolved']);
    expect(only(world, 'source.degraded')).toEqual(['source.degraded:firing', 'source.degraded:resolved']);
    expect(world.events.filter((e) => e.data.name === 'source.degraded').map((e) => e.subject)).toEqual(['sources/jobs', 'sources/jobs']);
  });

  it('fires api.unreachable when no request of a cycle reaches the panel, and not for a failure of one source', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    await app.runOnce();
    expect(only(world, 'api.')).toEqual([]);
    // One endpoint that cannot be reached while the others answer is that source's problem.
    world.sim.faults.clear();
    world.sim.faults.add({ path: '^/sites$', kind: 'reset' });
    await app.runOnce();
    expect(only(world, 'api.')).toEqual([]);
    world.sim.faults.clear();
    world.sim.faults.add({ path: '.*', kind: 'reset' });
    await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unreachable:firing']);
    expect(world.events.find((e) => e.data.name === 'api.unreachable')!.data['code']).toBe('network');
    world.sim.faults.clear();
    await app.runOnce();
    expect(only(world, 'api.')).toEqual(['api.unreachable:firing', 'api.unreachable:resolved']);
  });

  it('makes poll --once exit 3 and say why when no source could be read, and exit 0 when some could', async () => {
    world = await startWorld({ sim: { sites: 1 } });
    const config = join(world.dir, 'config.yaml');
    writeFileSync(config, world.yaml());
    const env = { SIM_URL: world.sim.url, DB: world.dbPath };
    const wrong = await hostwatch(['poll', '--once', '-c', config], { env: { ...env, API_KEY: 'not-the-key' } });
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toMatch(/hostwatch poll: no source could be read: all \d+ polls failed/);
    expect(wrong.stdout).toBe('');
    expect(rows<{ type: string; status: string }>(world, 'SELECT type, status FROM events')).toEqual([{ type: 'hostwatch.api.unauthorized', status: 'firing' }]);
    const right = await hostwatch(['poll', '--once', '-c', config], { env: { ...env, API_KEY: TEST_KEY } });
    expect(right.code).toBe(0);
    expect(rows<{ type: string; status: string }>(world, "SELECT type, status FROM events WHERE type LIKE 'hostwatch.api.%' ORDER BY seq")).toEqual([
      { type: 'hostwatch.api.unauthorized', status: 'firing' },
      { type: 'hostwatch.api.unauthorized', status: 'resolved' },
    ]);
  });
});

describe('/readyz', () => {
  it('turns 503 once no poll has succeeded for server.not_ready_after, and ready again after one does', async () => {
    world = await startWorld({ sim: { sites: 1 }, config: { server: { listen: '127.0.0.1:0', not_ready_after: '1m' } } });
    let skew = 0;
    const app = await world.app({}, { now: () => Date.now() + skew });
    const cycled = new Promise((r) => app.scheduler.once('cycle:end', r));
    await app.start();
    await cycled;
    const ready = async (): Promise<{ status: number; body: Record<string, unknown> }> => {
      const res = await fetch(`${app.serverUrl}/readyz`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready', polling: true } });
    world.sim.api.deleteKey(TEST_KEY);
    skew = 61_000;
    expect(await ready()).toMatchObject({ status: 503, body: { status: 'not ready', database: true, scheduler: true, polling: false } });
    world.sim.api.setKey(TEST_KEY, '*');
    await app.runOnce();
    expect(await ready()).toMatchObject({ status: 200, body: { polling: true } });
  });
});

describe('source.degraded', () => {
  it('fires on time as well as on a count: two failed polls a minute apart are enough when degraded.after is 1m', async () => {
    world = await startWorld({ config: { degraded: { after_failures: 5, after: '1m' } } });
    let skew = 0;
    const app = await world.app({}, { now: () => Date.now() + skew });
    world.sim.faults.add({ path: '^/sites/3/health$', kind: 'status', status: 500 });
    await app.runOnce();
    await app.runOnce();
    // Two failures within seconds: neither the count (5) nor the time (1m) is reached.
    expect(only(world, 'source.')).toEqual([]);
    skew = 61_000;
    await app.runOnce();
    expect(only(world, 'source.')).toEqual(['source.degraded:firing']);
    const e = world.events.find((x) => x.data.name === 'source.degraded')!;
    expect(e.data).toMatchObject({ source: 'health', failing: 1 });
    expect(rows<{ failing_since: number | null }>(world, "SELECT failing_since FROM poll_state WHERE source = 'health' AND entity = 'sites/3/health'")[0]!.failing_since).toBeLessThan(Date.now() + skew - 60_000);
    world.sim.faults.clear();
    await app.runOnce();
    expect(only(world, 'source.')).toEqual(['source.degraded:firing', 'source.degraded:resolved']);
    expect(rows(world, "SELECT failing_since FROM poll_state WHERE source = 'health' AND entity = 'sites/3/health'")).toEqual([{ failing_since: null }]);
  });
});

describe('a mass change', () => {
  it('emits at most max_events change events per poll, then one source.mass_change; the whole list is in the snapshot and the change log', async () => {
    world = await startWorld({ sim: { sites: 5 }, config: { sources: { sites: { max_events: 20 } } } });
    const app = await world.app();
    const ref = entityOf(sitesSource, null);
    const site = (id: number): Record<string, unknown> => ({ id, domain: `site-${id}.example.com`, state: 'Ready' });
    const five = [1, 2, 3, 4, 5].map(site);
    await app.poller.ingest(ref, five, 0);
    const grown = [...five, ...Array.from({ length: 995 }, (_, i) => site(6 + i))];
    await app.poller.ingest(ref, grown, 0);
    const added = world.events.filter((e) => e.data.name === 'site.added');
    expect(added).toHaveLength(20);
    expect(added.map((e) => e.data.site_id)).toEqual(Array.from({ length: 20 }, (_, i) => 6 + i));
    const summary = world.events.filter((e) => e.data.name === 'source.mass_change');
    expect(summary).toHaveLength(1);
    expect(summary[0]).toMatchObject({
      subject: 'sites',
      type: 'hostwatch.source.mass_change',
      data: { severity: 'warning', source: 'sites', total: 995, sent: 20, held: 975, by_event: { 'site.added': 995 }, max_events: 20 },
    });
    expect(summary[0]!.data.status).toBeUndefined();
    expect(rows<{ n: number }>(world, "SELECT count(*) n FROM events WHERE type = 'hostwatch.site.added'")).toEqual([{ n: 20 }]);
    // Nothing of the 995 is lost: the snapshot and its change-log version hold them all.
    const [snap] = rows<{ body: string; version: number }>(world, "SELECT body, version FROM snapshots WHERE source = 'sites'");
    expect((JSON.parse(snap!.body) as unknown[]).length).toBe(1000);
    expect(rows<{ n: number }>(world, `SELECT count(*) n FROM change_log WHERE source = 'sites' AND version = ${snap!.version}`)).toEqual([{ n: 1 }]);
    // Evidence only for the events that were stored.
    expect(rows<{ n: number }>(world, 'SELECT count(*) n FROM event_evidence WHERE event_id NOT IN (SELECT id FROM events)')).toEqual([{ n: 0 }]);
    // The same poll again (a retry) gives the same summary id: stored once.
    await app.poller.ingest(ref, grown, 0);
    expect(world.events.filter((e) => e.data.name === 'source.mass_change')).toHaveLength(1);
  });

  it('is logged once its summary is stored, not for a poll whose writes the database refused', async () => {
    world = await startWorld({ sim: { sites: 5 }, config: { sources: { sites: { max_events: 20 } } } });
    const app = await world.app();
    const ref = entityOf(sitesSource, null);
    const site = (id: number): Record<string, unknown> => ({ id, domain: `site-${id}.example.com`, state: 'Ready' });
    await app.poller.ingest(ref, [1, 2, 3, 4, 5].map(site), 0);
    const grown = Array.from({ length: 100 }, (_, i) => site(1 + i));
    const db = new BetterSqlite3(world.dbPath);
    try {
      db.exec("CREATE TRIGGER test_refuse BEFORE INSERT ON change_log WHEN NEW.source = 'sites' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
      await expect(app.poller.ingest(ref, grown, 0)).rejects.toThrow(/refused by the test/);
      expect(world.logs.lines.filter((l) => l.includes('mass change'))).toEqual([]);
      db.exec('DROP TRIGGER test_refuse');
    } finally {
      db.close();
    }
    await app.poller.ingest(ref, grown, 0);
    expect(world.events.filter((e) => e.data.name === 'source.mass_change')).toHaveLength(1);
    expect(world.logs.lines.filter((l) => l.includes('mass change'))).toHaveLength(1);
  });

  it('refuses a site list longer than sites.max as a failed poll that keeps the previous list', async () => {
    world = await startWorld({ sim: { sites: 3 }, config: { sites: { max: 10 } } });
    const app = await world.app();
    await app.runOnce();
    for (let i = 0; i < 8; i++) world.sim.world.addSite({});
    await app.runOnce();
    expect(only(world, 'site.added')).toEqual([]);
    const [state] = rows<{ last_error_code: string; last_error: string }>(world, "SELECT last_error_code, last_error FROM poll_state WHERE source = 'sites' AND entity = 'sites'");
    expect(state).toEqual({ last_error_code: 'bad_response', last_error: '/sites: the site list has 11 sites, more than sites.max (10); the previous list is kept. Raise sites.max if this is real' });
    const [snap] = rows<{ body: string }>(world, "SELECT body FROM snapshots WHERE source = 'sites'");
    expect((JSON.parse(snap!.body) as unknown[]).length).toBe(3);
    // The same list again is refused again. It must not pass for "unchanged" and clear the
    // failure: the refused reply's ETag is not sent back (the simulator would answer 304).
    const before = world.sim.requests.length;
    await app.runOnce();
    expect(world.sim.requests.slice(before).filter((r) => r.path === '/api/v1/sites').map((r) => [r.conditional, r.status])).toEqual([[false, 200]]);
    const again = rows<{ consecutive_failures: number; last_error_code: string }>(world, "SELECT consecutive_failures, last_error_code FROM poll_state WHERE source = 'sites' AND entity = 'sites'");
    expect(again).toEqual([{ consecutive_failures: 2, last_error_code: 'bad_response' }]);
    expect(only(world, 'site.added')).toEqual([]);
  });
});

describe('a reply a view refuses', () => {
  it('fails the view again when the same reply comes back, instead of reading the 304 as "unchanged"', async () => {
    world = await startWorld({ sim: { sites: 1 } });
    const app = await world.app();
    // A security reply its source takes (an object) but its rules view cannot (not a list).
    const body = JSON.stringify({ data: { under_attack: false, rules: { http_request_firewall_custom: 'not a list' } } });
    world.sim.faults.add({ path: '^/sites/1/security$', kind: 'body', body });
    await app.runOnce();
    await app.runOnce();
    const state = rows<{ consecutive_failures: number; last_error: string }>(world, "SELECT consecutive_failures, last_error FROM poll_state WHERE source = 'security_rules'");
    expect(state).toEqual([{ consecutive_failures: 2, last_error: '/sites/1/security: "rules.http_request_firewall_custom" is string, not a list' }]);
    // The security source itself took both replies.
    expect(rows(world, "SELECT consecutive_failures FROM poll_state WHERE source = 'security' AND consecutive_failures > 0")).toEqual([]);
  });
});

describe('a secret the API echoes back', () => {
  it('is in no snapshot, change-log row, event or delivery: the reply is scrubbed before it is stored', async () => {
    const secret = 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=';
    world = await startWorld({ sim: { sites: 2 }, config: { channels: [{ name: 'hook', type: 'webhook', url: 'http://127.0.0.1:9/hook', secret, timeout: '1s' }] } });
    const app = await world.app();
    await app.runOnce();
    // A hostile (or careless) panel: a new site whose name carries the key and the webhook secret.
    world.sim.world.addSite({ domain: `leak-${TEST_KEY}.example.com`, name: `by ${secret.slice('whsec_'.length)}` });
    await app.runOnce();
    const added = world.events.find((e) => e.data.name === 'site.added')!;
    expect(added.data.domain).toBe('leak-[REDACTED].example.com');
    const everything = [
      ...rows<{ body: string }>(world, 'SELECT body FROM snapshots'),
      ...rows<{ body: string }>(world, 'SELECT body FROM change_log'),
      ...rows<{ body: string }>(world, 'SELECT body FROM events'),
      ...rows<{ body: string }>(world, 'SELECT body FROM event_evidence'),
      ...rows<{ body: string }>(world, "SELECT coalesce(last_error, '') AS body FROM outbox"),
    ]
      .map((r) => r.body)
      .join('\n');
    expect(everything).toContain('[REDACTED]');
    expect(everything).not.toContain(TEST_KEY);
    expect(everything).not.toContain(secret.slice('whsec_'.length));
  });
});
