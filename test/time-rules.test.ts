/**
 * Rules that read the clock, in the daemon, on an injected clock shared by the simulator and
 * hostwatch: `backup.stale` fires when 26 hours pass with no poll change, at no API request,
 * and resolves when a good backup appears; the re-evaluation skips entities whose last
 * poll failed; `explain` says when and how the decision was taken.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../src/main.js';
import { explainEvent, explainWhyNot, type ExplainDeps } from '../src/rules/explain.js';
import { repos } from '../src/store/repos.js';
import { names, startWorld, type World } from './harness.js';
import { testClock, type TestClock } from './clock.js';

const HOUR = 3_600_000;

let world: World | null = null;
afterEach(async () => {
  await world?.close();
  world = null;
});

/** A world of one watched site whose simulator and daemon read the same hand-moved clock. */
async function clockWorld(): Promise<{ w: World; clock: TestClock; app: App }> {
  const clock = testClock('2026-11-21T10:00:00Z');
  const w = await startWorld({ sim: { now: () => new Date(clock.t) }, config: { sites: [1] } });
  world = w;
  const app = await w.app({}, { now: clock.now });
  return { w, clock, app };
}

function explainDeps(app: App, now: number): ExplainDeps {
  return { ...repos(app.store), rules: app.rules, now };
}

const apiRequests = (w: World): number => w.sim.requests.filter((r) => r.path.startsWith('/api/')).length;

describe('backup.stale in the daemon', () => {
  it('fires when 26 h pass with no poll change (no API request), and resolves when a good backup appears', async () => {
    const { w, clock, app } = await clockWorld();
    await app.runOnce(); // baseline: the newest Ok backup is from last night
    const newest = Math.max(...w.sim.world.getBackups(1)!.filter((b) => b.state === 'Ok').map((b) => Date.parse(b.created_at)));
    const base = w.events.length;

    // Just before 26 h since the newest good backup: nothing.
    clock.t = newest + 26 * HOUR - 60_000;
    const before = apiRequests(w);
    await app.timekeeper.tick();
    expect(names(w.events.slice(base))).toEqual([]);

    // A minute later it is not evaluated again: backup-stale runs every 10 minutes.
    clock.t = newest + 26 * HOUR + 60_000;
    expect((await app.timekeeper.tick()).pass.rules).not.toContain('backup-stale');
    // Its next turn, 26 h passed: the stored list is judged again and the alert fires, with no request made.
    clock.t = newest + 26 * HOUR + 10 * 60_000;
    const tick = await app.timekeeper.tick();
    expect(tick.pass.rules).toContain('backup-stale');
    expect(apiRequests(w)).toBe(before);
    const fired = w.events.slice(base);
    expect(names(fired)).toEqual(['backup.stale:firing']);
    expect(fired[0]!.subject).toBe('sites/1/backups');
    expect(fired[0]!.data.changes).toEqual([]);
    expect(fired[0]!.time).toBe(new Date(clock.t).toISOString());

    // It keeps firing (no repeat, no second event) while nothing changes.
    clock.advance(HOUR);
    await app.timekeeper.tick();
    expect(names(w.events.slice(base))).toEqual(['backup.stale:firing']);

    // A backup reaches Ok: the next poll sees it, the alert resolves.
    w.sim.world.addBackup(1, { state: 'Ok', type: 'Automatic' });
    await app.runOnce();
    expect(names(w.events.slice(base))).toEqual(['backup.stale:firing', 'backup.completed', 'backup.stale:resolved']);
  });

  it('the scheduler\'s clock tick does it while the daemon runs', async () => {
    const { w, clock, app } = await clockWorld();
    await app.runOnce();
    const base = w.events.length;
    await app.start();
    clock.advance(30 * HOUR);
    const deadline = Date.now() + 10_000;
    while (!w.events.slice(base).some((e) => e.data.name === 'backup.stale') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(names(w.events.slice(base)).filter((n) => n.startsWith('backup.'))).toEqual(['backup.stale:firing']);
  });

  it('is not judged on a snapshot whose last poll failed: a failed fetch is not 26 h of silence', async () => {
    const { w, clock, app } = await clockWorld();
    await app.runOnce();
    const base = w.events.length;
    w.sim.faults.add({ path: '^/sites/1/backups$', kind: 'status', status: 503 });
    clock.advance(HOUR);
    await app.runOnce(); // the backups poll fails
    clock.advance(30 * HOUR);
    await app.timekeeper.tick({ force: true });
    expect(names(w.events.slice(base)).filter((n) => n.startsWith('backup.'))).toEqual([]);
  });

  it('explain says when it was evaluated, that no poll was involved, and what the absence looked for', async () => {
    const { w, clock, app } = await clockWorld();
    await app.runOnce();
    const deps = () => explainDeps(app, clock.t);
    // Before: false now, and when it would fire.
    const before = await explainWhyNot(deps(), 'sites/1/backups', 'backup-stale');
    expect(before.reason).toBe('condition_false');
    expect(before.lines).toContain(`  evaluated at now = ${new Date(clock.t).toISOString()}`);
    expect(before.lines.some((l) => /^it fires at \S+ if no matching record appears by then$/.test(l))).toBe(true);

    clock.advance(30 * HOUR);
    await app.timekeeper.tick();
    const e = w.events.find((x) => x.data.name === 'backup.stale')!;
    const lines = (await explainEvent(deps(), e.id))!;
    expect(lines).toContain(`  evaluated at now = ${new Date(clock.t).toISOString()} (re-evaluated on the stored snapshot as time passed: no poll, no API request)`);
    expect(lines).toContain("  absent: no record with item.state == 'Ok' (time item.created_at) in the last 26 h");
    expect(lines.some((l) => /^ {4}absent\.last_match = "\d{4}-/.test(l))).toBe(true);
  });
});

describe('hourly_backup.stale and subscription.expiring in the daemon', () => {
  it('hourly backups that stopped fire 3 h after their last good run; a paid tool fires 14 days before its paid_until', async () => {
    const { w, clock, app } = await clockWorld();
    w.sim.world.resources.patch('hourly', 1, [
      { op: 'set', path: 'active', value: true },
      { op: 'set', path: 'last_ok', value: new Date(clock.t - 10 * 60_000).toISOString() },
      { op: 'set', path: 'paid_until', value: '2027-06-01' },
    ]);
    w.sim.world.resources.patch('rank', null, [{ op: 'set', path: 'plan.paid_until', value: '2026-12-10' }]);
    await app.runOnce();
    const base = w.events.length;
    clock.advance(3 * HOUR);
    await app.timekeeper.tick();
    expect(names(w.events.slice(base))).toEqual(['hourly_backup.stale:firing']);
    // 2026-12-10 is 14 days after 2026-11-26.
    clock.t = Date.parse('2026-11-26T00:00:00Z');
    await app.timekeeper.tick();
    expect(names(w.events.slice(base))).toContain('subscription.expiring:firing');
    const sub = w.events.slice(base).find((e) => e.data.name === 'subscription.expiring')!;
    expect(sub.subject).toBe('rank');
    expect(sub.data.summary).toBe('Rank tracking is paid until 2026-12-10 (14 days)');
  });
});
