import { closeSync, fsync as fsyncAsync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { BatchTx } from './commit-queue.js';
import { StorageError, type StoreOptions } from './db.js';
import { damagedFileMessage, storageFailure } from './failures.js';
import { announceMigrated, migrateSqlite, type Migration } from './migrate.js';
import { QueuedStore } from './queued-store.js';
import { lockDatabase } from './sqlite-lock.js';
import type { Statement } from './sql.js';

type Mode = 'all' | 'get' | 'run';

/**
 * Runs compiled statements on one better-sqlite3 connection, each prepared once. The
 * driver is synchronous; results come back as already-resolved promises, so the same
 * repository code runs here and on PostgreSQL.
 */
class SqliteRunner {
  private readonly prepared = new Map<number, BetterSqlite3.Statement>();
  /** Transaction control, prepared once (a batch runs several of these). */
  readonly control;

  constructor(readonly db: BetterSqlite3.Database) {
    this.control = {
      // BEGIN IMMEDIATE takes the write lock at once (waiting, off the event loop, for a CLI
      // command's write): a deferred BEGIN could fail to upgrade after its first read.
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT hw_unit'),
      release: db.prepare('RELEASE hw_unit'),
      undo: db.prepare('ROLLBACK TO hw_unit'),
    };
  }

  exec<P, R>(s: Statement<P, R>, p: P, mode: Mode): unknown {
    let stmt = this.prepared.get(s.id);
    if (!stmt) {
      stmt = this.db.prepare(s.compile('sqlite').sql);
      this.prepared.set(s.id, stmt);
    }
    const args = s.args('sqlite', p);
    if (mode === 'run') return stmt.run(...args).changes;
    return mode === 'all' ? stmt.all(...args) : stmt.get(...args);
  }

  /**
   * The same, as a promise (a synchronous throw becomes a rejection). A statement refused
   * because another connection holds the database's lock (SQLITE_BUSY: a CLI command's
   * write, a backup, an `sqlite3` shell) is tried again a little later, for up to
   * BUSY_WAIT_MS. The connection's own busy_timeout is 0: SQLite would wait by sleeping in
   * the driver's call, which freezes the whole process (health checks, sends, timers).
   */
  call<T>(fn: () => unknown): Promise<T> {
    try {
      return Promise.resolve(fn() as T);
    } catch (e) {
      return isBusy(e) ? this.whenFree<T>(fn, e) : Promise.reject(e);
    }
  }

  private async whenFree<T>(fn: () => unknown, refused: unknown): Promise<T> {
    const deadline = performance.now() + BUSY_WAIT_MS;
    let pause = 5;
    let last = refused;
    while (performance.now() + pause <= deadline) {
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, 250);
      try {
        return fn() as T;
      } catch (e) {
        if (!isBusy(e)) throw e;
        last = e;
      }
    }
    throw last;
  }
}

/** The most the -wal file keeps after a checkpoint (bytes). */
export const JOURNAL_SIZE_LIMIT = 4 * 1024 * 1024;

/** How long a statement waits for another connection's lock before it fails (SQLITE_BUSY). */
export const BUSY_WAIT_MS = 5_000;

/** SQLITE_BUSY and its extended codes: another connection holds a lock this statement needs. */
function isBusy(e: unknown): boolean {
  return storageFailure(e) === 'locked';
}

/** The open batch transaction: statements run on the connection directly. */
class SqliteTx implements BatchTx {
  readonly dialect = 'sqlite' as const;
  /** A write statement ran: the commit has a log to sync (a read-only batch has none). */
  private wrote = false;
  readonly memo = new Map<string, unknown>();
  /** Set by the commit queue for each unit (Executor.afterCommit). */
  afterCommit?: (fn: () => void) => void = undefined;

  constructor(
    private readonly r: SqliteRunner,
    private readonly end: { committed: (wrote: boolean) => Promise<void>; rolledBack: () => void },
  ) {}

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    return this.r.call(() => this.r.exec(s, p, 'all'));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    return this.r.call(() => this.r.exec(s, p, 'get'));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    this.wrote = true;
    return this.r.call(() => this.r.exec(s, p, 'run'));
  }
  // One connection, one writer: commit order is insert order already.
  orderEvents(): Promise<void> {
    return Promise.resolve();
  }
  savepoint(): Promise<void> {
    return this.r.call(() => this.r.control.savepoint.run());
  }
  release(): Promise<void> {
    return this.r.call(() => this.r.control.release.run());
  }
  rollbackTo(): Promise<void> {
    this.memo.clear();
    return this.r.call(() => {
      this.r.control.undo.run();
      this.r.control.release.run();
    });
  }
  async commit(): Promise<{ durable: Promise<void> }> {
    // A failed COMMIT leaves the transaction open: the queue then rolls back, which ends it.
    this.r.control.commit.run();
    return { durable: this.end.committed(this.wrote) };
  }
  async rollback(): Promise<void> {
    try {
      if (this.r.db.inTransaction) this.r.control.rollback.run();
    } finally {
      this.end.rolledBack();
    }
  }
}

