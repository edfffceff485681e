import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { BatchTx } from './commit-queue.js';
import type { StoreOptions } from './db.js';
import { migrateSqlite, type Migration } from './migrate.js';
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

  constructor(readonly db: BetterSqlite3.Database) {}

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

  /** The same, as a promise (a synchronous throw becomes a rejection). */
  call<T>(fn: () => unknown): Promise<T> {
    try {
      return Promise.resolve(fn() as T);
    } catch (e) {
      return Promise.reject(e);
    }
  }
}

/** The open batch transaction: statements run on the connection directly. */
class SqliteTx implements BatchTx {
  readonly dialect = 'sqlite' as const;
  private readonly sp;

  constructor(
    private readonly r: SqliteRunner,
    private readonly onEnd: () => void,
  ) {
    this.sp = {
      open: r.db.prepare('SAVEPOINT hw_unit'),
      release: r.db.prepare('RELEASE hw_unit'),
      undo: r.db.prepare('ROLLBACK TO hw_unit'),
    };
  }

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    return this.r.call(() => this.r.exec(s, p, 'all'));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    return this.r.call(() => this.r.exec(s, p, 'get'));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    return this.r.call(() => this.r.exec(s, p, 'run'));
  }
  // One connection, one writer: commit order is insert order already.
  orderEvents(): Promise<void> {
    return Promise.resolve();
  }
  savepoint(): Promise<void> {
    return this.r.call(() => this.sp.open.run());
  }
  release(): Promise<void> {
    return this.r.call(() => this.sp.release.run());
  }
  rollbackTo(): Promise<void> {
    return this.r.call(() => {
      this.sp.undo.run();
      this.sp.release.run();
    });
  }
  commit(): Promise<void> {
    return this.r.call<void>(() => this.r.db.exec('COMMIT')).then(this.onEnd);
  }
  rollback(): Promise<void> {
    return this.r
      .call<void>(() => {
        if (this.r.db.inTransaction) this.r.db.exec('ROLLBACK');
      })
      .finally(this.onEnd);
  }
}

/**
 * The SQLite engine: one connection (WAL, synchronous = FULL). Writes go through the commit
 * queue (group commit). While a batch transaction is open, every other statement on this
 * connection waits for it to end: otherwise a read would see uncommitted writes, and a write
 * would silently join (and could roll back with) someone else's transaction.
 */
export class SqliteStore extends QueuedStore {
  readonly engine = 'sqlite' as const;
  readonly dialect = 'sqlite' as const;
  readonly description: string;
  private readonly runner: SqliteRunner;
  /** Settles when the open batch ends; null when none is open. */
  private gate: Promise<void> | null = null;

  constructor(
    readonly sqlite: BetterSqlite3.Database,
    readonly path: string,
    latest: number,
    private readonly lock: { release(): void } | null,
  ) {
    super(latest);
    this.description = `the SQLite database ${path}`;
    this.runner = new SqliteRunner(sqlite);
  }

  get transactionOpen(): boolean {
    return this.gate !== null;
  }

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    if (this.gate) return this.gate.then(() => this.all(s, p));
    return this.runner.call(() => this.runner.exec(s, p, 'all'));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    if (this.gate) return this.gate.then(() => this.get(s, p));
    return this.runner.call(() => this.runner.exec(s, p, 'get'));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    if (this.gate) return this.gate.then(() => this.run(s, p));
    return this.runner.call(() => this.runner.exec(s, p, 'run'));
  }
  protected answers(): boolean {
    return this.sqlite.open;
  }

  protected async shut(): Promise<void> {
    if (this.sqlite.open) this.sqlite.close();
    this.lock?.release();
  }

  protected async begin(): Promise<BatchTx> {
    // BEGIN IMMEDIATE takes the write lock at once (waiting up to busy_timeout for a CLI
    // command's write): a deferred BEGIN could fail to upgrade after its first read.
    this.sqlite.exec('BEGIN IMMEDIATE');
    let open!: () => void;
    this.gate = new Promise<void>((resolve) => (open = resolve));
    // A failed COMMIT leaves the transaction open: the queue then rolls back, which ends it.
    return new SqliteTx(this.runner, () => {
      this.gate = null;
      open();
    });
  }
}

/** Open (creating if needed) a SQLite file: durability pragmas, the daemon lock when asked, migrations. */
export function openSqlite(path: string, migrations: Migration[], opts: StoreOptions): SqliteStore {
  if (opts.readonly) {
    const sqlite = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
    sqlite.pragma('busy_timeout = 5000');
    return new SqliteStore(sqlite, path, migrations.at(-1)?.version ?? 0, null);
  }
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const lock = opts.daemon && path !== ':memory:' ? lockDatabase(path, opts.now) : null;
  let sqlite: BetterSqlite3.Database | null = null;
  try {
    sqlite = new BetterSqlite3(path);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    // 8 MB of page cache (the default is 16): hot rows are few, since unchanged polls
    // are answered from memory (see Poller's head cache).
    sqlite.pragma('cache_size = -8000');
    migrateSqlite(sqlite, migrations, opts.now);
    return new SqliteStore(sqlite, path, migrations.at(-1)?.version ?? 0, lock);
  } catch (e) {
    sqlite?.close();
    lock?.release();
    throw e;
  }
}
