import { CommitQueue, type BatchTx, type CommitStats, type SubmitOptions, type Unit } from './commit-queue.js';
import type { Store } from './db.js';
import { describeStorageFailure, storageFailure } from './failures.js';
import { statement, type Statement } from './sql.js';

/** Writes must go through this long without a store failure before the store counts as working again. */
export const WRITES_CLEAR_MS = 10_000;

const VERSION = statement<Record<string, never>, { v: number | null }>((qb) =>
  qb.selectFrom('schema_migrations').select((eb) => eb.fn.max('version').as('v')),
);

/**
 * What both engines share: writes go through a commit queue (group commit), the store is
 * ready when it holds the newest migration, and closing waits for queued commits. An engine
 * supplies how statements run, how a batch transaction begins, and how it shuts down.
 */
export abstract class QueuedStore implements Store {
  abstract readonly engine: Store['engine'];
  abstract readonly dialect: Store['dialect'];
  abstract readonly description: string;
  abstract readonly transactionOpen: boolean;
  abstract readonly soleWriter: boolean;
  private readonly queue: CommitQueue;
  private closed = false;
  /**
   * The last store failure of a write, and when the failing began; null once writes have
   * gone through for WRITES_CLEAR_MS without another failure. A disk that is nearly full
   * takes small writes and refuses large ones: one success does not make it work again.
   */
  private writeFailure: { error: unknown; last: number } | null = null;
  /** A damaged file found by any statement: not ready until a restart checks the file again. */
  private damage: unknown = null;

  constructor(
    private readonly latest: number,
    private readonly now: () => number,
  ) {
    this.queue = new CommitQueue(() => this.begin());
  }

  abstract all<P, R>(s: Statement<P, R>, p: P): Promise<R[]>;
  abstract get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined>;
  abstract run<P, R>(s: Statement<P, R>, p: P): Promise<number>;
  /** Open a batch transaction (BEGIN) for the commit queue. */
  protected abstract begin(): Promise<BatchTx>;
  /** The engine's own resources are released (connection, pool, lock). */
  protected abstract shut(): Promise<void>;
  /** The connection can still answer (a closed SQLite handle cannot). */
  protected abstract answers(): boolean;

  get stats(): CommitStats {
    return this.queue.stats;
  }

  /** Outside a transaction an event insert could commit out of `seq` order: refused. */
  orderEvents(): Promise<void> {
    return Promise.reject(new Error('events are stored inside a transaction (store.transaction)'));
  }

  transaction<T>(unit: Unit<T>, opts: SubmitOptions = {}): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`${this.description} is closed`));
    return this.queue.submit(unit, opts).then(
      (v) => {
        if (this.writeFailure && this.now() - this.writeFailure.last >= WRITES_CLEAR_MS) this.writeFailure = null;
        return v;
      },
      (e: unknown) => {
        if (storageFailure(e) !== null) {
          const now = this.now();
          this.writeFailure = { error: e, last: now };
          this.noticed(e);
          this.writeFailed(e);
        }
        throw e;
      },
    );
  }

  expectWrite(): () => void {
    return this.queue.expect();
  }

  /** Why the store fails now, as one line: writes fail (disk full, locked, gone) or the file is damaged; null when it works. */
  problem(): string | null {
    const e = this.damage ?? this.writeFailure?.error ?? null;
    return e === null ? null : `${this.description}: ${describeStorageFailure(e)}`;
  }

  async ready(): Promise<boolean> {
    if (this.closed || !this.answers() || this.problem() !== null) return false;
    return (await this.get(VERSION, {}))?.v === this.latest;
  }

  /** Note a failed statement: a damaged file is remembered (reads and writes alike). */
  protected noticed(e: unknown): void {
    if (storageFailure(e) === 'damaged') this.damage ??= e;
  }

  /** An engine's own answer to a write that failed for the store's sake (SQLite gives the log's space back). */
  protected writeFailed(_e: unknown): void {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.idle();
    await this.shut();
  }
}
