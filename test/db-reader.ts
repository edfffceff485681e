import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { StorageConfig } from '../src/config/types.js';

/**
 * A connection of its own to a test database, for reading what a daemon wrote, as another
 * process would: SQLite read-only, or a PostgreSQL client. SQL given to it must be valid on
 * the engine it reads (most plain SELECTs are on both). Counts come back as numbers.
 */
export interface DbReader {
  all<T>(sql: string, params?: unknown[]): Promise<T[]>;
  /** `fn`'s reads see one consistent state (a read transaction / REPEATABLE READ). */
  snapshot<T>(fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

const NUMBERS = new Set([20, 1700]);
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    NUMBERS.has(oid) ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** Open a reader on a storage config (see DbReader). */
export async function openReader(storage: StorageConfig): Promise<DbReader> {
  if (storage.engine === 'sqlite') {
    const db = new BetterSqlite3(storage.path, { readonly: true, fileMustExist: true });
    return {
      all: async <T>(sql: string, params: unknown[] = []) => db.prepare(sql).all(...params) as T[],
      snapshot: async <T>(fn: () => Promise<T>) => {
        db.exec('BEGIN');
        try {
          return await fn();
        } finally {
          db.exec('COMMIT');
        }
      },
      close: async () => void db.close(),
    };
  }
  const client = new pg.Client({ connectionString: storage.url, types });
  await client.connect();
  return {
    all: async <T>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as T[],
    snapshot: async <T>(fn: () => Promise<T>) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      try {
        return await fn();
      } finally {
        await client.query('COMMIT');
      }
    },
    close: () => client.end(),
  };
}

/** Rows of one query on a connection of its own, opened and closed for it. */
export async function queryOnce<T>(storage: StorageConfig, sql: string, params: unknown[] = []): Promise<T[]> {
  const r = await openReader(storage);
  try {
    return await r.all<T>(sql, params);
  } finally {
    await r.close();
  }
}
