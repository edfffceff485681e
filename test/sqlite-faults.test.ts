/**
 * Faults of the SQLite file itself, made for real: a lock held by another connection
 * (`BEGIN EXCLUSIVE` in a second connection, as a CLI command, a backup or an `sqlite3`
 * shell would), a full disk (`PRAGMA max_page_count`: SQLite's own "database or disk is
 * full"), and a damaged file (garbage written over a page).
 */
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, StorageError } from '../src/store/db.js';
import { WRITES_CLEAR_MS } from '../src/store/queued-store.js';
import { repos } from '../src/store/repos.js';
import { BUSY_WAIT_MS, JOURNAL_SIZE_LIMIT } from '../src/store/sqlite.js';
import { testClock } from './clock.js';
import { names, sqliteOf, startWorld, tempDir, TEST_KEY, type World } from './harness.js';
import { hostwatch } from './run-cli.js';
import { damagePages } from './sqlite-damage.js';
import { closeHookedWorlds, hookedWorld } from './hooked-world.js';
import { waitFor, type Answer, type Receiver } from './receiver.js';

let world: World | undefined;
let hook: Receiver | undefined;
let other: BetterSqlite3.Database | undefined;
afterEach(async () => {
  if (other?.open) {
    if (other.inTransaction) other.exec('ROLLBACK');
    other.close();
  }
  await world?.close();
  await closeHookedWorlds();
  world = hook = other = undefined;
});

const SITES = 3;

/** A world whose daemon serves HTTP and delivers to a webhook (answering 204 after `delayMs`, unless `answer` says otherwise). */
async function daemonWorld(delayMs = 0, o: { answer?: () => Answer; retry?: string[] } = {}): Promise<World> {
  const h = await hookedWorld({
    sites: SITES,
    answer: o.answer ?? (() => ({ status: 204, delayMs })),
    config: { server: { listen: '127.0.0.1:0' }, delivery: { retry_schedule: o.retry ?? ['1s', '1s', '1s', '1s', '1s'] } },
  });
  hook = h.hook;
  return h.w;
}

