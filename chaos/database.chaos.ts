/**
 * The database itself fails under a running daemon: the disk fills up (SQLite's own
 * SQLITE_FULL through max_page_count), another program holds the lock for longer than the
 * busy wait, and pages of the file are damaged. The daemon runs in this process (these
 * faults need its own connection), with a real simulator and a signature-checking receiver.
 * Nothing may be lost, invented or sent in a storm; the process must keep answering.
 */
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import type { App } from '../src/main.js';
import { BUSY_WAIT_MS } from '../src/store/sqlite.js';
import { names, sqliteOf, TEST_KEY, type World } from '../test/harness.js';
import { closeHookedWorlds, hookedWorld } from '../test/hooked-world.js';
import { waitFor, type Answer, type Receiver } from '../test/receiver.js';
import { hostwatch } from '../test/run-cli.js';
import { damagePages } from '../test/sqlite-damage.js';
import { expectedFrom } from '../test/truth.js';
import { record, secondsSince } from './figures.js';
import { allArrived, tally } from './world.js';

let hook: Receiver | undefined;
afterEach(closeHookedWorlds);

const SITES = 12;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** An in-process daemon with its HTTP server, delivering to a receiver; after its baseline. */
async function running(answer?: () => Answer, retry = ['500ms', '1s', '2s', ...Array.from({ length: 30 }, () => '3s')]): Promise<{ w: World; app: App; mark: number }> {
  const h = await hookedWorld({
    sites: SITES,
    seed: 7,
    ...(answer ? { answer } : {}),
    config: { server: { listen: '127.0.0.1:0' }, delivery: { retry_schedule: retry }, sources: { usage: { every: '10s' }, backups: { every: '10s' } } },
  });
  hook = h.hook;
  const app = await h.w.app({}, { storageAlertAfterMs: 5_000 });
  await app.runOnce();
  await app.start();
  return { w: h.w, app, mark: h.w.sim.world.history.length };
}

