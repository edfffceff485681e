/**
 * Inhibition end to end (simulator → poller → notifier → webhook receiver): while
 * site.offline fires for a site, that site's other alerts are stored but held (changes,
 * likely causes, pass at once unless a target names them); when it resolves they are
 * released, except an alert that fired and resolved meanwhile, which is dropped (both
 * ends). Other sites are not affected.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostwatchWithEnv as hostwatch } from './run-cli.js';
import { names, startWorld, TEST_KEY, type World, rows } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';
import { SilencesRepo } from '../src/store/silences-repo.js';
import { Control } from './catalog-world.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const delivered = (hook: Receiver): string[] =>
  hook.accepted().map((r) => `${r.event!.data.site_id}:${r.event!.data.name}${r.event!.data.status ? `:${r.event!.data.status}` : ''}`);

/** A simulator world and a webhook receiver (both closed after the test), and the channel list that points at it. */
async function worldWithHook(): Promise<{ w: World; hook: Receiver; channels: Array<Record<string, unknown>> }> {
  const w = await startWorld();
  const hook = await startReceiver();
  cleanups.push(() => w.close(), () => hook.close());
  return { w, hook, channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] };
}

describe('inhibition', () => {
  it('an event released by an inhibition into a silence is not sent, and is not called released', async () => {
    const { w, hook, channels } = await worldWithHook();
    const app = await w.app({ channels });
    const sim = w.sim.world;
    await app.runOnce(); // baseline
    sim.setHealth(1, { status: 'offline' });
    await app.runOnce();
    sim.setUsage(1, { diskUsedMib: sim.getUsage(1)!.disk.limit_mib + 100 });
    await app.runOnce(); // usage.disk_high and usage.over_limit held by the inhibition
    const now = Date.now();
    await new SilencesRepo(app.store).add({
      id: 'sil-usage', match: "name.startsWith('usage.')", starts_at: now - 1000, ends_at: now + 3_600_000,
      comment: 'disk is being moved', created_by: 'test', created_at: now, expired_at: null,
    });
    sim.setHealth(1, { status: 'online' });
    await app.runOnce(); // the inhibition ends; the usage alerts now meet the silence
    expect(delivered(hook).sort()).toEqual(['1:site.offline:firing', '1:site.offline:resolved']);
    expect(rows(w, "SELECT json_extract(body, '$.data.name') AS name, held_outcome, silenced_by FROM events WHERE held_by IS NOT NULL ORDER BY name")).toEqual([
      { name: 'usage.disk_high', held_outcome: 'suppressed', silenced_by: 'sil-usage' },
      { name: 'usage.over_limit', held_outcome: 'suppressed', silenced_by: 'sil-usage' },
    ]);
  });

  it('a site.offline already firing when the daemon starts with inhibition configured holds back that site\'s other events', async () => {
    const { w, hook, channels } = await worldWithHook();
    const before = await w.app({ channels, inhibit: [] });
    const sim = w.sim.world;
    await before.runOnce(); // baseline
    sim.setHealth(1, { status: 'offline' });
    await before.runOnce();
    await before.stop();
    expect(rows(w, 'SELECT * FROM inhibitions')).toEqual([]);

    const after = await w.app({ channels }); // the default: site.offline inhibits
    sim.setUsage(1, { diskUsedMib: sim.getUsage(1)!.disk.limit_mib + 100 });
    await after.runOnce();
    expect(delivered(hook)).toEqual(['1:site.offline:firing']);
    expect(rows(w, "SELECT json_extract(body, '$.data.name') AS name, held_by FROM events WHERE held_by IS NOT NULL ORDER BY name")).toEqual([
      { name: 'usage.disk_high', held_by: 'inhibited:site.offline:1' },
      { name: 'usage.over_limit', held_by: 'inhibited:site.offline:1' },
    ]);
  });

  it('holds a site\'s other alerts while site.offline fires, lets a change through at once, releases what it held when it resolves, and drops an alert that fired and resolved meanwhile', async () => {
    const { w, hook, channels } = await worldWithHook();
    const app = await w.app({ channels });
    const sim = w.sim.world;
    await app.runOnce(); // baseline

    sim.setHealth(1, { status: 'offline' });
    await app.runOnce();
    expect(delivered(hook)).toEqual(['1:site.offline:firing']);

    // While site 1 is offline: a failed backup (a change: sent at once), a usage alert that
    // fires (held), and site 2's failed backup (another site: not affected).
    sim.addBackup(1, { state: 'Error' });
    const usage = sim.getUsage(1)!;
    sim.setUsage(1, { diskUsedMib: usage.disk.limit_mib + 100 });
    sim.addBackup(2, { state: 'Error' });
    await app.runOnce();
    expect(delivered(hook).slice(1).sort()).toEqual(['1:backup.failed', '2:backup.failed']);
    // ... and the usage alert resolves again, still while held.
    sim.setUsage(1, { diskUsedMib: 1 });
    await app.runOnce();
    expect(delivered(hook)).toHaveLength(3);

    const held = rows<{ name: string; held_by: string; held_outcome: string | null }>(
      w,
      "SELECT json_extract(body, '$.data.name') || coalesce(':' || status, '') AS name, held_by, held_outcome FROM events WHERE held_by IS NOT NULL ORDER BY seq",
    );
    expect(held.map((h) => h.name).sort()).toEqual(['usage.disk_high:firing', 'usage.disk_high:resolved', 'usage.over_limit:firing', 'usage.over_limit:resolved'].sort());
    for (const h of held) expect(h).toMatchObject({ held_by: 'inhibited:site.offline:1', held_outcome: null });
    // Stored and in the event log all along.
    expect(names(w.events)).toContain('usage.disk_high:firing');

    sim.setHealth(1, { status: 'online' });
    await app.runOnce();
    expect(delivered(hook).slice(3)).toEqual(['1:site.offline:resolved']);
    const outcomes = rows<{ name: string; held_outcome: string }>(
      w,
      "SELECT json_extract(body, '$.data.name') || coalesce(':' || status, '') AS name, held_outcome FROM events WHERE held_by IS NOT NULL ORDER BY name",
    );
    expect(outcomes).toEqual([
      { name: 'usage.disk_high:firing', held_outcome: 'dropped' },
      { name: 'usage.disk_high:resolved', held_outcome: 'dropped' },
      { name: 'usage.over_limit:firing', held_outcome: 'dropped' },
      { name: 'usage.over_limit:resolved', held_outcome: 'dropped' },
    ]);
    expect(rows(w, 'SELECT * FROM inhibitions')).toEqual([]);

    // What an operator sees: every held event, why, and what became of it.
    await app.stop();
    const config = join(w.dir, 'config.yaml');
    writeFileSync(config, w.yaml({ channels }));
    const cli = await hostwatch(['deliveries', '--held', '-c', config], { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath });
    expect(cli.code).toBe(0);
    const lines = cli.stdout.split('\n').filter(Boolean);
    expect(lines).toHaveLength(4);
    expect(lines.filter((l) => / hostwatch\.usage\.\S+ sites\/1\/usage .* inhibited:site\.offline:1 \(dropped\)$/.test(l))).toHaveLength(4);
  }, 90_000);

  it('lets a DNS record change, a likely cause, through at once while site.offline fires; a pair whose target names changes holds them', async () => {
    const { w, hook, channels } = await worldWithHook();
    const c = new Control(w.sim);
    await c.still();
    const record = (await c.state<{ records: { id: number; type: string }[] }>('dns', 2)).records.find((r) => r.type === 'A')!.id;
    const app = await w.app({ channels });
    await app.runOnce();
    w.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    await c.set('dns', { [`records.${record}.value`]: '192.0.2.200' }, 2);
    await app.runOnce();
    expect(delivered(hook)).toEqual(['2:site.offline:firing', '2:dns.record_changed']);
    expect(rows(w, 'SELECT count(*) AS n FROM events WHERE held_by IS NOT NULL')).toEqual([{ n: 0 }]);

    const { w: w2, hook: hook2, channels: channels2 } = await worldWithHook();
    const c2 = new Control(w2.sim);
    await c2.still();
    const app2 = await w2.app({ channels: channels2, inhibit: [{ source: 'site.offline', target: "name == 'dns.record_changed'" }] });
    await app2.runOnce();
    w2.sim.world.setHealth(2, { status: 'offline' });
    await app2.runOnce();
    await c2.set('dns', { [`records.${record}.value`]: '192.0.2.201' }, 2);
    await app2.runOnce();
    expect(delivered(hook2)).toEqual(['2:site.offline:firing']);
    expect(rows(w2, "SELECT json_extract(body, '$.data.name') AS name, held_by FROM events WHERE held_by IS NOT NULL")).toEqual([
      { name: 'dns.record_changed', held_by: 'inhibited:site.offline:2' },
    ]);
  }, 60_000);

  it('releases an alert still firing when the inhibition ends, and can be turned off with inhibit: []', async () => {
    const { w, hook, channels } = await worldWithHook();
    const app = await w.app({ channels });
    const sim = w.sim.world;
    await app.runOnce();
    sim.setHealth(3, { status: 'offline' });
    await app.runOnce();
    sim.setUsage(3, { diskUsedMib: sim.getUsage(3)!.disk.limit_mib + 100 });
    await app.runOnce();
    expect(delivered(hook)).toEqual(['3:site.offline:firing']);
    sim.setHealth(3, { status: 'online' });
    await app.runOnce();
    expect(delivered(hook).sort()).toEqual(['3:site.offline:firing', '3:site.offline:resolved', '3:usage.disk_high:firing', '3:usage.over_limit:firing'].sort());

    const { w: w2, hook: hook2, channels: channels2 } = await worldWithHook();
    const app2 = await w2.app({ channels: channels2, inhibit: [] });
    await app2.runOnce();
    w2.sim.world.setHealth(3, { status: 'offline' });
    await app2.runOnce();
    w2.sim.world.setUsage(3, { diskUsedMib: w2.sim.world.getUsage(3)!.disk.limit_mib + 100 });
    await app2.runOnce();
    expect(delivered(hook2).sort()).toEqual(['3:site.offline:firing', '3:usage.disk_high:firing', '3:usage.over_limit:firing'].sort());
  });
});

