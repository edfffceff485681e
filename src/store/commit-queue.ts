import type { AsyncLocalStorage } from 'node:async_hooks';
import type { Executor } from './sql.js';

/** A write transaction as the commit queue drives it (one per batch; see CommitQueue). */
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

interface Queued {
  unit: Unit<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit. Units that arrive while a batch commits, or in the same turn of the event
 * loop, are committed together in one transaction (one fsync), each inside its own
 * savepoint: a unit that fails is rolled back alone and its caller sees its error, while the
 * others commit. A unit's promise settles only after the real COMMIT is durable (or has
 * failed), so a caller that announces what it wrote (bus, SSE, metrics, outbox kick) never
 * announces a write that could still roll back. Batches run one at a time, in arrival order,
 * and their units settle in that order too.
 */
export class CommitQueue {
  private queued: Queued[] = [];
  private running = false;
  private scheduled = false;
  /** Batches committed whose durability is not yet known (close waits for them). */
  private settling = 0;
  private idleWaiters: Array<() => void> = [];
  readonly stats: CommitStats = { batches: 0, units: 0, failedUnits: 0, largestBatch: 0 };

  constructor(
    private readonly begin: () => Promise<BatchTx>,
    private readonly maxBatch = 256,
  ) {}

  /** Queue a unit; resolves with its result once its batch has committed. */
  submit<T>(unit: Unit<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queued.push({ unit, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  /** Resolves once nothing is queued or committing (before closing the store). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return !this.running && !this.scheduled && this.queued.length === 0 && this.settling === 0;
  }

  private checkIdle(): void {
    if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
  }

  private schedule(): void {
    if (this.running || this.scheduled) return;
    this.scheduled = true;
    // One turn of the event loop first: replies that arrived together (and the polls they
    // finish) join this batch instead of each paying for its own commit.
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    this.running = true;
    try {
      const batch = this.queued.splice(0, this.maxBatch);
      if (batch.length > 0) await this.runBatch(batch);
    } finally {
      this.running = false;
      if (this.queued.length > 0) this.schedule();
      else this.checkIdle();
    }
  }

  private async runBatch(batch: Queued[]): Promise<void> {
    let tx: BatchTx;
    try {
      tx = await this.begin();
    } catch (e) {
      for (const q of batch) q.reject(e);
      return;
    }
    // A batch of one needs no savepoint: its failure rolls back the whole transaction.
    const alone = batch.length === 1;
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    let durable: Promise<void>;
    try {
      for (const q of batch) {
        if (!alone) await tx.savepoint();
        try {
          const value = await (unitTrace ? unitTrace.run(true, () => q.unit(tx)) : q.unit(tx));
          if (!alone) await tx.release();
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (alone) throw error;
          await tx.rollbackTo();
          outcomes.push({ ok: false, error });
        }
      }
      durable = (await tx.commit()).durable;
    } catch (e) {
      // The batch as a whole failed (a one-unit batch's unit, a savepoint, or the COMMIT):
      // nothing of it was committed, so every unit fails.
      await tx.rollback().catch(() => undefined);
      for (const q of batch) q.reject(e);
      return;
    }
    this.stats.batches++;
    this.stats.units += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    // The next batch may begin now; this one's units settle once it is durable.
    this.settling++;
    durable.then(
      () =>
        batch.forEach((q, i) => {
          const o = outcomes[i]!;
          if (o.ok) q.resolve(o.value);
          else {
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
}
