/**
 * Alerts of a rule that is disabled or removed while they fire: at the next start they
 * resolve (a `resolved` event with the firing's alert_id, so a pager closes it), and an
 * inhibition they started ends, releasing what it held. Simulator → daemon → a Standard
 * Webhooks receiver; restarts are new apps on the same database.
 */
import BetterSqlite3 from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';
import { retiredAlertEnd, retiredBecause } from '../src/pipeline/retired-alerts.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function worldWithHook(): Promise<{ w: World; hook: Receiver; channels: Array<Record<string, unknown>> }> {
  const w = await startWorld();
  const hook = await startReceiver();
  cleanups.push(() => w.close(), () => hook.close());
  return { w, hook, channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] };
}

const delivered = (hook: Receiver): string[] =>
  hook.accepted().map((r) => `${r.event!.data.site_id}:${r.event!.data.name}${r.event!.data.status ? `:${r.event!.data.status}` : ''}`);

describe('an alert whose rule is disabled or removed', () => {
  it('resolves at the next start with the alert_id of its firing, and the inhibition it started releases what it held', async () => {
    const { w, hook, channels } = await worldWithHook();
    const sim = w.sim.world;
    const before = await w.app({ channels });
    await before.runOnce(); // baseline
    sim.setHealth(2, { status: 'offline' });
    await before.runOnce();
    // While site 2 is offline its disk goes over the limit: held by the inhibition.
    sim.setUsage(2, { diskUsedMib: sim.getUsage(2)!.disk.limit_mib + 100 });
    await before.runOnce();
    expect(delivered(hook)).toEqual(['2:site.offline:firing']);
    await before.stop();

    writeFileSync(join(w.dir, 'off.yaml'), 'rules:\n  - { name: site-offline, enabled: false }\n');
    const off = { channels, rules: ['./off.yaml'] };
    const after = await w.app(off);
    await after.runOnce();
    const got = hook.accepted().map((r) => r.event!);
    expect(delivered(hook).slice(1).sort()).toEqual(['2:site.offline:resolved', '2:usage.disk_high:firing', '2:usage.over_limit:firing']);
    const [fired, resolved] = got.filter((e) => e.data.name === 'site.offline');
    expect(resolved!.data['alert_id']).toBe(fired!.data['alert_id']);
    expect(resolved!.data.summary).toBe(`${fired!.data.summary} (resolved: rule site-offline is disabled)`);
    expect(await w.query("SELECT status FROM alerts WHERE rule = 'site-offline'")).toEqual([{ status: 'resolved' }]);
    expect(await w.query('SELECT * FROM inhibitions')).toEqual([]);
    expect(await w.query("SELECT held_outcome FROM events WHERE held_by = 'inhibited:site.offline:2'")).toEqual([{ held_outcome: 'released' }, { held_outcome: 'released' }]);

    // Site 2 back online, then frozen: nothing holds its alerts any more.
    sim.setHealth(2, { status: 'online' });
    sim.setUsage(2, { frozen: true });
    await after.runOnce();
    expect(delivered(hook)).toContain('2:site.frozen:firing');
    await after.stop();

    // A second start has nothing left to resolve.
    const again = await w.app(off);
    await again.runOnce();
    expect(delivered(hook).filter((d) => d === '2:site.offline:resolved')).toHaveLength(1);
  }, 60_000);

  it('of a rule file removed from the config resolves each firing alert once and forgets a pending one, leaving operator alerts alone', async () => {
    const { w, hook, channels } = await worldWithHook();
    writeFileSync(
      join(w.dir, 'mine.yaml'),
      `rules:
  - { name: disk-used, event: usage.disk_used, kind: alert, source: usage, when: "after.disk.used_mib >= 0.0", summary: "{{ domain }} uses disk" }
  - { name: disk-used-long, event: usage.disk_used_long, kind: alert, source: usage, for: 1h, when: "after.disk.used_mib >= 0.0" }
`,
    );
    const before = await w.app({ channels, rules: ['./mine.yaml'] });
    await before.runOnce();
    expect(delivered(hook).sort()).toEqual(['1:usage.disk_used:firing', '2:usage.disk_used:firing', '3:usage.disk_used:firing']);
    await before.stop();
    // An operator alert firing (no rule file defines it) stays as it is.
    const db = new BetterSqlite3(w.dbPath);
    db.exec("INSERT INTO alerts (rule, subject, site_id, status, seq, since, last_event_id, pending_since, clear_since, last_sent_at, repeats) VALUES ('source-degraded', 'sources/usage', NULL, 'firing', 1, 0, NULL, NULL, NULL, 0, 0)");
    db.close();

    const after = await w.app({ channels });
    // Done at start, before any poll.
    expect(await w.query('SELECT rule, status, pending_since FROM alerts ORDER BY rule, subject')).toEqual([
      ...Array.from({ length: 3 }, () => ({ rule: 'disk-used', status: 'resolved', pending_since: null })),
      ...Array.from({ length: 3 }, () => ({ rule: 'disk-used-long', status: 'resolved', pending_since: null })),
      { rule: 'source-degraded', status: 'firing', pending_since: null },
    ]);
    await after.runOnce();
    const resolved = hook.accepted().map((r) => r.event!).filter((e) => e.data.rule === 'disk-used' && e.data.status === 'resolved');
    expect(resolved.map((e) => e.data.site_id).sort()).toEqual([1, 2, 3]);
    for (const e of resolved) expect(e.data.summary).toMatch(/ uses disk \(resolved: rule disk-used was removed\)$/);
  }, 60_000);
});

describe('which alerts are retired (pure)', () => {
  const rule = (name: string, enabled: boolean) => ({ name, enabled }) as Parameters<typeof retiredBecause>[1][number];

  it('a rule missing from the loaded rules is removed, one with enabled: false disabled; operator and incident alerts are never retired', () => {
    const rules = [rule('site-offline', false), rule('site-slow', true)];
    expect(retiredBecause('site-offline', rules)).toBe('disabled');
    expect(retiredBecause('site-slow', rules)).toBeNull();
    expect(retiredBecause('my-rule', rules)).toBe('removed');
    expect(retiredBecause('source-degraded', rules)).toBeNull();
    expect(retiredBecause('platform-incident', rules)).toBeNull();
  });

  it('a firing alert whose last event is gone still resolves, with an event built from its row', () => {
    const row = { rule: 'my-rule', subject: 'sites/4/usage', site_id: 4, status: 'firing' as const, seq: 2, since: 0, last_event_id: 'x', pending_since: null, clear_since: 5, last_sent_at: 0, repeats: 1, body: null };
    const end = retiredAlertEnd(row, 'removed', undefined, { instance: 'test', now: 1_000 });
    expect(end.row).toMatchObject({ status: 'resolved', since: 1_000, clear_since: null, last_event_id: end.event!.id });
    expect(end.event!.data).toMatchObject({ name: 'my-rule', status: 'resolved', site_id: 4, summary: 'my-rule on sites/4/usage (resolved: rule my-rule was removed)' });
  });
});