describe('the dispatch decision (pure)', async () => {
  const { Dispatcher, dropOnRelease, inhibitionKey } = await import('../src/notify/dispatch.js');
  const { siteEvent } = await import('./events-fixture.js');
  const config = {
    routes: [],
    channels: [{ name: 'log', type: 'console' as const }],
    inhibit: [{ source: 'site.offline', target: "severity != 'critical'" }],
  };
  const view = (inhibited: string[] = [], silences: Array<{ id: string; match: string }> = []) => ({
    now: 1_000,
    silences: silences.map((s) => ({ ...s, starts_at: 0, ends_at: 10_000, comment: 'c', created_by: 't', created_at: 0, expired_at: null })),
    inhibitions: (site: number) => inhibited.filter((k) => k.endsWith(`:${site}`)),
    group: () => ({ pendingDue: null, lastSent: null }),
    incidents: () => new Set<string>(),
  });

  it('a silence is decided before an inhibition; an inhibition only holds what its target matches, on its own site', () => {
    const d = new Dispatcher(config);
    const held = siteEvent('h', 5, { severity: 'warning' });
    const key = inhibitionKey('site.offline', 5);
    expect(d.decide(held, view([key]))).toEqual({ action: 'inhibited', by: `inhibited:${key}` });
    expect(d.decide(held, view([key], [{ id: 's1', match: 'site_id == 5' }]))).toEqual({ action: 'silenced', silenceId: 's1' });
    expect(d.decide(siteEvent('c', 5, { severity: 'critical' }), view([key]))).toMatchObject({ action: 'queue' });
    expect(d.decide(siteEvent('o', 6), view([key]))).toMatchObject({ action: 'queue' });
    // The inhibiting alert never holds back itself.
    expect(d.decide(siteEvent('r', 5, { name: 'site.offline', status: 'resolved' }), view([key]))).toMatchObject({ action: 'queue' });
    expect(d.decide(held, view([key]), { skipInhibition: key })).toEqual({ action: 'queue', deliveries: [{ channel: 'log', groupKey: null, dueAt: 1_000 }] });
  });

  it('without a target, holds the site\'s alerts and lets its change events pass', () => {
    const d = new Dispatcher({ ...config, inhibit: [{ source: 'site.offline', target: null }] });
    const key = inhibitionKey('site.offline', 5);
    expect(d.decide(siteEvent('a', 5, { name: 'usage.disk_high', status: 'firing' }), view([key]))).toEqual({ action: 'inhibited', by: `inhibited:${key}` });
    expect(d.decide(siteEvent('r', 5, { name: 'usage.disk_high', status: 'resolved' }), view([key]))).toEqual({ action: 'inhibited', by: `inhibited:${key}` });
    for (const name of ['dns.record_changed', 'security.rules_changed', 'file.changed', 'backup.failed']) {
      expect(d.decide(siteEvent(name, 5, { name }), view([key]))).toMatchObject({ action: 'queue' });
    }
  });

  it('a source alert starts an inhibition when it fires and ends it when it resolves', () => {
    const d = new Dispatcher(config);
    expect(d.inhibitionChange(siteEvent('f', 9, { name: 'site.offline', status: 'firing' }))).toEqual({ start: 'site.offline:9', source: 'site.offline', siteId: 9 });
    expect(d.inhibitionChange(siteEvent('r', 9, { name: 'site.offline', status: 'resolved' }))).toEqual({ end: 'site.offline:9', source: 'site.offline', siteId: 9 });
    expect(d.inhibitionChange(siteEvent('b', 9))).toBeNull();
  });

  it('on release, drops an alert whose firing and resolution were both held, and keeps the rest', () => {
    const held = [
      { id: 'f1', rule: 'usage-over', subject: 's/1', status: 'firing' },
      { id: 'c1', rule: 'backup-failed', subject: 's/1/b', status: null },
      { id: 'r0', rule: 'cron-paused', subject: 's/1/c', status: 'resolved' }, // fired before: its end is sent
      { id: 'r1', rule: 'usage-over', subject: 's/1', status: 'resolved' },
      { id: 'f2', rule: 'usage-over', subject: 's/1', status: 'firing' }, // fired again: still firing, sent
    ];
    expect([...dropOnRelease(held)].sort()).toEqual(['f1', 'r1']);
  });

  it('on release, pairs a resolution with its firing, not with a re-send (repeat) of it', () => {
    // Fired, re-sent and resolved while held: all three are dropped.
    const whole = [
      { id: 'f', rule: 'slow', subject: 's/1', status: 'firing' },
      { id: 'x', rule: 'slow', subject: 's/1', status: 'firing', repeat: true },
      { id: 'r', rule: 'slow', subject: 's/1', status: 'resolved' },
    ];
    expect([...dropOnRelease(whole)].sort()).toEqual(['f', 'r', 'x']);
    // Fired before the inhibition (sent), re-sent and resolved while held: the re-send is
    // dropped and the resolution is sent, so the receiver hears that it ended.
    const ended = [
      { id: 'x', rule: 'slow', subject: 's/1', status: 'firing', repeat: true },
      { id: 'r', rule: 'slow', subject: 's/1', status: 'resolved' },
    ];
    expect([...dropOnRelease(ended)]).toEqual(['x']);
  });
});
