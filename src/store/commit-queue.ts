import type { AsyncLocalStorage } from 'node:async_hooks';
import type { Executor } from './sql.js';

/**
 * A write transaction as the commit queue drives it (one per batch; see CommitQueue). The
 * queue sets its `afterCommit` (Executor) before each unit of the batch runs.
 */
export interface BatchTx extends Executor {
  /** Open a savepoint for the next unit. */
  savepoint(): Promise<void>;
  /** The unit succeeded: keep its writes (they commit with the batch). */
  release(): Promise<void>;
  /** The unit failed: undo its writes only, and close its savepoint. */
  rollbackTo(): Promise<void>;
  /**
   * COMMIT. Resolves when the connection is free for the next batch, with `durable`: settles
   * once the commit would survive a power cut (at once where COMMIT itself waits for that;
   * SQLite syncs its log off the main thread, so the next batch can run meanwhile).
   */
  commit(): Promise<{ durable: Promise<void> }>;
  /** Undo the whole batch (after a failed unit of a one-unit batch, or a failed commit). */
  rollback(): Promise<void>;
}

/** A piece of work that must commit whole or not at all: DB reads and writes only, no other IO. */
export type Unit<T> = (tx: Executor) => Promise<T>;

/** How many batches and units were committed (group commit at work: units / batches). */
export interface CommitStats {
  batches: number;
  units: number;
  /** Units that failed and were rolled back alone (their batch committed). */
  failedUnits: number;
  /**
   * Batches of repeatable units run again, each unit in a savepoint, after one of them failed
   * in the first run (which had none).
   */
  rerunBatches: number;
  largestBatch: number;
}

/**
 * Set by tests only (no cost otherwise): every unit then runs inside this async context, so
 * a check on outgoing requests can tell IO made by a unit (forbidden: no network IO inside a
 * transaction) from IO made beside it while a transaction is open.
 */
let unitTrace: AsyncLocalStorage<true> | null = null;

/** Run every unit from now on inside `als` (null: stop). For tests of invariant 4. */
export function traceUnits(als: AsyncLocalStorage<true> | null): void {
  unitTrace = als;
}

type Outcome = { ok: true; value: unknown; after: Array<() => void> } | { ok: false; error: unknown };

interface Queued {
  unit: Unit<unknown>;
  /** When it was queued (performance.now()). */
  at: number;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  /** It may wait the longer gather time (see GatherOptions.patientMs). */
  patient: boolean;
  /** It may run again after its batch rolled back (see SubmitOptions.repeatable). */
  repeatable: boolean;
}

/** How a unit is queued. */
export interface SubmitOptions {
  /** A poll's result: it may wait longer for others to share its commit (GatherOptions). */
  patient?: boolean;
  /**
   * The unit may run again, from the start, after its batch rolled back: everything it does
   * outside the database is redone by running it again (it builds its own state afresh, and
   * keeps nothing of a run that did not commit). A batch made only of such units runs without
   * a savepoint per unit (see CommitQueue).
   */
  repeatable?: boolean;
}

/** How a queue gathers units into batches. */
export interface GatherOptions {
  /** The most units in one transaction. */
  maxBatch: number;
  /**
   * How long the oldest queued unit may wait for others (ms) while fewer than `units` are
   * queued. Units that finish a few ms apart, not in the same turn of the event loop, would
   * each pay for their own commit without it.
   */
  ms: number;
  /** With this many queued, the batch starts at once. */
  units: number;
  /**
   * The same two, when every queued unit is patient (a poll's result: `{ patient: true }`).
   * Changed polls finish a few ms apart, and a commit's fixed part (BEGIN, COMMIT, the log
   * pages every unit touches, one fsync) is most of what a small batch costs: 4 ms gathered
   * about 2 changed polls per commit in the bench's changed-10% pass, 20 ms 8–10 (run 14),
   * 60 ms about 25, which made the pass 5–9% faster again: the units of a bigger batch run
   * back to back on warm caches and write the pages they share once (docs/benchmarks.md,
   * run 19). From a poll's reply to the webhook's 2xx, p99 went from 35 to 81 ms, still well
   * inside the 250 ms a change may take. The others (a delivery's record, a silence, a CLI
   * write) keep the short wait: the outbox worker sends the next row of a channel only once
   * the last one's attempt is recorded.
   *
   * Patient units wait only while some writer is expected (`expect`: a poll whose reply is
   * still on its way). Once none is, nothing is left to share their commit, and they commit
   * at the next turn: the last polls of a burst do not wait out the gather time for polls
   * that will not come.
   */
  patientMs: number;
  patientUnits: number;
}

