import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../src/store/db.js';
import { packageRoot } from '../src/paths.js';
import { migrateSqlite as migrate, MigrationError, readMigrations, type Migration } from '../src/store/migrate.js';
import { repos } from '../src/store/repos.js';
import { sqliteOf, tempDir } from './harness.js';

let tmp: { dir: string; cleanup: () => void };
beforeEach(() => {
  tmp = tempDir();
});
afterEach(() => tmp.cleanup());

describe('opening the store', () => {
  const open = (path: string): Promise<Store> => openStore({ engine: 'sqlite', path }, { now: Date.now });

  it('creates the file, applies every migration and sets WAL, synchronous=NORMAL (each commit is synced by WalSync) and no busy timeout in the driver (a lock is waited for on timers, sqlite-faults.test.ts)', async () => {
    const store = await open(join(tmp.dir, 'sub/dir/h.db'));
    const sqlite = sqliteOf(store);
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(sqlite.pragma('synchronous', { simple: true })).toBe(1);
    expect(sqlite.pragma('busy_timeout', { simple: true })).toBe(0);
    const tables = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual(expect.arrayContaining(['alerts', 'delivery_attempts', 'events', 'outbox', 'poll_state', 'schema_migrations', 'snapshots']));
    expect(await store.ready()).toBe(true);
    await store.close();
  });

  it('is idempotent: a second open applies nothing', async () => {
    await (await open(join(tmp.dir, 'h.db'))).close();
    const store = await open(join(tmp.dir, 'h.db'));
    const known = readMigrations(join(packageRoot(), 'migrations')).length;
    expect(sqliteOf(store).prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(known);
    await store.close();
  });

  it('refuses a database whose applied migration was changed', async () => {
    const file = join(tmp.dir, 'h.db');
    await (await open(file)).close();
    const raw = new BetterSqlite3(file);
    raw.prepare("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1").run();
    raw.close();
    await expect(open(file)).rejects.toThrow(new MigrationError(`the SQLite database ${file}: corrupted migrations: 0001_init.sql was changed after it was applied (checksum differs)`));
  });

  it('refuses a database migrated by a newer hostwatch', async () => {
    const file = join(tmp.dir, 'h.db');
    await (await open(file)).close();
    const raw = new BetterSqlite3(file);
    raw.prepare("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'c', 0)").run();
    raw.close();
    await expect(open(file)).rejects.toThrow(
      `the SQLite database ${file}: the database was migrated by a newer hostwatch (migration 9999_future.sql); upgrade hostwatch or restore a backup`,
    );
  });
});

describe('a migration', () => {
  it('that fails is rolled back whole and names itself', () => {
    const db = new BetterSqlite3(':memory:');
    const good: Migration = { version: 1, name: '0001_a.sql', sql: 'CREATE TABLE a (x INTEGER);', checksum: '1' };
    const bad: Migration = { version: 2, name: '0002_b.sql', sql: 'CREATE TABLE b (x INTEGER); INSERT INTO nope VALUES (1);', checksum: '2' };
    expect(() => migrate(db, [good, bad], () => 0)).toThrow('migration 0002_b.sql failed: no such table: nope');
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual(['a', 'schema_migrations']);
    expect(db.prepare('SELECT version FROM schema_migrations').pluck().all()).toEqual([1]);
  });

  it('that was applied but is missing from the folder is an error', () => {
    const db = new BetterSqlite3(':memory:');
    const one: Migration = { version: 1, name: '0001_a.sql', sql: 'CREATE TABLE a (x INTEGER);', checksum: '1' };
    const two: Migration = { version: 2, name: '0002_b.sql', sql: 'CREATE TABLE b (x INTEGER);', checksum: '2' };
    migrate(db, [one, two], () => 0);
    expect(() => migrate(db, [two, { ...two, version: 3, name: '0003_c.sql' }], () => 0)).toThrow(
      'corrupted migrations: previously applied migration 0001_a.sql is missing from migrations/',
    );
  });

  it('0011 carries every snapshot and evidence row of an existing database into ordinary (rowid) tables, keys and upserts unchanged', async () => {
    const file = join(tmp.dir, 'h.db');
    const all = readMigrations(join(packageRoot(), 'migrations'));
    const v10 = all.filter((m) => m.version <= 10);
    expect(all.find((m) => m.version === 11)?.name).toBe('0011_rowid_bodies.sql');
    // A database as hostwatch left it before v11, with rows in both tables.
    const old = new BetterSqlite3(file);
    migrate(old, v10, () => 0);
    const snap = old.prepare('INSERT INTO snapshots (source, entity, site_id, hash, body, version, changed_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
    const ev = old.prepare('INSERT INTO event_evidence (event_id, at, body) VALUES (?, ?, ?)');
    for (let i = 0; i < 300; i++) {
      snap.run('health', `sites/${(i * 7919) % 300}/health`, (i * 7919) % 300, `h${i}`, JSON.stringify({ i, pad: 'x'.repeat(i * 3) }), i + 1, 1_000 + i);
      ev.run(`ev-${(i * 104729) % 1000}`, 2_000 + i, JSON.stringify({ rule: 'r', i }));
    }
    snap.run('sites', '', null, 'hs', '[]', 1, 5);
    const dump = (db: BetterSqlite3.Database): unknown[] => [
      db.prepare('SELECT * FROM snapshots ORDER BY source, entity').all(),
      db.prepare('SELECT * FROM event_evidence ORDER BY event_id').all(),
    ];
    const before = dump(old);
    expect(old.prepare("SELECT sql FROM sqlite_master WHERE name = 'snapshots'").pluck().get()).toContain('WITHOUT ROWID');
    old.close();

    const store = await openStore({ engine: 'sqlite', path: file }, { now: Date.now });
    const db = sqliteOf(store);
    expect(dump(db)).toEqual(before);
    for (const t of ['snapshots', 'event_evidence']) expect(db.prepare('SELECT sql FROM sqlite_master WHERE name = ?').pluck().get(t)).not.toContain('WITHOUT ROWID');
    // The keys still refuse a second row, and the by-time index is back.
    expect(() => db.prepare("INSERT INTO snapshots (source, entity, site_id, hash, body, version, changed_at) VALUES ('sites', '', NULL, 'x', '[]', 2, 6)").run()).toThrow(/UNIQUE constraint failed/);
    expect(() => db.prepare("INSERT INTO event_evidence (event_id, at, body) VALUES ('ev-0', 1, '{}')").run()).toThrow(/UNIQUE constraint failed/);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'event_evidence' AND name = 'event_evidence_by_time'").pluck().get()).toBe('event_evidence_by_time');
    // The repository's upsert, through the store, updates the row in place.
    const r = repos(store);
    const row = (before[0] as Array<{ source: string; entity: string }>).find((x) => x.entity === 'sites/5/health')!;
    const stored = (await r.snapshots.get(row.source, row.entity))!;
    expect(stored).toEqual(row);
    await r.snapshots.put({ ...stored, hash: 'h-new', version: stored.version + 1 });
    expect(await r.snapshots.head(row.source, row.entity)).toEqual({ hash: 'h-new', version: stored.version + 1 });
    expect(db.prepare('SELECT count(*) FROM snapshots').pluck().get()).toBe(301);
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    await store.close();
  });
});

describe('the queries of every event', () => {
  it('find the inhibitions in force for a site through an index, not by reading every inhibited site', async () => {
    const store = await openStore({ engine: 'sqlite', path: join(tmp.dir, 'h.db') }, { now: Date.now });
    const r = repos(store);
    await store.transaction(async (tx) => {
      const t = repos(tx);
      for (let site = 1; site <= 300; site++) await t.delivery.startInhibition({ source: 'site.offline', site_id: site, event_id: `e${site}`, since: 1 });
      await t.delivery.startInhibition({ source: 'site.suspended', site_id: 7, event_id: 'e-7', since: 1 });
    });
    // The SQL the repository runs, as it runs it.
    const runner = (store as unknown as { runner: { exec: (s: { compile(d: string): { sql: string } }, p: unknown, m: string) => unknown } }).runner;
    const ran: string[] = [];
    const exec = runner.exec.bind(runner);
    runner.exec = (s, p, m) => (ran.push(s.compile('sqlite').sql), exec(s, p, m));
    expect((await r.delivery.inhibitionSources(7)).sort()).toEqual(['site.offline', 'site.suspended']);
    expect(await r.delivery.inhibitionSources(301)).toEqual([]);
    runner.exec = exec;
    const sql = sqliteOf(store);
    const plan = (q: string): string => (sql.prepare(`EXPLAIN QUERY PLAN ${q}`).all(7) as Array<{ detail: string }>).map((x) => x.detail).join(' | ');
    expect(ran.length).toBe(2);
    expect(plan(ran[0]!)).toMatch(/SEARCH inhibitions USING (COVERING )?INDEX inhibitions_by_site/);
    expect(plan(ran[0]!)).not.toMatch(/\bSCAN\b/);
    await store.close();
  });
});
