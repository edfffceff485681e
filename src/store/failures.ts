/**
 * Which errors mean "the store itself fails" (a full disk, a lock held elsewhere, a damaged
 * file, a database that cannot be reached) rather than "this statement is wrong" (a
 * constraint, a bug). The first make the daemon not ready and raise `storage.failing`;
 * the second are the caller's business.
 */

/** SQLite's primary result codes that are about the file, the disk or the lock, not the statement. */
const SQLITE_STORAGE = ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_CORRUPT', 'SQLITE_NOTADB', 'SQLITE_BUSY', 'SQLITE_READONLY', 'SQLITE_CANTOPEN', 'SQLITE_PROTOCOL', 'SQLITE_NOMEM'];

/** The same for SQLite: the database file is damaged. */
const SQLITE_DAMAGED = ['SQLITE_CORRUPT', 'SQLITE_NOTADB'];

/**
 * PostgreSQL SQLSTATE classes (and codes) about the server rather than the statement:
 * 08 connection exceptions, 53 insufficient resources (53100 disk full), 57P admin
 * shutdown and crash, 58 system errors (58030 I/O), XX internal errors (XX001 data corrupted).
 */
const PG_STORAGE = /^(08|53|57P|58|XX)/;

/** Errors of the network stack when the server cannot be reached at all. */
const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH']);

/** What kind of store failure `e` is (`full`, `locked`, `damaged`, `unavailable`), or null for an ordinary error. */
export function storageFailure(e: unknown): 'full' | 'locked' | 'damaged' | 'unavailable' | null {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_')) {
      if (code.startsWith('SQLITE_FULL')) return 'full';
      if (code.startsWith('SQLITE_BUSY')) return 'locked';
      if (SQLITE_DAMAGED.some((c) => code.startsWith(c))) return 'damaged';
      return SQLITE_STORAGE.some((c) => code.startsWith(c)) ? 'unavailable' : null;
    }
    if (code === '53100') return 'full';
    if (code === 'XX001' || code === 'XX002') return 'damaged';
    if (PG_STORAGE.test(code) || NETWORK.has(code)) return 'unavailable';
  }
  // node-postgres ends a query whose connection dropped with a plain Error.
  if (e instanceof Error && /Connection terminated|connection timeout/i.test(e.message)) return 'unavailable';
  return null;
}

/** A store failure as one line for logs, /readyz and `storage.failing`: the kind, the code and the driver's message. */
export function describeStorageFailure(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  const message = e instanceof Error ? e.message : String(e);
  return `${storageFailure(e) ?? 'error'}${typeof code === 'string' ? ` (${code})` : ''}: ${message}`;
}

/** What is said of a damaged SQLite file, at start and by `check`: what was found, and what to do. */
export function damagedFileMessage(path: string, found: string): string {
  return `the SQLite database ${path} is damaged (${found}); hostwatch does not run on it. Restore it from a backup (docs/operations.md, "Back up the database"), or keep what can be read: sqlite3 ${path} .recover | sqlite3 ${path}.recovered, then set storage.path to the new file`;
}