const GATHER: GatherOptions = { maxBatch: 256, ms: 4, units: 8, patientMs: 60, patientUnits: 64 };

/**
 * Group commit. Units that arrive while a batch commits, in the same turn of the event loop,
 * or within a few ms of each other (GatherOptions) are committed together in one transaction
 * (one fsync). A unit that fails is rolled back alone and its caller sees its error, while the
 * others commit: each unit runs inside its own savepoint, or, for repeatable units (poll
 * results), the batch runs without savepoints and, if one fails, is rolled back and run again
 * with them. A unit's promise settles only after the real COMMIT is durable (or has
 * failed), so a caller that announces what it wrote (bus, SSE, metrics, outbox kick) never
 * announces a write that could still roll back. Batches run one at a time, in arrival order,
 * and their units settle in that order too.
 */
export class CommitQueue {
  private queued: Queued[] = [];
  private running = false;
  /** The flush to come: at the end of a gather wait (due then), or on the next turn of the loop. */
  private scheduled: { wait: ReturnType<typeof setTimeout>; due: number } | { turn: ReturnType<typeof setImmediate> } | null = null;
  /** Queued units that are not patient (they shorten the gather wait). */
  private urgent = 0;
  /** Batches committed whose durability is not yet known (close waits for them). */
  private settling = 0;
  private idleWaiters: Array<() => void> = [];
  readonly stats: CommitStats = { batches: 0, units: 0, failedUnits: 0, rerunBatches: 0, largestBatch: 0 };

  private readonly gather: GatherOptions;

  constructor(
    private readonly begin: () => Promise<BatchTx>,
    gather: Partial<GatherOptions> = {},
  ) {
    this.gather = { ...GATHER, ...gather };
  }

  /** Writers that may soon submit a patient unit (see expect). */
  private expected = 0;

