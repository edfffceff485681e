import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';

/** A migration file: `NNNN_name.sql`, applied once, in order, never edited after release. */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** Raised when the database cannot be brought to the schema this build expects. */
export class MigrationError extends Error {
  override readonly name = 'MigrationError';
  readonly code = 'migration_failed';
}

/** Raised when a database that should hold hostwatch's tables has none (no schema_migrations): only `run` and `poll --once` create them. */
export class SchemaMissingError extends Error {
  override readonly name = 'SchemaMissingError';
  readonly code = 'schema_missing';
}

/** Read the `NNNN_name.sql` files of a folder in version order (migrations/ for SQLite, migrations/postgres/ for PostgreSQL). */
export function readMigrations(dir: string): Migration[] {
  const files = readdirSync(dir).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  return files.map((file) => {
    const sql = readFileSync(join(dir, file), 'utf8');
    return {
      version: Number(file.slice(0, 4)),
      name: file,
      sql,
      checksum: createHash('sha256').update(sql).digest('hex'),
    };
  });
}

/** A row of schema_migrations. */
interface Applied {
  version: number;
  name: string;
  checksum: string;
}

/**
 * Refuse (throw MigrationError) when an applied migration is missing or was changed, or the
 * database is newer than this build — the daemon must not run against a schema it does not
 * understand. Returns the versions already applied.
 */
function checkApplied(applied: readonly Applied[], migrations: readonly Migration[]): Set<number> {
  const known = new Map(migrations.map((m) => [m.version, m]));
  for (const a of applied) {
    const m = known.get(a.version);
    if (!m) {
      const newest = migrations.at(-1)?.version ?? 0;
      throw new MigrationError(
        a.version > newest
          ? `the database was migrated by a newer hostwatch (migration ${a.name}); upgrade hostwatch or restore a backup`
          : `corrupted migrations: previously applied migration ${a.name} is missing from migrations/`,
      );
    }
    if (m.checksum !== a.checksum) {
      throw new MigrationError(`corrupted migrations: ${a.name} was changed after it was applied (checksum differs)`);
    }
  }
  return new Set(applied.map((a) => a.version));
}

/**
 * What `run` would refuse about an existing SQLite file's schema (see checkApplied), read
 * without writing: `check` says it before a restart does. Null when nothing would be refused,
 * or when the file has no hostwatch schema yet (`run` creates it).
 */
export function sqliteSchemaProblem(db: BetterSqlite3.Database, migrations: readonly Migration[]): string | null {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === undefined) return null;
  try {
    checkApplied(db.prepare('SELECT version, name, checksum FROM schema_migrations ORDER BY version').all() as Applied[], migrations);
    return null;
  } catch (e) {
    if (e instanceof MigrationError) return e.message;
    throw e;
  }
}

const TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at BIGINT NOT NULL)`;

/**
 * Apply pending SQLite migrations, each in its own transaction (see checkApplied for what is
 * refused). Returns the versions applied now.
 */
export function migrateSqlite(db: BetterSqlite3.Database, migrations: Migration[], now: () => number): number[] {
  // The table as 0001 found it (INTEGER applied_at); kept byte for byte for existing files.
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = db.prepare('SELECT version, name, checksum FROM schema_migrations ORDER BY version').all() as Applied[];
  const done = checkApplied(applied, migrations);
  const ran: number[] = [];
  const record = db.prepare('INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)');
  for (const m of migrations) {
    if (done.has(m.version)) continue;
    try {
      db.transaction(() => {
        db.exec(m.sql);
        record.run(m.version, m.name, m.checksum, now());
      })();
    } catch (e) {
      throw new MigrationError(`migration ${m.name} failed: ${(e as Error).message}`);
    }
    ran.push(m.version);
  }
  return ran;
}

/** Tell `onMigrated` the names of the migrations just applied, if any. */
export function announceMigrated(versions: readonly number[], migrations: readonly Migration[], onMigrated: ((names: string[]) => void) | undefined): void {
  if (versions.length === 0 || !onMigrated) return;
  onMigrated(migrations.filter((m) => versions.includes(m.version)).map((m) => m.name));
}

/** The session-level advisory lock key under which PostgreSQL migrations run ("hwmigrat"). */
export const MIGRATION_LOCK = 0x68776d6967726174n;

/**
 * What opening a PostgreSQL database may do to its schema: `create` it (the daemon), bring an
 * existing one up to date (commands that write), or only `read` one that exists.
 */
export type SchemaMode = 'create' | 'existing' | 'read';

/** Whether the database holds hostwatch's bookkeeping table (on the search_path, as the statements find it). */
async function schemaPresent(client: pg.ClientBase): Promise<boolean> {
  return (await client.query<{ present: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")).rows[0]?.present === true;
}

/**
 * The hint for a statement refused for want of rights (42501): since PostgreSQL 15 an
 * ordinary role may not create tables in the public schema unless granted.
 */
function ddlFailure(what: string, e: unknown): MigrationError {
  const hint =
    (e as { code?: unknown }).code === '42501'
      ? '; the role in storage.url may not create tables: GRANT CREATE ON SCHEMA public TO that role, or start hostwatch once as the database owner to apply the migrations (a database already up to date needs no such right)'
      : '';
  return new MigrationError(`${what} failed: ${(e as Error).message}${hint}`);
}

/**
 * Apply pending PostgreSQL migrations, each in its own transaction, under a session advisory
 * lock: several instances starting at once take turns, and the later ones find the work done.
 * A database that is up to date gets no DDL at all (a role without CREATE rights runs on it).
 * Without hostwatch's tables, `create` makes them and the other modes throw SchemaMissingError.
 */
export async function migratePostgres(client: pg.ClientBase, migrations: Migration[], now: () => number, mode: SchemaMode = 'create'): Promise<number[]> {
  if (mode === 'read') {
    if (!(await schemaPresent(client))) throw new SchemaMissingError('it holds no hostwatch tables (no schema_migrations)');
    return [];
  }
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
  try {
    if (!(await schemaPresent(client))) {
      if (mode !== 'create') throw new SchemaMissingError('it holds no hostwatch tables (no schema_migrations)');
      await client.query(TABLE).catch((e: unknown) => {
        throw ddlFailure('creating schema_migrations', e);
      });
    }
    const applied = (await client.query<Applied>('SELECT version, name, checksum FROM schema_migrations ORDER BY version')).rows;
    const done = checkApplied(applied, migrations);
    const ran: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)', [m.version, m.name, m.checksum, now()]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw ddlFailure(`migration postgres/${m.name}`, e);
      }
      ran.push(m.version);
    }
    return ran;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()]).catch(() => undefined);
  }
}
