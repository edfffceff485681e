import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';

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

/** Read `migrations/*.sql` in version order. */
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

/**
 * Apply pending migrations, each in its own transaction. Refuses (throws MigrationError)
 * when an applied migration is missing or was changed, or the database is newer than
 * this build — the daemon must not run against a schema it does not understand.
 */
export function migrate(db: BetterSqlite3.Database, migrations: Migration[], now: () => number): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)`);
  const applied = db.prepare('SELECT version, name, checksum FROM schema_migrations ORDER BY version').all() as Array<{
    version: number;
    name: string;
    checksum: string;
  }>;
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
  const done = new Set(applied.map((a) => a.version));
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
