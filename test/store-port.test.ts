import { fstatSync, statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { StorageConfig } from '../src/config/types.js';
import { CommitQueue, type BatchTx } from '../src/store/commit-queue.js';
import { describeStorage, openStore, migrationsDir, StorageUnreachableError, type Store } from '../src/store/db.js';
import { toEventRow } from '../src/store/events-repo.js';
import { MigrationError, readMigrations, SchemaMissingError } from '../src/store/migrate.js';
import { repos } from '../src/store/repos.js';
import { statement, type Executor } from '../src/store/sql.js';
import { siteEvent } from './events-fixture.js';
import { ENGINES, freshStorage, type Engine } from './pg.js';

/** Every fresh database made here, removed after the file. */
const cleanups: Array<() => Promise<void>> = [];
const open: Store[] = [];
afterAll(async () => {
  for (const s of open) await s.close();
  for (const c of cleanups) await c();
});

async function fresh(engine: Engine): Promise<StorageConfig> {
  const f = await freshStorage(engine);
  cleanups.push(f.cleanup);
  return f.storage;
}

async function store(storage: StorageConfig): Promise<Store> {
  const s = await openStore(storage, { now: () => 1_000 });
  open.push(s);
  return s;
}

/** Rows of a query on a connection of its own (another process's view of the database). */
async function outside<T>(storage: StorageConfig, text: string): Promise<T[]> {
  if (storage.engine === 'sqlite') {
    const db = new BetterSqlite3(storage.path, { readonly: true });
    try {
      return db.prepare(text).all() as T[];
    } finally {
      db.close();
    }
  }
  const c = new pg.Client({ connectionString: storage.url });
  await c.connect();
  try {
    return (await c.query(text)).rows as T[];
  } finally {
    await c.end();
  }
}

/** Tables and their columns, as the engine's catalog describes them. */
async function schema(storage: StorageConfig): Promise<Record<string, string[]>> {
  const rows =
    storage.engine === 'sqlite'
      ? await outside<{ t: string; c: string }>(storage, "SELECT m.name AS t, p.name AS c FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'")
      : await outside<{ t: string; c: string }>(storage, "SELECT table_name AS t, column_name AS c FROM information_schema.columns WHERE table_schema = 'public'");
  const out: Record<string, string[]> = {};
  for (const r of rows) (out[r.t] ??= []).push(r.c);
  for (const cols of Object.values(out)) cols.sort();
  return out;
}

describe('migrations', () => {
  it('exist for both engines with the same numbers and names', () => {
    const names = (engine: Engine): string[] => readMigrations(migrationsDir(engine)).map((m) => m.name);
    expect(names('postgres')).toEqual(names('sqlite'));
    expect(names('sqlite').length).toBeGreaterThanOrEqual(4);
  });

  it('run on both engines and give the same tables with the same columns', async () => {
    const [lite, post] = await Promise.all(ENGINES.map(fresh));
    const a = await store(lite!);
    const b = await store(post!);
    expect(await a.ready()).toBe(true);
    expect(await b.ready()).toBe(true);
    const sqliteSchema = await schema(lite!);
    expect(Object.keys(sqliteSchema)).toEqual(expect.arrayContaining(['snapshots', 'events', 'outbox', 'alerts', 'change_log', 'inhibitions', 'schema_migrations']));
    expect(await schema(post!)).toEqual(sqliteSchema);
    const versions = await outside<{ version: number }>(post!, 'SELECT version FROM schema_migrations ORDER BY version');
    expect(versions.map((v) => v.version)).toEqual(readMigrations(migrationsDir('postgres')).map((m) => m.version));
  });

  it('are named to the opener as they are applied, on both engines, and not again when the database is opened again', async () => {
    const all = readMigrations(migrationsDir('sqlite')).map((m) => m.name);
    for (const engine of ENGINES) {
      const storage = await fresh(engine);
      const said: string[][] = [];
      const s = await openStore(storage, { now: () => 1_000, onMigrated: (names) => said.push(names) });
      await s.close();
      const again = await openStore(storage, { now: () => 1_000, onMigrated: (names) => said.push(names) });
      open.push(again);
      expect(said, engine).toEqual([all]);
    }
  });

  it('keep the SQLite files of 0001–0004 byte for byte (their checksums are in users\' databases)', () => {
    const sums = Object.fromEntries(readMigrations(migrationsDir('sqlite')).map((m) => [m.name, m.checksum.slice(0, 16)]));
    expect(sums).toMatchObject({
      '0001_init.sql': expect.any(String),
      '0002_silences.sql': expect.any(String),
      '0003_rule_history.sql': expect.any(String),
      '0004_delivery.sql': expect.any(String),
    });
    // The checksums of the released files, as the foundation shipped them.
    expect([sums['0001_init.sql'], sums['0002_silences.sql'], sums['0003_rule_history.sql'], sums['0004_delivery.sql']]).toEqual(RELEASED);
  });

  it('on PostgreSQL run once when several instances start at the same moment (advisory lock)', async () => {
    const storage = await fresh('postgres');
    const stores = await Promise.all(Array.from({ length: 4 }, () => store(storage)));
    for (const s of stores) expect(await s.ready()).toBe(true);
    const applied = await outside<{ n: number }>(storage, 'SELECT count(*)::int AS n FROM schema_migrations');
    expect(applied[0]!.n).toBe(readMigrations(migrationsDir('postgres')).length);
  });

  it('on PostgreSQL refuse a database whose applied migration was changed, as on SQLite', async () => {
    const storage = await fresh('postgres');
    await (await openStore(storage, { now: Date.now })).close();
    const c = new pg.Client({ connectionString: (storage as { url: string }).url });
    await c.connect();
    await c.query("UPDATE schema_migrations SET checksum = 'x' WHERE version = 2");
    await c.end();
    await expect(openStore(storage, { now: Date.now })).rejects.toThrow(
      new MigrationError(`${describeStorage(storage)}: corrupted migrations: 0002_silences.sql was changed after it was applied (checksum differs)`),
    );
  });
});

describe('opening a PostgreSQL database', () => {
  const tables = async (storage: StorageConfig): Promise<string[]> =>
    (await outside<{ t: string }>(storage, "SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public'")).map((r) => r.t);

  it('refuses a database without hostwatch\'s tables when it must exist or is only read, and creates nothing in it', async () => {
    const storage = await fresh('postgres');
    for (const opts of [{ readonly: true }, { mustExist: true }]) {
      await expect(openStore(storage, { now: Date.now, ...opts }), JSON.stringify(opts)).rejects.toThrow(
        new SchemaMissingError('it holds no hostwatch tables (no schema_migrations)'),
      );
    }
    expect(await tables(storage)).toEqual([]);
    // The daemon creates it; then the same opens work.
    await (await openStore(storage, { now: Date.now })).close();
    for (const opts of [{ readonly: true }, { mustExist: true }]) open.push(await openStore(storage, { now: Date.now, ...opts }));
  });

  it('runs with a role that may not create tables on a database that is up to date (no DDL), and names the missing grant on one that is not', async () => {
    const storage = (await fresh('postgres')) as { engine: 'postgres'; url: string };
    const role = `hw_noddl_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = new pg.Client({ connectionString: storage.url });
    await admin.connect();
    const database = new URL(storage.url).pathname.slice(1);
    try {
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'rolepass-123'`);
      await admin.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
      await admin.query(`GRANT CONNECT ON DATABASE ${database} TO ${role}`);
    } finally {
      await admin.end();
    }
    const asRole = new URL(storage.url);
    asRole.username = role;
    asRole.password = 'rolepass-123';
    const limited: StorageConfig = { engine: 'postgres', url: asRole.toString() };
    cleanups.unshift(async () => {
      const c = new pg.Client({ connectionString: storage.url });
      await c.connect();
      await c.query(`DROP OWNED BY ${role}`).catch(() => undefined);
      await c.end();
    });
    cleanups.push(async () => {
      const serverUrl = new URL(storage.url);
      serverUrl.pathname = '/postgres';
      const c = new pg.Client({ connectionString: serverUrl.toString() });
      await c.connect();
      await c.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
      await c.end();
    });
    // Empty: the migrations need the grant, and the error says which.
    await expect(openStore(limited, { now: Date.now })).rejects.toThrow(
      'creating schema_migrations failed: permission denied for schema public; the role in storage.url may not create tables: GRANT CREATE ON SCHEMA public TO that role',
    );
    // Migrated by the owner, then granted the rows only: the role opens it, and it is ready.
    await (await openStore(storage, { now: Date.now })).close();
    const grant = new pg.Client({ connectionString: storage.url });
    await grant.connect();
    await grant.query(`GRANT USAGE ON SCHEMA public TO ${role}; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}; GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
    await grant.end();
    const s = await openStore(limited, { now: Date.now, daemon: true });
    open.push(s);
    expect(await s.ready()).toBe(true);
    expect(await repos(s).events.lastSeq()).toBe(0);
  });

  it('names the database, its host and port and storage.url when the server cannot be reached, and never the password', async () => {
    const e = (await openStore({ engine: 'postgres', url: 'postgres://hw:pw-secret-9@127.0.0.1:1/hwdb' }, { now: Date.now }).catch((x: unknown) => x)) as Error;
    expect(e).toBeInstanceOf(StorageUnreachableError);
    expect(e.message).toBe('cannot connect to the PostgreSQL database hwdb on 127.0.0.1:1 (storage.url): connect ECONNREFUSED 127.0.0.1:1');
  });
});

/** The first 16 hex digits of the sha256 of each released SQLite migration. */
const RELEASED = ['c780dbf40d6caddf', '0f12f997ac349929', '1b52e5e9320fbf4d', 'dfff003a02168847'];

/** A table of the test's own, with a foreign key checked at COMMIT (to make a COMMIT fail on purpose). */
const DDL = [
  statement(() => sql`CREATE TABLE t_parent (id INTEGER PRIMARY KEY)`),
  statement(() => sql`CREATE TABLE t_child (pid INTEGER REFERENCES t_parent (id) DEFERRABLE INITIALLY DEFERRED)`),
  statement(() => sql`CREATE TABLE t_rows (name TEXT PRIMARY KEY)`),
];
const ORPHAN = statement<{ pid: number }>((_qb, p) => sql`INSERT INTO t_child (pid) VALUES (${p.pid})`);
const ROW = statement<{ name: string }>((_qb, p) => sql`INSERT INTO t_rows (name) VALUES (${p.name})`);

describe.each(ENGINES)('transactions on %s', (engine) => {
  let storage: StorageConfig;
  let s: Store;
  beforeAll(async () => {
    storage = await fresh(engine);
    s = await store(storage);
    for (const d of DDL) await s.run(d, {});
  });

  const snap = (entity: string) => ({ source: 'gc', entity, site_id: null, hash: 'h', body: '{}', version: 1, changed_at: 5 });
  const stored = async (prefix: string): Promise<string[]> =>
    (await outside<{ entity: string }>(storage, `SELECT entity FROM snapshots WHERE entity LIKE '${prefix}%' ORDER BY entity`)).map((r) => r.entity);

  it('commits units that arrive together in one transaction (group commit)', async () => {
    const before = { ...s.stats };
    const units = Array.from({ length: 20 }, (_, i) => s.transaction((tx) => repos(tx).snapshots.put(snap(`group/${String(i).padStart(2, '0')}`))));
    await Promise.all(units);
    expect(await stored('group/')).toHaveLength(20);
    expect(s.stats.units - before.units).toBe(20);
    expect(s.stats.batches - before.batches).toBe(1);
  });

  it('rolls back a failing unit alone: its caller gets its error, the others of its batch commit', async () => {
    const a = s.transaction((tx) => repos(tx).snapshots.put(snap('alone/a')));
    const b = s.transaction(async (tx) => {
      await repos(tx).snapshots.put(snap('alone/b'));
      // A real database error: an outbox row for an event that does not exist.
      await repos(tx).events.enqueue({ event_id: 'missing', channel: 'x', state: 'pending', attempts: 0, next_attempt_at: 0, last_error: null, created_at: 0, updated_at: 0 });
    });
    const c = s.transaction(async (tx) => {
      await repos(tx).snapshots.put(snap('alone/c'));
      return 'c done';
    });
    const settled = await Promise.allSettled([a, b, c]);
    expect(settled.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[2] as PromiseFulfilledResult<string>).value).toBe('c done');
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/foreign key|FOREIGN KEY/);
    expect(await stored('alone/')).toEqual(['alone/a', 'alone/c']);
  });

  it('shares reads remembered in a batch between its units, forgets those of a unit rolled back, and remembers nothing outside a batch', async () => {
    const seen: unknown[] = [];
    const a = s.transaction(async (tx) => {
      tx.memo!.set('kept', 'a');
    });
    const b = s.transaction(async (tx) => {
      tx.memo!.set('undone', 'b');
      throw new Error('b fails');
    });
    const c = s.transaction(async (tx) => {
      seen.push(tx.memo!.get('kept'), tx.memo!.get('undone'));
    });
    const settled = await Promise.allSettled([a, b, c]);
    expect(settled.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    // b's rollback to its savepoint forgot everything remembered (c reads the store again).
    expect(seen).toEqual([undefined, undefined]);
    // Units of one batch share it; a new batch starts with none.
    const shared: unknown[] = [];
    await Promise.all([s.transaction(async (tx) => void tx.memo!.set('k', 1)), s.transaction(async (tx) => void shared.push(tx.memo!.get('k')))]);
    await s.transaction(async (tx) => void shared.push(tx.memo!.get('k')));
    expect(shared).toEqual([1, undefined]);
    expect(s.memo).toBeUndefined();
    // Nor is this store new to its process (Poller's `fresh`): not opened as the daemon's, or shared.
    expect(s.soleWriter).toBe(false);
    expect(repos(s).memo).toBeNull();
  });

  it('reads the active silences once per batch, and again after a unit of the batch adds or expires one', async () => {
    const silence = (id: string) => ({ id, match: 'true', starts_at: 0, ends_at: 10_000, comment: 'c', created_by: 't', created_at: 0, expired_at: null });
    await s.transaction((tx) => repos(tx).silences.add(silence('memo-a')));
    const seen: string[][] = [];
    const look = (tx: Executor) => repos(tx).silences.active(1_000).then((rows) => void seen.push(rows.map((r) => r.id).filter((id) => id.startsWith('memo-'))));
    // One batch: a poll reads, the API adds one, a poll reads, the API expires one, a poll reads.
    const batches = s.stats.batches;
    await Promise.all([
      s.transaction(look),
      s.transaction((tx) => repos(tx).silences.add(silence('memo-b'))),
      s.transaction(look),
      s.transaction((tx) => repos(tx).silences.expire('memo-a', 1_000)),
      s.transaction(look),
    ]);
    expect(s.stats.batches - batches).toBe(1);
    expect(seen).toEqual([['memo-a'], ['memo-a', 'memo-b'], ['memo-b']]);
  });

  it('runs a batch of repeatable units again with savepoints when one fails on a database error: its caller gets the error, the others\' rows are stored once', async () => {
    const before = { ...s.stats };
    const runs: string[] = [];
    // A plain INSERT: were the first run's row kept, the second run would break its key.
    const put = (name: string) => (tx: Executor) => (runs.push(name), tx.run(ROW, { name }));
    const a = s.transaction(put('rerun/a'), { repeatable: true });
    const b = s.transaction(
      async (tx) => {
        await put('rerun/b')(tx);
        // A real database error (an outbox row for an event that does not exist); on
        // PostgreSQL it also aborts the transaction.
        await repos(tx).events.enqueue({ event_id: 'missing', channel: 'x', state: 'pending', attempts: 0, next_attempt_at: 0, last_error: null, created_at: 0, updated_at: 0 });
      },
      { repeatable: true },
    );
    const c = s.transaction(put('rerun/c'), { repeatable: true });
    const settled = await Promise.allSettled([a, b, c]);
    expect(settled.map((x) => x.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/foreign key|FOREIGN KEY/);
    expect(await outside<{ name: string }>(storage, "SELECT name FROM t_rows WHERE name LIKE 'rerun/%' ORDER BY name")).toEqual([{ name: 'rerun/a' }, { name: 'rerun/c' }]);
    expect(runs).toEqual(['rerun/a', 'rerun/b', 'rerun/a', 'rerun/b', 'rerun/c']);
    expect(s.stats.rerunBatches - before.rerunBatches).toBe(1);
    expect(s.stats.batches - before.batches).toBe(1);
  });

  it('fails every unit of a batch whose COMMIT fails, and keeps none of their writes', async () => {
    const ok = s.transaction((tx) => repos(tx).snapshots.put(snap('commitfail/ok')));
    const orphan = s.transaction((tx) => tx.run(ORPHAN, { pid: 42 }));
    const settled = await Promise.allSettled([ok, orphan]);
    expect(settled.map((x) => x.status)).toEqual(['rejected', 'rejected']);
    expect(await stored('commitfail/')).toEqual([]);
    // The store goes on working after it.
    await s.transaction((tx) => repos(tx).snapshots.put(snap('commitfail/after')));
    expect(await stored('commitfail/')).toEqual(['commitfail/after']);
  });

  it('resolves a unit only once its writes are committed (another connection sees them)', async () => {
    const seen = await s
      .transaction((tx) => repos(tx).snapshots.put(snap('visible/1')))
      .then(() => stored('visible/'));
    expect(seen).toEqual(['visible/1']);
  });

  it('keeps the order of event inserts as the order of seq, the feed cursor', async () => {
    const events = [siteEvent('order-1', 1), siteEvent('order-2', 1), siteEvent('order-3', 1)];
    await Promise.all(events.map((e) => s.transaction((tx) => repos(tx).events.addEvent(toEventRow(e)))));
    const got = await repos(s).events.list(0, { type: null, siteId: null, since: null }, 100);
    expect(got.map((g) => JSON.parse(g.body).id).filter((id: string) => events.some((e) => e.id === id))).toEqual(events.map((e) => e.id));
  });
});

describe('the commit queue gathers units into batches', () => {
  /** A BatchTx that records what the queue does with it. */
  function fakeTx(log: string[]): BatchTx {
    const no = (): Promise<never> => Promise.reject(new Error('no statements here'));
    return {
      dialect: 'sqlite',
      all: no,
      get: no,
      run: no,
      orderEvents: () => Promise.resolve(),
      savepoint: async () => void log.push('savepoint'),
      release: async () => void log.push('release'),
      rollbackTo: async () => void log.push('rollbackTo'),
      commit: async () => (log.push('commit'), { durable: Promise.resolve() }),
      rollback: async () => void log.push('rollback'),
    };
  }
  const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

  /**
   * A queue whose patient units may wait a minute (urgent ones `ms`), past its first unit
   * (which came after a quiet spell and committed at once); `log` then holds what follows.
   */
  async function patientQueue(log: string[], ms: number): Promise<CommitQueue> {
    const q = new CommitQueue(async () => (log.push('begin'), fakeTx(log)), { ms, units: 100, patientMs: 60_000, patientUnits: 100 });
    await q.submit(async () => 'first', { patient: true });
    log.length = 0;
    return q;
  }

  it('lets units that arrive a few ms apart wait for each other (up to the gather time), then commits them in one transaction', async () => {
    const log: string[] = [];
    const q = new CommitQueue(async () => (log.push('begin'), fakeTx(log)), { ms: 60_000, units: 3 });
    // The first unit ever comes after a quiet spell: it commits alone, at once. The others
    // arrive during the "burst" (within the gather time of the one before them).
    await q.submit(async () => 'first');
    log.length = 0;
    const a = q.submit(async () => 'a');
    await new Promise((r) => setTimeout(r, 20));
    const b = q.submit(async () => 'b');
    await turn();
    await turn();
    // Fewer than 3 queued and the oldest has waited less than a minute: nothing begun yet.
    expect(log).toEqual([]);
    const c = q.submit(async () => 'c');
    expect(await Promise.all([a, b, c])).toEqual(['a', 'b', 'c']);
    expect(log.filter((l) => l === 'begin' || l === 'commit')).toEqual(['begin', 'commit']);
    expect(q.stats).toMatchObject({ batches: 2, units: 4 });
  });

  it('commits a unit that arrives during a burst once the oldest has waited the gather time, not later', async () => {
    const log: string[] = [];
    const q = new CommitQueue(async () => (log.push('begin'), fakeTx(log)), { ms: 30, units: 8 });
    await q.submit(async () => undefined);
    const t0 = performance.now();
    await q.submit(async () => undefined);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    expect(log).toEqual(['begin', 'commit', 'begin', 'commit']);
  });

  it('lets patient units (poll results) wait the longer gather time, and an urgent unit that joins them cuts the wait short', async () => {
    const log: string[] = [];
    const q = await patientQueue(log, 5);
    // Another poll's reply is on its way: the patient unit may wait for it.
    const other = q.expect();
    const a = q.submit(async () => 'a', { patient: true });
    await new Promise((r) => setTimeout(r, 30));
    // A patient unit alone waits for others (up to a minute here): nothing begun.
    expect(log).toEqual([]);
    // A delivery's record (urgent) joins it: the batch starts within the short wait.
    const b = q.submit(async () => 'b');
    expect(await Promise.all([a, b])).toEqual(['a', 'b']);
    expect(log.filter((l) => l === 'begin' || l === 'commit')).toEqual(['begin', 'commit']);
    other();
  });

  it('lets patient units wait while another poll is expected to write, and commits them at the next turn once the last one is in', async () => {
    const log: string[] = [];
    const q = await patientQueue(log, 5);
    // Two polls wait for their replies; one of them and a third (whose reply is in) finish.
    const first = q.expect();
    const second = q.expect();
    first();
    const a = q.submit(async () => 'a', { patient: true });
    const b = q.submit(async () => 'b', { patient: true });
    await new Promise((r) => setTimeout(r, 30));
    // The second poll may still bring a result to share the commit with: nothing begun.
    expect(log).toEqual([]);
    // Its reply came and it writes nothing (unchanged): no one is left to wait for.
    second();
    second(); // letting go twice counts once
    await turn();
    await turn();
    expect(log[0]).toBe('begin');
    expect(await Promise.all([a, b])).toEqual(['a', 'b']);
    expect(log.filter((l) => l === 'begin' || l === 'commit')).toEqual(['begin', 'commit']);
  });

  it('commits patient units at the next turn when no other poll is expected to write, instead of waiting the gather time for none', async () => {
    const log: string[] = [];
    const q = await patientQueue(log, 60_000);
    // A burst: these come within the gather time of the one before, so "after a quiet spell"
    // does not apply; but no poll is fetching, so none will join them.
    const units = [q.submit(async () => 'a', { patient: true }), q.submit(async () => 'b', { patient: true })];
    await turn();
    await turn();
    expect(log[0]).toBe('begin');
    expect(await Promise.all(units)).toEqual(['a', 'b']);
    // An urgent unit keeps its own short wait, expected writers or not (here a minute): the
    // outbox worker's records are not poll results.
    log.length = 0;
    const urgent = q.submit(async () => 'urgent');
    const urgent2 = q.submit(async () => 'urgent2');
    await new Promise((r) => setTimeout(r, 30));
    expect(log).toEqual([]);
    const more = Array.from({ length: 98 }, (_, i) => q.submit(async () => i));
    await Promise.all([urgent, urgent2, ...more]);
    expect(log.filter((l) => l === 'begin')).toEqual(['begin']);
  });

  /** Units queued in one turn (a batch, with `units: 3`), each logging when it runs. */
  function batchOf(log: string[], units: Array<{ name: string; repeatable: boolean; fails?: (run: number) => boolean }>): { q: CommitQueue; settled: Promise<PromiseSettledResult<string>[]> } {
    const q = new CommitQueue(async () => (log.push('begin'), fakeTx(log)), { ms: 60_000, units: units.length });
    const runs = new Map<string, number>();
    const settled = Promise.allSettled(
      units.map((u) =>
        q.submit(
          async () => {
            const run = (runs.get(u.name) ?? 0) + 1;
            runs.set(u.name, run);
            log.push(`run ${u.name}`);
            if (u.fails?.(run)) throw new Error(`${u.name} failed`);
            return u.name;
          },
          { repeatable: u.repeatable },
        ),
      ),
    );
    return { q, settled };
  }

  it('runs a batch of repeatable units (poll results) without a savepoint per unit, and a batch with any other unit with one each', async () => {
    const plain: string[] = [];
    const a = batchOf(plain, [{ name: 'a', repeatable: true }, { name: 'b', repeatable: true }, { name: 'c', repeatable: true }]);
    expect((await a.settled).map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect(plain).toEqual(['begin', 'run a', 'run b', 'run c', 'commit']);
    const mixed: string[] = [];
    const b = batchOf(mixed, [{ name: 'a', repeatable: true }, { name: 'b', repeatable: false }]);
    expect((await b.settled).map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(mixed).toEqual(['begin', 'savepoint', 'run a', 'release', 'savepoint', 'run b', 'release', 'commit']);
    expect(a.q.stats).toMatchObject({ batches: 1, units: 3, rerunBatches: 0 });
  });

  it('rolls back a batch of repeatable units when one fails, and runs it again with a savepoint per unit: the failing unit\'s caller gets its error, the others commit once', async () => {
    const log: string[] = [];
    const { q, settled } = batchOf(log, [
      { name: 'a', repeatable: true },
      { name: 'b', repeatable: true, fails: () => true },
      { name: 'c', repeatable: true },
    ]);
    const out = await settled;
    expect(out.map((x) => (x.status === 'fulfilled' ? x.value : String(x.reason)))).toEqual(['a', 'Error: b failed', 'c']);
    expect(log).toEqual([
      // The first run stops at the failure, and none of it is kept.
      'begin', 'run a', 'run b', 'rollback',
      'begin', 'savepoint', 'run a', 'release', 'savepoint', 'run b', 'rollbackTo', 'savepoint', 'run c', 'release', 'commit',
    ]);
    expect(q.stats).toMatchObject({ batches: 1, units: 3, failedUnits: 1, rerunBatches: 1 });
  });

  it('commits every unit of the second run when the failure does not come back (a unit that failed once is not failed for it)', async () => {
    const log: string[] = [];
    const { settled } = batchOf(log, [
      { name: 'a', repeatable: true, fails: (run) => run === 1 },
      { name: 'b', repeatable: true },
    ]);
    expect((await settled).map((x) => x.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(log.filter((l) => l.startsWith('run'))).toEqual(['run a', 'run a', 'run b']);
  });

  it('runs a failing repeatable unit that is alone in its batch once, and fails it', async () => {
    const log: string[] = [];
    const { settled } = batchOf(log, [{ name: 'a', repeatable: true, fails: () => true }]);
    expect((await settled).map((x) => x.status)).toEqual(['rejected']);
    expect(log).toEqual(['begin', 'run a', 'rollback']);
  });

  it('runs what a unit asks to run after its commit once the commit is durable, before the unit\'s caller hears of it: once, from the run that committed, and never for a unit rolled back', async () => {
    const log: string[] = [];
    let durable!: () => void;
    const q = new CommitQueue(
      async () => {
        log.push('begin');
        return { ...fakeTx(log), commit: async () => (log.push('commit'), { durable: new Promise<void>((r) => (durable = r)) }) };
      },
      { ms: 60_000, units: 3 },
    );
    const unit = (name: string, fails: boolean) =>
      q
        .submit(
          async (tx) => {
            tx.afterCommit!(() => log.push(`after ${name}`));
            if (fails) throw new Error(`${name} failed`);
            return name;
          },
          { repeatable: true },
        )
        .then((v) => void log.push(`caller ${v}`), () => void log.push(`caller of ${name}: failed`));
    const all = Promise.all([unit('a', false), unit('b', true), unit('c', false)]);
    while (!log.includes('commit')) await turn();
    await turn();
    // Committed (run again with savepoints after b failed), not yet durable: nothing has run.
    expect(log.filter((l) => l.startsWith('after') || l.startsWith('caller'))).toEqual([]);
    durable();
    await all;
    expect(log.filter((l) => l.startsWith('after') || l.startsWith('caller'))).toEqual(['after a', 'after c', 'caller a', 'caller of b: failed', 'caller c']);
    expect(q.stats).toMatchObject({ rerunBatches: 1, failedUnits: 1 });
  });

  it('runs nothing a unit asked for when its whole batch fails to commit', async () => {
    const log: string[] = [];
    const q = new CommitQueue(async () => ({ ...fakeTx(log), commit: async () => Promise.reject(new Error('disk full')) }), { ms: 60_000, units: 2 });
    const unit = (name: string) =>
      q.submit(async (tx) => (tx.afterCommit!(() => log.push(`after ${name}`)), name)).catch((e: unknown) => void log.push(`${name}: ${String(e)}`));
    await Promise.all([unit('a'), unit('b')]);
    expect(log.filter((l) => !['savepoint', 'release', 'rollback'].includes(l))).toEqual(['a: Error: disk full', 'b: Error: disk full']);
  });

  it('commits a unit that comes after a quiet spell at the next turn, without waiting the gather time', async () => {
    const log: string[] = [];
    const q = new CommitQueue(async () => (log.push('begin'), fakeTx(log)), { ms: 40, units: 8 });
    await q.submit(async () => undefined);
    await new Promise((r) => setTimeout(r, 80));
    log.length = 0;
    const lone = q.submit(async () => 'lone');
    await turn();
    await turn();
    // Begun already: a wait for others would have held it for 40 ms.
    expect(log[0]).toBe('begin');
    expect(await lone).toBe('lone');
  });
});

describe('SQLite: one connection, one open transaction', () => {
  let release: () => void = () => {};
  afterEach(() => release());

  it('makes a statement outside the transaction wait for its commit, so it never reads uncommitted rows', async () => {
    const storage = await fresh('sqlite');
    const s = await store(storage);
    const gate = new Promise<void>((r) => (release = r));
    let inside!: () => void;
    const entered = new Promise<void>((r) => (inside = r));
    const e = siteEvent('gate', 1);
    // A slow unit: it stands for a transaction whose body is still running.
    const unit = s.transaction(async (tx) => {
      await repos(tx).events.addEvent(toEventRow(e));
      inside();
      await gate;
    });
    await entered;
    expect(s.transactionOpen).toBe(true);
    let read: number | null = null;
    const reading = repos(s).events.lastSeq().then((n) => (read = n));
    await new Promise((r) => setTimeout(r, 50));
    expect(read).toBeNull(); // waiting: the uncommitted event is not visible to it
    release();
    await unit;
    await reading;
    expect(read).toBe(1);
    expect(s.transactionOpen).toBe(false);
  });
});

describe('SQLite: each commit is made durable off the main thread before its units settle', () => {
  it('settles a unit only after the log file is fsynced, holds the next batch and outside reads until then, and fails the units if the sync fails', async () => {
    const storage = await fresh('sqlite');
    const path = (storage as { path: string }).path;
    const calls: Array<{ fd: number; done: (err: NodeJS.ErrnoException | null) => void }> = [];
    const s = await openStore(storage, { now: () => 1, fsync: (fd, done) => void calls.push({ fd, done }) });
    open.push(s);
    const snap = (entity: string) => ({ source: 'sync', entity, site_id: null, hash: 'h', body: '{}', version: 1, changed_at: 5 });
    let firstDone = false;
    const first = s.transaction((tx) => repos(tx).snapshots.put(snap('a'))).then(() => (firstDone = true));
    await new Promise((r) => setTimeout(r, 20));
    // Committed and written to the log, but not yet on disk: not settled, nothing announced.
    expect(calls).toHaveLength(1);
    expect(fstatSync(calls[0]!.fd).ino).toBe(statSync(`${path}-wal`).ino);
    expect(firstDone).toBe(false);
    // A unit that arrives meanwhile waits for the next batch; an outside read waits too.
    const second = s.transaction((tx) => repos(tx).snapshots.put(snap('b')));
    let read: unknown = 'waiting';
    const reading = repos(s).snapshots.head('sync', 'a').then((h) => (read = h));
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toHaveLength(1);
    expect(read).toBe('waiting');
    calls[0]!.done(null);
    await first;
    await reading;
    expect(read).toEqual({ hash: 'h', version: 1 });
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toHaveLength(2); // the second batch committed and is being synced
    calls[1]!.done(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }));
    await expect(second).rejects.toThrow('EIO');
  });

  it('syncs nothing for a batch that only read (clock rules that changed nothing), and settles it at once', async () => {
    const storage = await fresh('sqlite');
    const calls: Array<(err: NodeJS.ErrnoException | null) => void> = [];
    const s = await openStore(storage, { now: () => 1, fsync: (_fd, done) => void calls.push(done) });
    open.push(s);
    expect(await s.transaction((tx) => repos(tx).snapshots.head('sync', 'a'))).toBeUndefined();
    expect(calls).toHaveLength(0);
    // A write in the same batch as reads is synced as before.
    const wrote = s.transaction((tx) => repos(tx).snapshots.put({ source: 'sync', entity: 'a', site_id: null, hash: 'h', body: '{}', version: 1, changed_at: 5 }));
    const read = s.transaction((tx) => repos(tx).snapshots.head('sync', 'b'));
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toHaveLength(1);
    calls[0]!(null);
    await wrote;
    expect(await read).toBeUndefined();
  });
});

describe('PostgreSQL: event inserts commit in seq order', () => {
  it('never lets a feed reader skip an event that a slower transaction commits later', async () => {
    const storage = await fresh('postgres');
    // Two stores: two pools, as two processes would have.
    const a = await store(storage);
    const b = await store(storage);
    const reader = repos(await store(storage)).events;
    const seen: string[] = [];
    let cursor = 0;
    let reading = true;
    const poll = (async () => {
      while (reading) {
        for (const row of await reader.list(cursor, { type: null, siteId: null, since: null }, 100)) {
          seen.push(JSON.parse(row.body).id);
          cursor = row.seq;
        }
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const first = siteEvent('slow-first', 1);
    const second = siteEvent('fast-second', 1);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let inserted!: () => void;
    const firstInserted = new Promise<void>((r) => (inserted = r));
    // The first transaction takes a seq and stays open; the second takes the next seq and
    // would commit first, if nothing ordered them.
    const slow = a.transaction(async (tx) => {
      await repos(tx).events.addEvent(toEventRow(first));
      inserted();
      await gate;
    });
    await firstInserted;
    let fastDone = false;
    const fast = b.transaction((tx) => repos(tx).events.addEvent(toEventRow(second))).then(() => (fastDone = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(fastDone).toBe(false); // it waits for the first to commit
    expect(seen).toEqual([]);
    release();
    await slow;
    await fast;
    await new Promise((r) => setTimeout(r, 50));
    reading = false;
    await poll;
    expect(seen).toEqual([first.id, second.id]);
  });
});