  /**
   * A writer that may soon submit a patient unit (a poll waiting for its reply) holds this
   * until it knows whether it will: it calls the returned function once, before it submits
   * or when it will not. While any writer is expected, patient units wait for others (up to
   * the gather time); with none expected they commit at the next turn.
   */
  expect(): () => void {
    this.expected++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      // The last expected writer is in: queued patient units need not wait any longer.
      if (--this.expected === 0 && this.queued.length > 0) this.schedule();
    };
  }

  /** When the unit before the newest one arrived (performance.now()); -Infinity before any. */
  private previousArrival = -Infinity;

  /** Queue a unit; resolves with its result once its batch has committed. */
  submit<T>(unit: Unit<T>, opts: SubmitOptions = {}): Promise<T> {
    const patient = opts.patient === true;
    return new Promise<T>((resolve, reject) => {
      const at = performance.now();
      this.queued.push({ unit, at, resolve: resolve as (v: unknown) => void, reject, patient, repeatable: opts.repeatable === true });
      if (!patient) this.urgent++;
      this.schedule(at - this.previousArrival > (patient ? this.gather.patientMs : this.gather.ms));
      this.previousArrival = at;
    });
  }

  /** Resolves once nothing is queued or committing (before closing the store). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return !this.running && this.scheduled === null && this.queued.length === 0 && this.settling === 0;
  }

  private checkIdle(): void {
    if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
  }

  /**
   * `quiet`: the newest unit came after a quiet spell (none in the gather time before it).
   * Alone in the queue, it commits at the next turn: nothing suggests others will follow
   * (a lone change, a CLI command), so waiting would only delay it. Units that arrive during
   * a burst wait for each other as usual, and so do those queued behind a running batch.
   */
  private schedule(quiet = false): void {
    if (this.running) return;
    const lone = quiet && this.queued.length === 1;
    const patient = this.urgent === 0;
    const [ms, units] = patient ? [this.gather.patientMs, this.gather.patientUnits] : [this.gather.ms, this.gather.units];
    // Patient units wait for expected writers only: with none, no one else is coming.
    const noneExpected = patient && this.expected === 0;
    const now = performance.now();
    const wait = lone || noneExpected || this.queued.length >= units ? 0 : ms - (now - this.queued[0]!.at);
    if (this.scheduled !== null) {
      // Already due at the next turn, or no sooner than asked now: keep it. Otherwise (enough
      // units gathered, or an urgent unit joined patient ones) start sooner.
      if ('turn' in this.scheduled || this.scheduled.due <= now + Math.max(wait, 0)) return;
      clearTimeout(this.scheduled.wait);
    }
    // At least one turn of the event loop first: replies that arrived together (and the
    // polls they finish) join this batch instead of each paying for its own commit.
    this.scheduled = wait > 0 ? { wait: setTimeout(() => void this.flush(), wait), due: now + wait } : { turn: setImmediate(() => void this.flush()) };
  }

  private async flush(): Promise<void> {
    this.scheduled = null;
    this.running = true;
    try {
      const batch = this.queued.splice(0, this.gather.maxBatch);
      for (const q of batch) if (!q.patient) this.urgent--;
      if (batch.length > 0) await this.runBatch(batch);
    } finally {
      this.running = false;
      if (this.queued.length > 0) this.schedule();
      else this.checkIdle();
    }
  }

  private async runBatch(batch: Queued[]): Promise<void> {
    // Savepoints only where a unit's failure must spare the others and running them again
    // is not allowed. A batch of one needs none: its failure rolls back the whole transaction.
    // Nor do repeatable units (poll results): if one fails, the batch is rolled back and run
    // again with a savepoint per unit, so the others still commit. A savepoint and its release
    // cost two statements per unit (two round trips on PostgreSQL); on SQLite, up to about 12%
    // of a pass of changed or first polls (docs/benchmarks.md, run 18). A unit fails only in
    // rare cases, and then the second run is the price.
    const plain = batch.length === 1 || batch.every((q) => q.repeatable);
    let ran = await this.tryBatch(batch, plain);
    if (ran === 'again') {
      this.stats.rerunBatches++;
      ran = await this.tryBatch(batch, false);
    }
    // Failed as a whole: every unit was rejected.
    if (typeof ran === 'string') return;
    const { outcomes, durable } = ran;
    this.stats.batches++;
    this.stats.units += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    // The next batch may begin now; this one's units settle once it is durable.
    this.settling++;
    durable.then(
      () =>
        batch.forEach((q, i) => {
          const o = outcomes[i]!;
          if (o.ok) {
            for (const fn of o.after) {
              try {
                fn();
              } catch {
                // A hook's failure (a log line) must not keep the unit's caller from its result.
              }
            }
            q.resolve(o.value);
          } else {
            this.stats.failedUnits++;
            q.reject(o.error);
          }
        }),
      // Committed, but its durability failed (the log could not be synced): no caller may
      // announce these writes as safe.
      (e: unknown) => batch.forEach((q) => q.reject(e)),
    ).finally(() => {
      this.settling--;
      this.checkIdle();
    });
  }

  /**
   * One run of a batch in one transaction, each unit in a savepoint unless `plain`. Returns
   * the outcomes and the commit's durability; 'again' when a unit of a plain run of several
   * failed (rolled back whole, nothing settled: run it again with savepoints); 'failed' when
   * the batch failed as a whole (BEGIN, a plain batch of one, a savepoint, or the COMMIT),
   * with every unit rejected.
   */
  private async tryBatch(batch: Queued[], plain: boolean): Promise<{ outcomes: Outcome[]; durable: Promise<void> } | 'again' | 'failed'> {
    let tx: BatchTx;
    try {
      tx = await this.begin();
    } catch (e) {
      for (const q of batch) q.reject(e);
      return 'failed';
    }
    const outcomes: Outcome[] = [];
    try {
      for (const q of batch) {
        if (!plain) await tx.savepoint();
        // What this unit asks to run after the commit: kept only if the unit's writes are.
        const after: Array<() => void> = [];
        tx.afterCommit = (fn) => void after.push(fn);
        try {
          const value = await (unitTrace ? unitTrace.run(true, () => q.unit(tx)) : q.unit(tx));
          if (!plain) await tx.release();
          outcomes.push({ ok: true, value, after });
        } catch (error) {
          if (plain) throw error;
          // The unit's error may have ended the whole transaction (SQLite rolls it back itself
          // on a full disk or an I/O error, and its savepoint with it): the batch then fails
          // with that error, not with the savepoint's absence.
          await tx.rollbackTo().catch(() => {
            throw error;
          });
          outcomes.push({ ok: false, error });
        }
      }
      tx.afterCommit = undefined;
      return { outcomes, durable: (await tx.commit()).durable };
    } catch (e) {
      tx.afterCommit = undefined;
      // Nothing of this run was committed.
      await tx.rollback().catch(() => undefined);
      // A unit failed (not the COMMIT, which comes after them all) in a plain run of several.
      if (plain && batch.length > 1 && outcomes.length < batch.length) return 'again';
      for (const q of batch) q.reject(e);
      return 'failed';
    }
  }
}
