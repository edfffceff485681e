/**
 * Crash safety of the real daemon process (PRODUCT.md invariants 4 and 5): `hostwatch`
 * runs as a child process (the built CLI) against the simulator and a signed-webhook
 * receiver in this process; it is killed with SIGKILL at different points of a cycle and
 * started again. Whatever the kill point, the receiver must end up with exactly the events
 * the world changes call for — none lost, none invented, each under one stable id — and
 * those ids must be the ones a run that was never interrupted produces.
 */
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { StorageConfig } from '../src/config/types.js';
import { startSimulator, type HistoryEntry, type Simulator } from '../src/simulator/index.js';
import { openReader, queryOnce } from './db-reader.js';
import { ensureBuilt, kill, killAll, runCli, startCli, writeDaemonConfig } from './daemon-process.js';
import { tempDir } from './harness.js';
import { freshStorage, type Engine } from './pg.js';
import { startReceiver, TEST_SECRET, waitFor, type Receiver } from './receiver.js';
import { expectedFrom, triple, type Triple } from './truth.js';

const KEY = 'sim-key-crash-0123456789';
const SITES = 6;
/** A fixed simulator clock, so two simulators going through the same steps are identical. */
const CLOCK = (): Date => new Date('2026-11-21T12:00:00Z');

// ---- one scenario: a world, a receiver, a database, a config file ----------------------------

interface Scenario {
  sim: Simulator;
  hook: Receiver;
  storage: StorageConfig;
  configPath: string;
  /** The world's history from the end of the baseline on: the ground truth. */
  truth: HistoryEntry[];
  cleanup: () => Promise<void>;
}

const open: Scenario[] = [];

async function scenario(opts: { latencyMs?: number; engine?: Engine } = {}): Promise<Scenario> {
  const sim = await startSimulator({ seed: 7, sites: SITES, keys: { [KEY]: '*' }, now: CLOCK });
  const hook = await startReceiver();
  const { dir, cleanup: removeDir } = tempDir('hostwatch-crash-');
  const pgdb = opts.engine === 'postgres' ? await freshStorage('postgres') : null;
  const storage: StorageConfig = pgdb?.storage ?? { engine: 'sqlite', path: join(dir, 'hostwatch.db') };
  const cleanup = async (): Promise<void> => {
    await pgdb?.cleanup();
    removeDir();
  };
  const { configPath } = writeDaemonConfig(dir, {
    name: 'crash',
    simUrl: sim.url,
    key: KEY,
    hookUrl: hook.url,
    storage: storage.engine === 'sqlite' ? { path: storage.path } : { url: storage.url },
    overrides: {
      // A send timeout longer than any test, so an unanswered delivery stays in flight until the kill.
      channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET, timeout: '60s' }],
      delivery: { retry_schedule: ['100ms', '200ms', '300ms', '500ms', '1s'], drain_timeout: '10s' },
    },
  });
  const s: Scenario = { sim, hook, storage, configPath, truth: [], cleanup };
  open.push(s);

  // A backup in progress before the baseline, so its failure later also finishes a job.
  const { backup } = sim.world.startBackup(4);
  await runCli(['poll', '--once', '-c', configPath]);
  expect(await count(s, 'SELECT count(*) n FROM events')).toBe(0); // baseline: no events
  expect(hook.requests).toEqual([]);

  const mark = sim.world.history.length;
  sim.world.setHealth(1, { status: 'offline' });
  sim.world.setHealth(2, { status: 'offline' });
  sim.world.setHealth(3, { problems: 2 });
  sim.world.addBackup(3, { state: 'Error' });
  sim.world.setBackupState(4, backup.id, 'Error');
  const usage = sim.world.getUsage(5)!;
  sim.world.setUsage(5, { diskUsedMib: usage.disk.limit_mib + 200 });
  sim.world.setUsage(5, { frozen: true });
  sim.world.addBackup(6, { state: 'Ok' });
  s.truth = sim.world.history.slice(mark);

  if (opts.latencyMs) sim.faults.add({ path: '^/sites/\\d+/(health|usage|backups)$', kind: 'latency', ms: opts.latencyMs });
  return s;
}