/**
 * Makes committed transactions durable off the main thread. The connection runs with
 * synchronous = NORMAL, so COMMIT writes the log (the -wal file) but does not wait for the
 * disk; this fsyncs that file on libuv's thread pool instead. Units settle only after it, so
 * what is announced has survived a power cut exactly as with synchronous = FULL, while the
 * event loop goes on fetching and parsing, and the units that finish meanwhile wait for the
 * next batch (that is what makes batches grow).
 */
export class WalSync {
  private fd: number | null = null;

  constructor(
    private readonly walPath: string,
    private readonly fsync: (fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => void = fsyncAsync,
  ) {}

  /** Resolves once everything written to the log before this call is on disk. */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => {
      let fd: number;
      try {
        fd = this.descriptor();
      } catch (e) {
        reject(e);
        return;
      }
      this.fsync(fd, (err) => (err ? reject(err) : resolve()));
    });
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  /**
   * The log file's descriptor, opened once. SQLite removes the file only when the last
   * connection closes, and this store's connection is open for as long as it syncs; a
   * checkpoint that truncates or restarts the log keeps the same file.
   */
  private descriptor(): number {
    this.fd ??= openSync(this.walPath, 'r');
    return this.fd;
  }
}

/**
 * The SQLite engine: one connection in WAL mode. Writes go through the commit queue (group
 * commit); each batch's log is synced by WalSync, off the main thread. Statements outside a
 * batch wait while a batch is open or its log is not yet on disk: otherwise a read would see
 * uncommitted (or not yet durable) rows, and a write would silently join (and could roll back
 * with) someone else's transaction.
 */
export class SqliteStore extends QueuedStore {
  readonly engine = 'sqlite' as const;
  readonly dialect = 'sqlite' as const;
  readonly description: string;
  private readonly runner: SqliteRunner;
  /** A batch transaction is open. */
  private open = false;
  /** The sync of the latest commit; null once it is on disk. */
  private syncing: Promise<void> | null = null;
  /** Statements outside a batch waiting for the connection. */
  private waiters: Array<() => void> = [];
  /** A write failed on a full disk: checkpoint and truncate the log before the next batch. */
  private checkpointWanted = false;

  constructor(
    readonly sqlite: BetterSqlite3.Database,
    readonly path: string,
    latest: number,
    private readonly lock: { release(): void } | null,
    /** Null where the database has no log to sync (in memory, read-only). */
    private readonly wal: WalSync | null,
    now: () => number,
  ) {
    super(latest, now);
    this.description = `the SQLite database ${path}`;
    this.runner = new SqliteRunner(sqlite);
  }

  get transactionOpen(): boolean {
    return this.open;
  }

  get soleWriter(): boolean {
    return this.lock !== null || this.path === ':memory:';
  }

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    if (this.busy()) return this.quiet().then(() => this.all(s, p));
    return this.watched(this.runner.call(() => this.runner.exec(s, p, 'all')));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    if (this.busy()) return this.quiet().then(() => this.get(s, p));
    return this.watched(this.runner.call(() => this.runner.exec(s, p, 'get')));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    if (this.busy()) return this.quiet().then(() => this.run(s, p));
    return this.watched(this.runner.call(() => this.runner.exec(s, p, 'run')));
  }

  /** A statement's failure is noticed (a damaged file makes the store not ready) and passed on. */
  private watched<T>(p: Promise<T>): Promise<T> {
    return p.catch((e: unknown) => {
      this.noticed(e);
      throw e;
    });
  }

  /**
   * The disk is full: give the log's space back before the next write. The -wal file keeps
   * its size after a checkpoint (up to journal_size_limit); TRUNCATE empties it, which on a
   * full disk is often the room the next small write needs. Done in begin(), where no
   * transaction of this connection is open.
   */
  protected override writeFailed(e: unknown): void {
    if (this.wal && storageFailure(e) === 'full') this.checkpointWanted = true;
  }
  protected answers(): boolean {
    return this.sqlite.open;
  }

  protected async shut(): Promise<void> {
    if (this.sqlite.open) this.sqlite.close();
    this.wal?.close();
    this.lock?.release();
  }

  protected async begin(): Promise<BatchTx> {
    // One batch and one sync at a time: units that finish while the last batch's log is
    // synced join the next batch. Statements waiting outside run first (they were woken
    // when the sync ended; a turn of the loop lets them), so they never wait for long.
    if (this.syncing) {
      await this.syncing.catch(() => undefined);
      await new Promise<void>((r) => setImmediate(r));
    }
    if (this.checkpointWanted) {
      this.checkpointWanted = false;
      try {
        this.sqlite.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // Best effort: the write that follows says whether there is room now.
      }
    }
    await this.runner.call(() => this.runner.control.begin.run());
    this.open = true;
    return new SqliteTx(this.runner, {
      committed: (wrote) => {
        this.open = false;
        return this.synced(wrote);
      },
      rolledBack: () => {
        this.open = false;
        this.wakeWaiters();
      },
    });
  }

  /**
   * The sync of what was just committed (a batch begins only after the last sync ended). A
   * batch that only read (clock rules that changed nothing, say) wrote no log: nothing to sync.
   */
  private synced(wrote: boolean): Promise<void> {
    if (!this.wal || !wrote) {
      this.wakeWaiters();
      return Promise.resolve();
    }
    const mine = this.wal.sync();
    this.syncing = mine;
    const done = (): void => {
      if (this.syncing !== mine) return;
      this.syncing = null;
      this.wakeWaiters();
    };
    mine.then(done, done);
    return mine;
  }

  private busy(): boolean {
    return this.open || this.syncing !== null;
  }

  private quiet(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wakeWaiters(): void {
    if (!this.busy()) for (const w of this.waiters.splice(0)) w();
  }
}

