import { hostname } from 'node:os';
import BetterSqlite3 from 'better-sqlite3';
import { storageFailure } from './failures.js';

/** The daemon that holds a database. */
export interface Holder {
  pid: number;
  host: string;
  since: number;
}

/** Raised when another live daemon uses the database (a second one would send everything twice). */
export class DatabaseInUseError extends Error {
  override readonly name = 'DatabaseInUseError';
  readonly code = 'database_in_use';
  constructor(
    message: string,
    readonly holder: Holder | null,
  ) {
    super(message);
  }
}

/** How long a starting daemon waits for the lock file's own short locks before it gives up. */
const WAIT_MS = 500;

/**
 * One daemon per SQLite file. The lock is a sidecar SQLite database (`<file>.lock`) whose
 * one row names the holder. The holder commits its pid, then keeps a read transaction open
 * for its whole life: that is a shared fcntl lock SQLite itself holds, so the kernel drops it
 * when the process dies (SIGKILL and power loss included: no stale lock to clean up). While
 * it is held, nobody can commit to the lock file, so a second daemon's attempt to write its
 * own pid fails (SQLITE_BUSY after a short wait) and it refuses, naming the pid it reads.
 *
 * Two daemons starting at the same moment may both commit their pid before either holds the
 * read lock; the last commit wins, and each one checks, under its read lock, that the row
 * names itself. So whoever the row names holds the lock, and the refusal names the right pid.
 */
export function lockDatabase(path: string, now: () => number, pid = process.pid): { release(): void } {
  const file = `${path}.lock`;
  const db = new BetterSqlite3(file, { timeout: WAIT_MS });
  const host = hostname();
  try {
    db.exec(`CREATE TABLE IF NOT EXISTS holder (
      id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, since INTEGER NOT NULL)`);
    const read = db.prepare('SELECT pid, host, since FROM holder WHERE id = 1');
    const refuse = (h: Holder | undefined): DatabaseInUseError =>
      inUse(`the database ${path}`, h ?? null, 'one daemon per SQLite file (a second one would send every event twice). Stop the other one, or use PostgreSQL (storage.url) to run several');
    try {
      db.prepare('INSERT OR REPLACE INTO holder (id, pid, host, since) VALUES (1, ?, ?, ?)').run(pid, host, now());
    } catch (e) {
      if (storageFailure(e) !== 'locked') throw e;
      throw refuse(read.get() as Holder | undefined);
    }
    db.exec('BEGIN');
    const row = read.get() as Holder | undefined;
    if (row?.pid !== pid || row.host !== host) {
      db.exec('ROLLBACK');
      throw refuse(row);
    }
    return {
      release: () => {
        if (!db.open) return;
        db.exec('ROLLBACK');
        db.close();
      },
    };
  } catch (e) {
    if (db.open) db.close();
    throw e;
  }
}

/** The refusal: what is in use, by whom (when known), and what to do. */
export function inUse(what: string, h: Holder | null, advice: string): DatabaseInUseError {
  const who = h ? `pid ${h.pid} on ${h.host}, running since ${new Date(h.since).toISOString()}` : 'another process';
  return new DatabaseInUseError(`${what} is in use by another hostwatch daemon (${who}); ${advice}`, h);
}
