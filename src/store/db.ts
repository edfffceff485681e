import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import {
  DummyDriver,
  Kysely,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type Compilable,
} from 'kysely';
import { packageRoot } from '../paths.js';
import { migrate, readMigrations } from './migrate.js';
import { storagePathProblem } from './storage-path.js';
import type { Database } from './schema.js';

/**
 * Kysely builds and types the queries; better-sqlite3 runs them synchronously. That split
 * is deliberate: a poll's transaction (snapshot + events + outbox) must never await, and a
 * synchronous driver makes an await inside it impossible rather than merely discouraged.
 */
export const qb = new Kysely<Database>({
  dialect: {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  },
});

export interface Store {
  sqlite: BetterSqlite3.Database;
  path: string;
  /** The database answers and holds every migration this build knows. */
  ready(): boolean;
  close(): void;
}

/** Raised when the database file cannot be opened or created; the message names the path and why. */
export class StorageError extends Error {
  override readonly name = 'StorageError';
  readonly code = 'storage_unusable';
}

/** Open (creating if needed) the SQLite file, set durability pragmas and apply migrations. */
export function openStore(path: string, now: () => number = Date.now): Store {
  const problem = storagePathProblem(path);
  if (problem !== null) throw new StorageError(`storage.path: ${problem}`);
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  try {
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    // 2 MB of page cache (the default is 16): hot rows are few, since unchanged polls
    // are answered from memory (see Poller's head cache), and pages read again come from
    // the OS's file cache, outside the process's RSS (docs/benchmarks.md: 10,000 sites).
    sqlite.pragma('cache_size = -2000');
    const migrations = readMigrations(join(packageRoot(), 'migrations'));
    migrate(sqlite, migrations, now);
    const latest = migrations.at(-1)?.version ?? 0;
    const versionStmt = sqlite.prepare('SELECT max(version) AS v FROM schema_migrations');
    return {
      sqlite,
      path,
      ready: () => sqlite.open && (versionStmt.get() as { v: number | null }).v === latest,
      close: () => sqlite.close(),
    };
  } catch (e) {
    sqlite.close();
    throw e;
  }
}

const PARAM = '\u0000hw-param:';

/**
 * A prepared statement from a kysely query, with named parameters.
 * `build` receives placeholders standing for the named values; they are replaced by
 * positional `?` bindings, so the query is compiled and prepared once and run many times.
 */
export function prepare<P extends Record<string, unknown>>(
  sqlite: BetterSqlite3.Database,
  build: (p: { [K in keyof P]: P[K] }) => Compilable,
): Prepared<P> {
  const proxy = new Proxy({}, { get: (_t, k) => PARAM + String(k) }) as { [K in keyof P]: P[K] };
  const compiled = build(proxy).compile();
  // Each binding is either a named placeholder or a literal written into the query.
  const bindings: Array<{ name: string } | { literal: unknown }> = compiled.parameters.map((v) =>
    typeof v === 'string' && v.startsWith(PARAM) ? { name: v.slice(PARAM.length) } : { literal: v },
  );
  const stmt = sqlite.prepare(compiled.sql);
  const args = (p: P): unknown[] => bindings.map((b) => ('name' in b ? p[b.name as keyof P] : b.literal));
  return {
    run: (p) => stmt.run(...args(p)),
    get: (p) => stmt.get(...args(p)),
    all: (p) => stmt.all(...args(p)),
  };
}

/** The named placeholders of `cols`, as an object `values()` can take. */
export function pick<P, K extends keyof P & string>(p: P, cols: readonly K[]): Pick<P, K> {
  const out = {} as Pick<P, K>;
  for (const c of cols) out[c] = p[c];
  return out;
}

/** `cols` without `keys`: what an upsert updates when the row exists. */
export function nonKey<C extends string, K extends C>(cols: readonly C[], keys: readonly K[]): Exclude<C, K>[] {
  return cols.filter((c): c is Exclude<C, K> => !(keys as readonly string[]).includes(c));
}

export interface Prepared<P> {
  run(p: P): BetterSqlite3.RunResult;
  get(p: P): unknown;
  all(p: P): unknown[];
}