/** Hold the database's write lock from a second connection, as another program would. */
function lockFromElsewhere(w: World): BetterSqlite3.Database {
  other = new BetterSqlite3(w.dbPath);
  other.exec('BEGIN EXCLUSIVE');
  return other;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('a database locked by another connection', () => {
  it('is waited for without freezing the process: /livez answers at once, and the commits go through once the lock is released', async () => {
    const w = await daemonWorld();
    const app = await w.app();
    await app.start();
    await app.runOnce();
    for (let id = 1; id <= SITES; id++) w.sim.world.setHealth(id, { status: 'offline' });
    const lock = lockFromElsewhere(w);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    // A cycle that must commit while the lock is held.
    const cycle = app.runOnce();
    const answers: number[] = [];
    for (let i = 0; i < 12; i++) {
      const t = performance.now();
      expect((await fetch(`${app.serverUrl}/livez`)).status).toBe(200);
      answers.push(performance.now() - t);
      await sleep(250);
    }
    lock.exec('COMMIT');
    await cycle;
    loop.disable();
    // Frozen, the event loop stood still for the whole busy wait (seconds).
    expect(loop.max / 1e6).toBeLessThan(1_000);
    expect(Math.max(...answers)).toBeLessThan(1_000);
    expect(names(w.events).filter((n) => n === 'site.offline:firing')).toHaveLength(SITES);
    await waitFor(() => hook!.acceptedIds().size === SITES, 'the alerts delivered', 10_000);
  });

  it('held longer than the busy wait: the attempts sent meanwhile are recorded once it is released, never sent twice', async () => {
    const w = await daemonWorld(500);
    const app = await w.app();
    await app.start();
    await app.runOnce();
    for (let id = 1; id <= SITES; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await waitFor(() => names(w.events).filter((n) => n === 'site.offline:firing').length === SITES, 'the alerts committed', 15_000);
    // The sends are on their way (the receiver takes 500 ms); their records meet the lock.
    await waitFor(() => hook!.requests.length >= 1, 'the first send', 5_000);
    const lock = lockFromElsewhere(w);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    await sleep(BUSY_WAIT_MS + 2_000);
    // The records share the commit queue with the polls still committing (the catch-up of
    // lower-priority sources goes on after health's alerts): a batch ahead of theirs waits
    // out its own busy wait first, so theirs may fail one busy wait later.
    await waitFor(() => app.worker.unrecordedRows > 0, 'the attempts sent meanwhile held, unrecorded', 2 * BUSY_WAIT_MS);
    loop.disable();
    lock.exec('COMMIT');
    await waitFor(() => app.worker.unrecordedRows === 0 && hook!.acceptedIds().size === SITES, 'every attempt recorded and every alert delivered', 20_000);
    await sleep(1_500);
    // Each alert reached the receiver once: nothing was sent again because its record waited.
    expect(hook!.requests.map((r) => r.id).sort()).toEqual([...hook!.acceptedIds()].sort());
    expect(loop.max / 1e6).toBeLessThan(1_000);
  });
});

describe('a full disk', () => {
  it('gives the log file back, makes /readyz fail with the reason, raises storage.failing, and recovers once there is room', async () => {
    let accept = false;
    const w = await daemonWorld(0, { answer: () => (accept ? { status: 204 } : { status: 503 }), retry: Array.from({ length: 100 }, () => '100ms') });
    const app = await w.app({}, { storageAlertAfterMs: 500 });
    await app.start();
    await app.runOnce();
    const db = sqliteOf(app.store);
    expect(db.pragma('journal_size_limit', { simple: true })).toBe(JOURNAL_SIZE_LIMIT);
    // Another program writes a megabyte and a half: the log file grows (no checkpoint yet).
    other = new BetterSqlite3(w.dbPath);
    other.exec('CREATE TABLE filler (b BLOB)');
    const fill = other.prepare('INSERT INTO filler (b) VALUES (zeroblob(1024))');
    other.transaction(() => {
      for (let i = 0; i < 1_500; i++) fill.run();
    })();
    other.close();
    const wal = `${w.dbPath}-wal`;
    const grown = statSync(wal).size;
    expect(grown).toBeGreaterThan(1_000_000);

    // The disk is full: the database may not grow by one more page.
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    for (let id = 1; id <= SITES; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await waitFor(() => app.store.problem() !== null, 'a write refused for want of room', 20_000);
    expect(app.store.problem()).toMatch(/full \(SQLITE_FULL\): database or disk is full/);
    const ready = await fetch(`${app.serverUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'not ready', database: false, database_problem: expect.stringContaining('SQLITE_FULL') });
    // The log's space is given back (checkpointed and truncated) for the next small write.
    await waitFor(() => statSync(wal).size < grown / 4, 'the log file truncated', 10_000);
    await waitFor(() => w.logs.text.includes('storage failing'), 'the failure logged', 5_000);

    // Room again: writes go through, /readyz is ready, and the outage is on record and delivered.
    db.pragma('max_page_count = 1073741823');
    accept = true;
    await waitFor(() => app.store.problem() === null, 'writes going through again', 20_000);
    await waitFor(() => names(w.events).includes('storage.failing:resolved'), 'storage.failing resolved', 20_000);
    expect(names(w.events).filter((n) => n.startsWith('storage.'))).toEqual(['storage.failing:firing', 'storage.failing:resolved']);
    const firing = w.events.find((e) => e.data.name === 'storage.failing')!;
    expect(firing).toMatchObject({ type: 'hostwatch.storage.failing', subject: 'storage', data: { severity: 'critical', status: 'firing', site_id: null } });
    expect(firing.data.summary).toMatch(/hostwatch cannot use its database since .*: the SQLite database .* full \(SQLITE_FULL\)/);
    await waitFor(() => w.events.filter((e) => e.data.name === 'storage.failing').every((e) => hook!.acceptedIds().has(e.id)), 'storage.failing delivered', 20_000);
    expect((await fetch(`${app.serverUrl}/readyz`)).status).toBe(200);
  });
});

describe('a store whose writes fail', () => {
  it('counts as failing until writes have gone through for 10 s: a nearly full disk that takes a small write is not well again', async () => {
    const tmp = tempDir();
    const clock = testClock();
    const store = await openStore({ engine: 'sqlite', path: join(tmp.dir, 'h.db') }, { now: clock.now });
    try {
      const silence = (id: string, comment: string) => ({ id, match: 'true', starts_at: 0, ends_at: 1, comment, created_by: 't', created_at: 0, expired_at: null });
      await store.transaction((tx) => repos(tx).silences.add(silence('a', 'small')));
      const db = sqliteOf(store);
      db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
      // A large write needs pages the disk does not have.
      await expect(store.transaction((tx) => repos(tx).silences.add(silence('b', 'x'.repeat(100_000))))).rejects.toMatchObject({ code: 'SQLITE_FULL' });
      expect(store.problem()).toMatch(/: full \(SQLITE_FULL\): database or disk is full$/);
      expect(await store.ready()).toBe(false);
      // A small one fits in a page it has: not enough to call the store well.
      await store.transaction((tx) => repos(tx).silences.expire('a', 5));
      expect(store.problem()).not.toBeNull();
      clock.advance(WRITES_CLEAR_MS);
      await store.transaction((tx) => repos(tx).silences.expire('a', 6));
      expect(store.problem()).toBeNull();
      expect(await store.ready()).toBe(true);
      // A statement that is merely wrong is the caller's business, not the store's.
      await expect(store.transaction((tx) => repos(tx).silences.add(silence('a', 'again')))).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
      expect(store.problem()).toBeNull();
    } finally {
      await store.close();
      tmp.cleanup();
    }
  });
});

describe('a damaged database file', () => {
  it('is found at start (quick_check): the daemon refuses to run on it, names the file and what to do, and writes nothing', async () => {
    world = await startWorld({ sim: { sites: SITES } });
    const w = world;
    const app = await w.app();
    await app.runOnce();
    await app.stop();
    damagePages(w.dbPath, ['snapshots']);
    const before = statSync(w.dbPath).mtimeMs;
    const refused = await w.app().then(
      () => null,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(StorageError);
    const message = (refused as Error).message;
    expect(message.startsWith(`the SQLite database ${w.dbPath} is damaged (quick_check: `), message).toBe(true);
    expect(message).toContain('); hostwatch does not run on it. Restore it from a backup');
    expect((refused as Error).message).toContain('.recover');
    expect(statSync(w.dbPath).mtimeMs).toBe(before);
    // The command line says the same and exits 1.
    const config = join(w.dir, 'config.yaml');
    writeFileSync(config, w.yaml());
    const run = await hostwatch(['poll', '--once', '-c', config], { env: { SIM_URL: w.sim.url, DB: w.dbPath, API_KEY: TEST_KEY } });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^hostwatch: cannot start: the SQLite database .* is damaged \(quick_check: /);
  });

  it('found by a query while the daemon runs: /readyz answers 503 with the reason, /livez still answers, and the failure is logged', async () => {
    const w = await daemonWorld();
    const app = await w.app({}, { storageAlertAfterMs: 500 });
    await app.start();
    await app.runOnce();
    expect((await fetch(`${app.serverUrl}/readyz`)).status).toBe(200);
    // Everything into the main file, then a bad page in it, then another program's write,
    // which makes the daemon's connection read its pages from the file again.
    sqliteOf(app.store).pragma('wal_checkpoint(TRUNCATE)');
    damagePages(w.dbPath, ['poll_state', 'events']);
    other = new BetterSqlite3(w.dbPath);
    other.exec('CREATE TABLE touched (x)');
    other.close();
    // The API says what is wrong (503, not a bare 500 internal error).
    const sources = await fetch(`${app.serverUrl}/api/sources`);
    expect(sources.status).toBe(503);
    expect(await sources.json()).toMatchObject({ error: { code: 'storage_unavailable', message: 'the database is damaged (GET /readyz says more)' } });
    const ready = await fetch(`${app.serverUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ database: false, database_problem: expect.stringMatching(/damaged \(SQLITE_CORRUPT\): database disk image is malformed/) });
    expect((await fetch(`${app.serverUrl}/livez`)).status).toBe(200);
    await waitFor(() => w.logs.text.includes('storage failing'), 'the failure logged', 5_000);
  });
});