/** Open (creating if needed) a SQLite file: durability pragmas, the daemon lock when asked, migrations. */
export function openSqlite(path: string, migrations: Migration[], opts: StoreOptions): SqliteStore {
  if (opts.readonly) {
    const sqlite = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
    try {
      sqlite.pragma('busy_timeout = 5000');
      // Read the header now: a file that is no database (or a damaged one) is said to be so
      // at open, with its path, not by whichever query first reads it.
      sqlite.pragma('schema_version');
    } catch (e) {
      sqlite.close();
      if (storageFailure(e) === 'damaged') throw damaged(path, e instanceof Error ? e.message : String(e));
      throw e;
    }
    return new SqliteStore(sqlite, path, migrations.at(-1)?.version ?? 0, null, null, opts.now);
  }
  const lock = opts.daemon && path !== ':memory:' ? lockDatabase(path, opts.now) : null;
  let sqlite: BetterSqlite3.Database | null = null;
  try {
    sqlite = new BetterSqlite3(path);
    const wal = sqlite.pragma('journal_mode = WAL', { simple: true }) === 'wal';
    // Migrations commit with a full sync; from then on WalSync syncs each batch's commit.
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    // 2 MB of page cache (the default is 16): hot rows are few, since unchanged polls
    // are answered from memory (see Poller's head cache), and pages read again come from
    // the OS's file cache, outside the process's RSS (docs/benchmarks.md: 10,000 sites).
    sqlite.pragma('cache_size = -2000');
    // The daemon checks the file before it writes to it: a damaged page would otherwise be
    // found (or not) by whichever query reads it, long after /readyz said ready.
    if (opts.daemon) checkIntact(sqlite, path);
    announceMigrated(migrateSqlite(sqlite, migrations, opts.now), migrations, opts.onMigrated);
    if (wal) sqlite.pragma('synchronous = NORMAL');
    // After a checkpoint the log file is cut back to 4 MiB (about wal_autocheckpoint's 1000
    // pages) instead of keeping the largest size it ever reached.
    sqlite.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
    // From now on a lock held elsewhere is waited for without blocking (SqliteRunner.call).
    sqlite.pragma('busy_timeout = 0');
    return new SqliteStore(sqlite, path, migrations.at(-1)?.version ?? 0, lock, wal ? new WalSync(`${path}-wal`, opts.fsync) : null, opts.now);
  } catch (e) {
    sqlite?.close();
    lock?.release();
    if (storageFailure(e) === 'damaged') throw damaged(path, e instanceof Error ? e.message : String(e));
    throw e;
  }
}

/** `PRAGMA quick_check`: every page and index well formed (it reads the whole file once). */
function checkIntact(sqlite: BetterSqlite3.Database, path: string): void {
  let found: Array<{ quick_check: string }>;
  try {
    found = sqlite.pragma('quick_check(5)', { simple: false }) as Array<{ quick_check: string }>;
  } catch (e) {
    // Some damage stops the check itself (a rowid table's garbled root page): SQLite then
    // throws "database disk image is malformed" instead of listing what it found.
    if (storageFailure(e) === 'damaged') throw damaged(path, `quick_check: ${e instanceof Error ? e.message : String(e)}`);
    throw e;
  }
  const problems = found.map((r) => r.quick_check).filter((p) => p !== 'ok');
  if (problems.length > 0) throw damaged(path, `quick_check: ${problems.join('; ')}`);
}

/** The error a damaged file gives at start: what was found, and what to do. */
function damaged(path: string, found: string): StorageError {
  return new StorageError(damagedFileMessage(path, found));
}