/** /livez answer times (ms) and the event loop's longest stall (ms) while `during` runs. */
async function responsiveness<T>(app: App, during: Promise<T>): Promise<{ result: T; livezMaxMs: number; loopMaxMs: number }> {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  let done = false;
  let livezMaxMs = 0;
  const probe = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${app.serverUrl}/livez`);
      livezMaxMs = Math.max(livezMaxMs, performance.now() - t);
      await sleep(200);
    }
  })();
  const result = await during;
  done = true;
  await probe;
  loop.disable();
  return { result, livezMaxMs: Math.round(livezMaxMs), loopMaxMs: Math.round(loop.max / 1e6) };
}

/** Requests per event id from request `from` on: the most any one id got. */
function mostPerId(h: Receiver, from: number): number {
  const per = new Map<string, number>();
  for (const r of h.requests.slice(from)) per.set(r.id, (per.get(r.id) ?? 0) + 1);
  return Math.max(0, ...per.values());
}

it('a full disk: no storm of sends, the log given back, /readyz failing meanwhile, storage.failing on record, nothing lost once there is room', async () => {
  let refuse = true;
  const { w, app, mark } = await running(() => (refuse ? { status: 503 } : { status: 204 }), Array.from({ length: 300 }, () => '200ms'));
  const db = sqliteOf(app.store);
  const wal = `${w.dbPath}-wal`;
  // Every site goes offline; the receiver refuses the alerts (each attempt is a row).
  for (let i = 1; i <= SITES; i++) w.sim.world.setHealth(i, { status: 'offline' });
  await waitFor(() => names(w.events).filter((n) => n === 'site.offline:firing').length === SITES && hook!.requests.length >= SITES, 'the alerts stored and refused once', 30_000, 100);
  // Then the disk has no room for one more page: the refused attempts' rows fill what is
  // left of the pages the file has.
  db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
  const filling = Date.now();
  await waitFor(() => app.store.problem() !== null, 'the pages full', 30_000, 50).catch(() => undefined);
  const fullAt = Date.now();
  const filledS = secondsSince(filling);
  expect(app.store.problem(), 'the pages filled up').toMatch(/SQLITE_FULL/);
  // From now on the receiver takes every send: a send whose record fails must not be repeated.
  refuse = false;
  const from = hook!.requests.length;
  let readyzWhileFull = 0;
  let walMax = 0;
  while (Date.now() - fullAt < 20_000) {
    await sleep(1_000);
    walMax = Math.max(walMax, statSync(wal).size);
    if (app.store.problem() !== null) readyzWhileFull = (await fetch(`${app.serverUrl}/readyz`)).status;
  }
  const sentWhileFull = hook!.requests.length - from;
  const most = mostPerId(hook!, from);
  const fullS = secondsSince(fullAt);
  db.pragma('max_page_count = 1073741823');
  const truth = expectedFrom(w.sim.world.history.slice(mark));
  const healed = Date.now();
  let caughtUp = true;
  await waitFor(() => allArrived({ hook: hook!, dbPath: w.dbPath }, truth), 'every alert after the disk has room', 90_000, 250).catch(() => (caughtUp = false));
  const caughtUpS = secondsSince(healed);
  await waitFor(() => names(w.events).includes('storage.failing:resolved'), 'storage.failing resolved', 30_000, 100).catch(() => undefined);
  const t = tally({ hook: hook!, dbPath: w.dbPath }, truth);
  record('full disk (in-process daemon, SQLITE_FULL via max_page_count)', {
    'seconds until the pages were full': filledS,
    'seconds full': fullS,
    'alerts expected': t.expected,
    'requests while full (the receiver accepting)': sentWhileFull,
    'most requests for one event while full': most,
    'largest -wal file while full (bytes)': walMax,
    '/readyz while full (HTTP status)': readyzWhileFull,
    'storage.failing': names(w.events).filter((n) => n.startsWith('storage.')).join(', ') || 'none',
    'catch-up once there was room (s)': caughtUpS,
    delivered: t.delivered,
    lost: t.lost,
    invented: t.invented,
    'redeliveries (same id)': t.duplicates,
  });
  expect(most).toBeLessThanOrEqual(1);
  expect(readyzWhileFull).toBe(503);
  expect(caughtUp).toBe(true);
  expect({ lost: t.lostList, invented: t.inventedList }).toEqual({ lost: [], invented: [] });
  expect(names(w.events).filter((n) => n.startsWith('storage.'))).toEqual(['storage.failing:firing', 'storage.failing:resolved']);
});

it('a lock held elsewhere, three times for longer than the busy wait: the process keeps answering, no send is repeated, nothing is lost', async () => {
  const { w, app, mark } = await running();
  const from = hook!.requests.length;
  const locks = 3;
  const holdMs = BUSY_WAIT_MS + 3_000;
  const { livezMaxMs, loopMaxMs } = await responsiveness(
    app,
    (async () => {
      for (let i = 0; i < locks; i++) {
        for (let s = i * 4 + 1; s <= Math.min(SITES, i * 4 + 4); s++) w.sim.world.setHealth(s, { status: 'offline' });
        await sleep(1_500);
        const other = new BetterSqlite3(w.dbPath);
        other.exec('BEGIN EXCLUSIVE');
        await sleep(holdMs);
        other.exec('COMMIT');
        other.close();
        await sleep(1_000);
      }
    })(),
  );
  const truth = expectedFrom(w.sim.world.history.slice(mark));
  let caughtUp = true;
  await waitFor(() => allArrived({ hook: hook!, dbPath: w.dbPath }, truth), 'every alert after the locks', 90_000, 250).catch(() => (caughtUp = false));
  const t = tally({ hook: hook!, dbPath: w.dbPath }, truth);
  record('locked database (a second connection holding BEGIN EXCLUSIVE)', {
    'locks held': locks,
    'each held (s)': holdMs / 1000,
    'longest event-loop stall (ms)': loopMaxMs,
    'slowest /livez answer (ms)': livezMaxMs,
    'alerts expected': t.expected,
    delivered: t.delivered,
    lost: t.lost,
    invented: t.invented,
    'most requests for one event': mostPerId(hook!, from),
  });
  expect(loopMaxMs).toBeLessThan(1_000);
  expect(caughtUp).toBe(true);
  expect({ lost: t.lostList, invented: t.inventedList }).toEqual({ lost: [], invented: [] });
  expect(mostPerId(hook!, from)).toBe(1);
});

it('a damaged file: refused at start with what to do (quick_check of a 200 MB file timed); found by a query while running, /readyz fails', async () => {
  const { w, app } = await running();
  const config = join(w.dir, 'config.yaml');
  writeFileSync(config, w.yaml());
  // While running: a bad page under the daemon, seen once another program writes.
  sqliteOf(app.store).pragma('wal_checkpoint(TRUNCATE)');
  damagePages(w.dbPath, ['poll_state']);
  const other = new BetterSqlite3(w.dbPath);
  other.exec('CREATE TABLE touched (x)');
  other.close();
  const seenAt = Date.now();
  await fetch(`${app.serverUrl}/api/sources`);
  const readyz = await fetch(`${app.serverUrl}/readyz`);
  const problem = ((await readyz.json()) as { database_problem?: string }).database_problem ?? '';
  const livez = (await fetch(`${app.serverUrl}/livez`)).status;
  await app.stop();

  // At start: the same file grown to 200 MB by another table, then `poll --once`.
  const big = new BetterSqlite3(w.dbPath);
  big.exec('DROP TABLE touched; CREATE TABLE filler (b BLOB)');
  const ins = big.prepare('INSERT INTO filler (b) VALUES (zeroblob(4000))');
  big.transaction(() => {
    for (let i = 0; i < 50_000; i++) ins.run();
  })();
  big.pragma('wal_checkpoint(TRUNCATE)');
  big.close();
  const sizeMb = Math.round(statSync(w.dbPath).size / 1e6);
  const started = Date.now();
  const run = await hostwatch(['poll', '--once', '-c', config], { env: { SIM_URL: w.sim.url, DB: w.dbPath, API_KEY: TEST_KEY } });
  const refusedS = secondsSince(started);
  record('damaged database file', {
    'while running: /readyz (HTTP status)': readyz.status,
    'while running: database_problem': problem.replace(/^.*: (damaged)/, '$1'),
    'while running: /livez (HTTP status)': livez,
    'while running: seconds to notice': secondsSince(seenAt),
    'at start: file size (MB)': sizeMb,
    'at start: exit code of poll --once': run.code ?? 'signal',
    'at start: seconds to refuse (process start and quick_check)': refusedS,
    'at start: message': run.stderr.trim().slice(0, 120),
  });
  expect(readyz.status).toBe(503);
  expect(problem).toContain('SQLITE_CORRUPT');
  expect(livez).toBe(200);
  expect(run.code).toBe(1);
  // The bad page is poll_state's first one, which is now usually its root and only page (only
  // entities that failed have rows there): quick_check then stops on it with an error rather
  // than listing a problem row, so either detail may follow (test/sqlite-faults checks the
  // listed form on a table with pages under its root). Either way the refusal names the file
  // and what to do.
  expect(run.stderr).toMatch(/is damaged \((quick_check: |database disk image is malformed)/);
  expect(run.stderr).toContain('.recover');
});