async function closeAll(): Promise<void> {
  killAll();
  for (const s of open.splice(0)) {
    await s.hook.close();
    await s.sim.close();
    await s.cleanup();
  }
}
afterEach(closeAll);
afterAll(closeAll); // also after a failed beforeAll

/** A count read on a connection of its own (read-only on SQLite), as the daemon writes. */
async function count(s: Scenario, sql: string): Promise<number> {
  return (await queryOnce<{ n: number }>(s.storage, sql))[0]!.n;
}

/** Poll the database until `cond` holds. */
async function waitForDb(s: Scenario, sql: string, cond: (n: number) => boolean, what: string, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const n = await count(s, sql);
    if (cond(n)) return n;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 15));
  }
}

/** The entity (snapshot row) an event's subject belongs to: `sites/3/backups/17` → `sites/3/backups`. */
function entityOfSubject(subject: string): string {
  const parts = subject.split('/');
  if (parts[0] === 'jobs') return 'jobs';
  return parts[2] === 'backups' ? parts.slice(0, 3).join('/') : subject;
}

/**
 * Invariant 4 seen from outside: reads the database (read-only, each look one read
 * transaction) every few milliseconds while the daemon runs, and notes every moment at
 * which a changed snapshot is stored without the events it causes, or an event without
 * its snapshot, or an event without its outbox row.
 */
