import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { StorageConfig } from '../config/types.js';
import { packageRoot } from '../paths.js';
import type { CommitStats, SubmitOptions, Unit } from './commit-queue.js';
import { damagedFileMessage, storageFailure } from './failures.js';
import { MigrationError, readMigrations, sqliteSchemaProblem } from './migrate.js';
import type { Executor } from './sql.js';
import { makeFolders, storagePathProblem } from './storage-path.js';

/**
 * The store port: what every repository and caller uses, on either engine. Statements run
 * one by one on the store, or together in `transaction`. Both engines answer through
 * promises (node-postgres is asynchronous), and every write goes through group commit.
 */
export interface Store extends Executor {
  readonly engine: 'sqlite' | 'postgres';
  /** Where the data is, for messages ("the SQLite database /x.db"); never a password. */
  readonly description: string;
  /**
   * Run `unit` in a transaction and resolve with its result once it has committed: all its
   * writes or none. The unit may await only its own `tx`'s statements (never other IO: no
   * network IO inside a transaction, invariant 4). Units that arrive close together share
   * one transaction (group commit), and one unit's failure rolls back that unit only. A
   * `patient` unit (a poll's result) may wait a little longer for others to share its
   * commit; a `repeatable` one may be run again after its batch rolled back, which spares
   * its batch the savepoints (CommitQueue's SubmitOptions).
   */
  transaction<T>(unit: Unit<T>, opts?: SubmitOptions): Promise<T>;
  /**
   * A writer that may soon submit a patient unit (a poll waiting for its reply) says so, and
   * calls the returned function once it knows whether it will (before submitting): patient
   * units wait for others only while some writer is expected (CommitQueue.expect).
   */
  expectWrite(): () => void;
  /**
   * No other process can write to this database while this store is open (SQLite under the
   * daemon's lock, or in memory; never PostgreSQL, which a cluster shares): what this
   * process did not write is not there, and what it wrote it knows.
   */
  readonly soleWriter: boolean;
  /** A batch transaction is open right now (tests check that no network IO happens then). */
  readonly transactionOpen: boolean;
  /** Commits so far: batches and the units they carried. */
  readonly stats: CommitStats;
  /**
   * The database answers, holds every migration this build knows, its last write went
   * through and no statement found the file damaged.
   */
  ready(): Promise<boolean>;
  /** Why the store fails now (writes refused: disk full, locked, unreachable; a damaged file), or null. */
  problem(): string | null;
  /** Wait for queued commits, then close (and release the daemon lock). */
  close(): Promise<void>;
}

export interface StoreOptions {
  now: () => number;
  /**
   * Open as the daemon (run, poll --once, demo): the store takes the one-daemon lock of its
   * database (a second daemon refuses to start). CLI commands that read or write beside a
   * running daemon leave it false.
   */
  daemon?: boolean;
  /** Open read-only, without migrating (`hostwatch events`); PostgreSQL: a database without hostwatch's tables is refused (SchemaMissingError). */
  readonly?: boolean;
  /**
   * PostgreSQL: refuse (SchemaMissingError) a database without hostwatch's tables rather than
   * create them: only the daemon creates a database (on SQLite the CLI checks the file).
   */
  mustExist?: boolean;
  /**
   * PostgreSQL: a transaction left idle this long is ended by the server (cluster members:
   * the lease). A member frozen inside a write transaction (SIGSTOP, a stalled VM, a
   * partition) would otherwise hold the cluster-wide write lock, and every other member's
   * commits would wait for it for good.
   */
  idleInTransactionMs?: number;
  /** A pooled PostgreSQL connection failed while idle (logged; the pool replaces it). */
  onError?: (e: Error) => void;
  /** Migrations were applied at this open (their names, in order): the daemon logs them. */
  onMigrated?: (names: string[]) => void;
  /** SQLite: how the log file is synced (tests observe it); default fs.fsync. */
  fsync?: (fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => void;
}

/** The SQL files of each engine: the same numbers, each engine's own syntax. */
export function migrationsDir(engine: Store['engine']): string {
  return engine === 'sqlite' ? join(packageRoot(), 'migrations') : join(packageRoot(), 'migrations', 'postgres');
}

/** Raised when the database file cannot be opened or created; the message names the path and why. */
export class StorageError extends Error {
  override readonly name = 'StorageError';
  readonly code = 'storage_unusable';
}

/** Raised when the PostgreSQL server of storage.url cannot be connected to at open; the message names the database and host, never the password. */
export class StorageUnreachableError extends Error {
  override readonly name = 'StorageUnreachableError';
  readonly code = 'storage_unreachable';
}

/** Open the configured store: SQLite (`storage.path`) or PostgreSQL (`storage.url`), migrated. */
export async function openStore(storage: StorageConfig, opts: StoreOptions): Promise<Store> {
  try {
    if (storage.engine === 'postgres') {
      const { openPostgres } = await import('./postgres.js');
      return await openPostgres(storage.url, readMigrations(migrationsDir('postgres')), opts);
    }
    // Named with its path and reason, rather than SQLite's "unable to open database file".
    const problem = opts.readonly ? null : (storagePathProblem(storage.path) ?? makeFolders(storage.path));
    if (problem !== null) throw new StorageError(`storage.path: ${problem}`);
    const { openSqlite } = await import('./sqlite.js');
    return openSqlite(storage.path, readMigrations(migrationsDir('sqlite')), opts);
  } catch (e) {
    // "the database was migrated by a newer hostwatch": which one, when a host has several.
    if (e instanceof MigrationError) throw new MigrationError(`${describeStorage(storage)}: ${e.message}`);
    throw e;
  }
}

/**
 * What `run` would refuse about the schema of an existing SQLite file (a newer hostwatch's
 * migration, a changed or missing one, or a file that is no database or whose header or
 * schema is damaged), read without writing; null when nothing. Only what these reads meet:
 * `run`'s `quick_check` of every page is not done here. A PostgreSQL database is not
 * connected to (`check` works offline).
 */
export async function storedSchemaProblem(storage: StorageConfig): Promise<string | null> {
  if (storage.engine !== 'sqlite' || storage.path === ':memory:' || !existsSync(storage.path)) return null;
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  let db: InstanceType<typeof BetterSqlite3> | null = null;
  try {
    db = new BetterSqlite3(storage.path, { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    return sqliteSchemaProblem(db, readMigrations(migrationsDir('sqlite')));
  } catch (e) {
    if (storageFailure(e) === 'damaged') return damagedFileMessage(storage.path, e instanceof Error ? e.message : String(e));
    throw e;
  } finally {
    db?.close();
  }
}

/** Where a storage config points, for messages: a file, or a database and host (never user or password). */
export function describeStorage(storage: StorageConfig): string {
  if (storage.engine === 'sqlite') return `the SQLite database ${storage.path}`;
  try {
    const u = new URL(storage.url);
    return `the PostgreSQL database ${decodeURIComponent(u.pathname.slice(1)) || '(default)'} on ${u.hostname}${u.port ? `:${u.port}` : ''}`;
  } catch {
    return 'the PostgreSQL database of storage.url';
  }
}
