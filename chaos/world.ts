/**
 * A world for the chaos scenarios that run the real daemon process: the simulator and a
 * signing-checking webhook receiver in this process, a SQLite file and a config file in a
 * temporary folder, and the tally that compares what arrived with the ground truth read
 * off the simulator's history (test/truth.ts).
 */
import BetterSqlite3 from 'better-sqlite3';
import { NOT_FROM_RULES } from '../src/events/catalog.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { killAll, writeDaemonConfig, type Child } from '../test/daemon-process.js';
import { tempDir } from '../test/harness.js';
import { startReceiver, waitFor, type Receiver } from '../test/receiver.js';
import { expectedFrom, triple, TRUTH_SOURCES, type Triple } from '../test/truth.js';
import { secondsSince } from './figures.js';

export const KEY = 'sim-key-chaos-0123456789';
/** The sources the truth does not cover (test/truth.ts) are switched off. */
const OTHER_SOURCES = SOURCE_NAMES.filter((s) => !TRUTH_SOURCES.includes(s));
/** A fixed simulator clock (writeDaemonConfig switches off the rules that read the clock). */
const CLOCK = (): Date => new Date('2026-11-21T12:00:00Z');

export interface ChaosWorld {
  sim: Simulator;
  hook: Receiver;
  dir: string;
  dbPath: string;
  configPath: string;
  /** Where the world's history stood at the baseline: the truth is what changed after it. */
  mark: number;
  close(): Promise<void>;
}

const open: ChaosWorld[] = [];

/** A new world with `sites` sites, its config written; `config` is merged over the defaults. */
export async function chaosWorld(opts: { sites: number; seed?: number; config?: Record<string, unknown> }): Promise<ChaosWorld> {
  const sim = await startSimulator({ seed: opts.seed ?? 7, sites: opts.sites, keys: { [KEY]: '*' }, now: CLOCK, maxRequests: 0 });
  const hook = await startReceiver();
  const { dir, cleanup } = tempDir('hostwatch-chaos-');
  const { configPath, dbPath } = writeDaemonConfig(dir, {
    name: 'chaos',
    simUrl: sim.url,
    key: KEY,
    hookUrl: hook.url,
    overrides: {
      api: { timeout: '3s', max_concurrency: 4 },
      // Only the sources the truth covers (the others add nothing to count).
      sources: Object.fromEntries(OTHER_SOURCES.map((s) => [s, { enabled: false }])),
      // No inhibition: a site offline would hold its other alerts back (tested in
      // inhibit.test.ts); here every alert the truth calls for must reach the webhook.
      inhibit: [],
      // Short retries: an outage of the receiver is over in seconds here, not hours.
      delivery: { retry_schedule: ['500ms', '1s', '2s', ...Array.from({ length: 30 }, () => '3s')], drain_timeout: '20s' },
      ...opts.config,
    },
  });
  const w: ChaosWorld = {
    sim,
    hook,
    dir,
    dbPath,
    configPath,
    mark: 0,
    async close() {
      await hook.close();
      await sim.close();
      cleanup();
    },
  };
  open.push(w);
  return w;
}


/** Kill every daemon and close every world (a scenario's afterEach). */
export async function closeWorlds(): Promise<void> {
  killAll();
  for (const w of open.splice(0)) await w.close();
}

/** The events the world's changes since the baseline call for. */
export function truthOf(w: ChaosWorld): Triple[] {
  return expectedFrom(w.sim.world.history.slice(w.mark));
}

/** What the receiver and the database hold, against the truth. */
export interface Tally {
  expected: number;
  delivered: number;
  lost: number;
  invented: number;
  /** Requests beyond the first acknowledged one per event id (at-least-once allows them). */
  duplicates: number;
  /** Requests whose signature or CloudEvent did not check out. */
  malformed: number;
  /** hostwatch's own events (source.degraded, api.unreachable, platform.incident, ...): not part of the truth. */
  operator: number;
  /** Rows the outbox gave up on. */
  deadLettered: number;
  lostList: Triple[];
  inventedList: Triple[];
}

/** What a tally reads: the receiver and the SQLite file (a chaos world, or an in-process test world with its receiver). */
export type Observed = { hook: Receiver; dbPath: string };

/** Count lost and invented events as multisets of "type subject status". */
export function tally(w: Observed, truth: readonly Triple[]): Tally {
  const operator = new Set(NOT_FROM_RULES.map((n) => `hostwatch.${n}`));
  const byId = new Map<string, Triple>();
  let malformed = 0;
  for (const r of w.hook.requests) {
    if (r.signatureError || r.cloudEventError || !r.event) {
      malformed++;
      continue;
    }
    if (typeof r.answer === 'number' && r.answer >= 200 && r.answer < 300) byId.set(r.id, triple(r.event));
  }
  const arrived = [...byId.values()].filter((t) => !operator.has(t.split(' ')[0]!));
  const left = [...arrived];
  const lostList: Triple[] = [];
  for (const t of truth) {
    const i = left.indexOf(t);
    if (i >= 0) left.splice(i, 1);
    else lostList.push(t);
  }
  const db = new BetterSqlite3(w.dbPath, { readonly: true, fileMustExist: true });
  let dead = 0;
  try {
    dead = (db.prepare("SELECT count(*) AS n FROM outbox WHERE state = 'dead'").get() as { n: number }).n;
  } finally {
    db.close();
  }
  const accepted = w.hook.accepted().length;
  return {
    expected: truth.length,
    delivered: arrived.length,
    lost: lostList.length,
    invented: left.length,
    duplicates: accepted - byId.size,
    malformed,
    operator: byId.size - arrived.length,
    deadLettered: dead,
    lostList,
    inventedList: left,
  };
}

/** Whether every event of the truth has been acknowledged by the receiver. */
export function allArrived(w: Observed, truth: readonly Triple[]): boolean {
  return tally(w, truth).lost === 0;
}

/**
 * Let a running daemon catch up (until the receiver has every event of the truth, or
 * `timeoutMs`), then stop it with SIGTERM: how long each took and how it exited.
 */
export async function catchUpAndStop(
  w: ChaosWorld,
  truth: readonly Triple[],
  daemon: Child,
  timeoutMs: number,
): Promise<{ caughtUp: boolean; caughtUpS: number; stopS: number; code: number | string }> {
  const from = Date.now();
  let caughtUp = true;
  await waitFor(() => allArrived(w, truth), 'every expected event at the receiver', timeoutMs, 250).catch(() => (caughtUp = false));
  const caughtUpS = secondsSince(from);
  // The killed runs may have delivered everything already: SIGTERM goes to a daemon that has
  // started (its handler installed), as the stop being measured is the running daemon's.
  await waitFor(() => daemon.output.join('').includes('hostwatch started'), 'the daemon started', timeoutMs, 50).catch(() => undefined);
  const asked = Date.now();
  daemon.proc.kill('SIGTERM');
  const { code, signal } = await daemon.exited;
  return { caughtUp, caughtUpS, stopS: secondsSince(asked), code: code ?? signal ?? 'unknown' };
}