async function watchInvariant(s: Scenario, expected: readonly Triple[]): Promise<{ stop: () => Promise<{ reads: number; violations: string[] }> }> {
  const db = await openReader(s.storage);
  const violations = new Set<string>();
  let reads = 0;
  // Each look is one read transaction (REPEATABLE READ on PostgreSQL): one committed state.
  const look = (): Promise<void> =>
    db.snapshot(async () => {
      const changed = new Set((await db.all<{ entity: string }>('SELECT entity FROM snapshots WHERE version >= 2')).map((r) => r.entity));
      const events = await db.all<{ id: string; type: string; subject: string; status: string | null }>('SELECT id, type, subject, status FROM events');
      const queued = new Set((await db.all<{ event_id: string }>('SELECT event_id FROM outbox')).map((r) => r.event_id));
      const have = new Set(events.map((e) => `${e.type} ${e.subject} ${e.status ?? '-'}`));
      for (const t of expected) {
        const entity = entityOfSubject(t.split(' ')[1]!);
        if (changed.has(entity) && !have.has(t)) violations.add(`snapshot ${entity} is stored without its event ${t}`);
      }
      for (const e of events) {
        if (!changed.has(entityOfSubject(e.subject))) violations.add(`event ${e.type} ${e.subject} is stored without its snapshot`);
        if (!queued.has(e.id)) violations.add(`event ${e.type} ${e.subject} is stored without its outbox row`);
      }
      reads++;
    });
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        await look();
      } catch (e) {
        // A reader may briefly be refused while a restarted daemon recovers the WAL; look again.
        if (!/BUSY|LOCKED/.test(String((e as { code?: string }).code))) violations.add(`cannot read the database: ${String(e)}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await look();
      await db.close();
      return { reads, violations: [...violations] };
    },
  };
}

/** What arrived at the receiver, checked request by request, as distinct events. */
function arrivals(hook: Receiver): Map<string, { triple: Triple; body: string }> {
  const byId = new Map<string, { triple: Triple; body: string }>();
  for (const r of hook.requests) {
    expect(r.signatureError, `signature of request ${r.n}`).toBeNull();
    expect(r.cloudEventError, `CloudEvent of request ${r.n}`).toBeNull();
    expect(r.event!.id).toBe(r.id);
    const seen = byId.get(r.id);
    // A redelivery is the same event: same type, subject, status — byte for byte the same body.
    if (seen) expect(r.body, `redelivery of ${r.id}`).toBe(seen.body);
    else byId.set(r.id, { triple: triple(r.event!), body: r.body });
  }
  return byId;
}

/**
 * The checks every scenario ends with: exactly the expected events arrived (one id each,
 * every one acknowledged), and the database holds exactly those events, all delivered.
 */
async function assertExact(s: Scenario, expected: Triple[]): Promise<Set<string>> {
  const byId = arrivals(s.hook);
  const got = [...byId.values()].map((v) => v.triple).sort();
  // The multiset: nothing lost, nothing invented, no event under two ids.
  expect(got).toEqual(expected);
  // Every event was acknowledged at least once.
  expect(s.hook.acceptedIds()).toEqual(new Set(byId.keys()));
  const ids = new Set(byId.keys());
  const rows = await queryOnce<{ id: string; type: string; subject: string; status: string | null }>(s.storage, 'SELECT id, type, subject, status FROM events');
  expect(new Set(rows.map((r) => r.id))).toEqual(ids);
  expect(rows.map((r) => `${r.type} ${r.subject} ${r.status ?? '-'}`).sort()).toEqual(expected);
  const states = await queryOnce(s.storage, 'SELECT state, count(*) n FROM outbox GROUP BY state');
  expect(states).toEqual([{ state: 'delivered', n: expected.length }]);
  return ids;
}

// ---- the tests ----------------------------------------------------------------------------

let reference: { expected: Triple[]; ids: Set<string> };

beforeAll(async () => {
  ensureBuilt();
  // The uninterrupted run every crash is compared with: fresh database, same simulator steps.
  const s = await scenario();
  const expected = expectedFrom(s.truth);
  await runCli(['poll', '--once', '-c', s.configPath]);
  const ids = await assertExact(s, expected);
  reference = { expected, ids };
  await closeAll();
}, 60_000);

describe('the daemon killed with SIGKILL in the middle of a cycle, then restarted, loses no event and invents none', () => {
  it('the ground truth is what the world changes call for, and an uninterrupted run delivers exactly it', () => {
    // The oracle read off the simulator's history agrees with a reading of the catalog by hand.
    const shape = reference.expected.map((t) => t.replace(/(backups|jobs)\/\d+/, '$1/N'));
    expect(shape).toEqual(
      [
        'hostwatch.backup.completed sites/6/backups/N -',
        'hostwatch.backup.failed sites/3/backups/N -',
        'hostwatch.backup.failed sites/4/backups/N -',
        'hostwatch.job.failed jobs/N -',
        'hostwatch.site.frozen sites/5/usage firing',
        'hostwatch.site.integrity_problems sites/3/health firing',
        'hostwatch.site.offline sites/1/health firing',
        'hostwatch.site.offline sites/2/health firing',
        'hostwatch.usage.disk_high sites/5/usage firing',
        'hostwatch.usage.over_limit sites/5/usage firing',
      ],
    );
    expect(reference.expected).toHaveLength(10);
    expect(reference.ids.size).toBe(10);
  });

  it('`poll --once` killed right after its first event is committed, long before the cycle ends; then run again', async () => {
    const s = await scenario({ latencyMs: 250 });
    const watch = await watchInvariant(s, reference.expected);
    const child = startCli(['poll', '--once', '-c', s.configPath]);
    const committed = await waitForDb(s, 'SELECT count(*) n FROM events', (n) => n >= 1, 'the first committed event');
    await kill(child);
    // The kill landed mid-cycle: some events committed, not all, nothing delivered yet.
    const after = await count(s, 'SELECT count(*) n FROM events');
    expect(after).toBeGreaterThanOrEqual(committed);
    expect(after).toBeLessThan(reference.expected.length);
    expect(s.hook.requests).toEqual([]);

    s.sim.faults.clear();
    await runCli(['poll', '--once', '-c', s.configPath]);
    const seen = await watch.stop();
    expect(seen.violations).toEqual([]);
    expect(seen.reads).toBeGreaterThan(20);
    const ids = await assertExact(s, reference.expected);
    expect(ids).toEqual(reference.ids);
    // Nothing was attempted twice: the only attempts are the ones after the restart.
    expect(s.hook.requests).toHaveLength(reference.expected.length);
  }, 60_000);

  it('`poll --once` killed while deliveries are in flight (sent, not yet answered); then run again: those are sent again under the same ids', async () => {
    const s = await scenario();
    let held = 0;
    s.hook.respond(() => (held < 3 ? (held++, 'hold') : { status: 200 }));
    const child = startCli(['poll', '--once', '-c', s.configPath]);
    const total = reference.expected.length;
    await waitFor(() => new Set(s.hook.requests.map((r) => r.id)).size === total, 'every event to be sent once', 15_000);
    await waitForDb(s, "SELECT count(*) n FROM outbox WHERE state = 'delivered'", (n) => n === total - 3, 'the answered deliveries to be recorded', 8_000);
    expect(await count(s, "SELECT count(*) n FROM outbox WHERE state = 'pending'")).toBe(3);
    const inFlight = new Set(s.hook.requests.filter((r) => r.answer === 'hold').map((r) => r.id));
    expect(inFlight.size).toBe(3);
    await kill(child);
    expect(await count(s, "SELECT count(*) n FROM outbox WHERE state = 'pending'")).toBe(3);

    s.hook.respond(() => ({ status: 200 }));
    const before = s.hook.requests.length;
    await runCli(['poll', '--once', '-c', s.configPath]);
    // At least once: exactly the unanswered ones are delivered again, with their ids.
    expect(new Set(s.hook.requests.slice(before).map((r) => r.id))).toEqual(inFlight);
    expect(s.hook.requests.length - before).toBe(3);
    const ids = await assertExact(s, reference.expected);
    expect(ids).toEqual(reference.ids);
  }, 60_000);

  it('`run` killed after a few deliveries while per-site polls are still due; then run again until everything arrived and stopped with SIGTERM', () => runKilled('sqlite'), 60_000);
});

describe('on PostgreSQL, the same crash', () => {
  it('`run` killed after a few deliveries, then run again: every event arrives, under the ids an uninterrupted SQLite run gives', () => runKilled('postgres'), 60_000);
});

/**
 * `run` killed after a few deliveries while per-site polls are still due, then run again
 * until everything arrived and stopped with SIGTERM; on either engine.
 */
async function runKilled(engine: Engine): Promise<void> {
  const s = await scenario({ latencyMs: 100, engine });
  const watch = await watchInvariant(s, reference.expected);
  const daemon = startCli(['run', '-c', s.configPath]);
  await waitFor(() => s.hook.acceptedIds().size >= 3, 'three accepted deliveries', 15_000);
  await kill(daemon);
  const committed = await count(s, 'SELECT count(*) n FROM events');
  expect(committed, 'events committed when killed').toBeLessThan(reference.expected.length);
  expect(s.hook.acceptedIds().size).toBeLessThan(reference.expected.length);

  s.sim.faults.clear();
  const again = startCli(['run', '-c', s.configPath]);
  await waitFor(
    () => new Set([...arrivals(s.hook).values()].map((v) => v.triple)).size >= reference.expected.length && s.hook.acceptedIds().size >= reference.expected.length,
    'every expected event to arrive after the restart',
    20_000,
  );
  again.proc.kill('SIGTERM');
  const { code } = await again.exited;
  expect(code, again.output.join('')).toBe(0);
  const seen = await watch.stop();
  expect(seen.violations).toEqual([]);
  expect(seen.reads).toBeGreaterThan(20);
  const ids = await assertExact(s, reference.expected);
  expect(ids).toEqual(reference.ids);
}
