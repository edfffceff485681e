/**
 * Faults of the SQLite file itself, made for real: a lock held by another connection
 * (`BEGIN EXCLUSIVE` in a second connection, as a CLI command, a backup or an `sqlite3`
 * shell would), a full disk (`PRAGMA max_page_count`: SQLite's own "database or disk is
 * full"), and a damaged file (garbage written over a page).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { BUSY_WAIT_MS } from '../src/store/sqlite.js';
import { names, startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET, waitFor, type Receiver } from './receiver.js';

let world: World | undefined;
let hook: Receiver | undefined;
let other: BetterSqlite3.Database | undefined;
afterEach(async () => {
  if (other?.open) {
    if (other.inTransaction) other.exec('ROLLBACK');
    other.close();
  }
  await world?.close();
  await hook?.close();
  world = hook = other = undefined;
});

const SITES = 3;

/** A world whose daemon serves HTTP and delivers to a webhook answering after `delayMs`. */
async function daemonWorld(delayMs = 0): Promise<World> {
  hook = await startReceiver({ answer: () => ({ status: 204, delayMs }) });
  world = await startWorld({
    sim: { sites: SITES },
    config: {
      server: { listen: '127.0.0.1:0' },
      channels: [{ name: 'hook', type: 'webhook', url: hook.url, secret: TEST_SECRET, timeout: '5s' }],
      delivery: { retry_schedule: ['1s', '1s', '1s', '1s', '1s'] },
      sources: { health: { every: '10s' } },
      inhibit: [],
      incidents: { enabled: false },
    },
  });
  return world;
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
    loop.disable();
    expect(app.worker.unrecordedRows).toBeGreaterThan(0);
    lock.exec('COMMIT');
    await waitFor(() => app.worker.unrecordedRows === 0 && hook!.acceptedIds().size === SITES, 'every attempt recorded and every alert delivered', 20_000);
    await sleep(1_500);
    // Each alert reached the receiver once: nothing was sent again because its record waited.
    expect(hook!.requests.map((r) => r.id).sort()).toEqual([...hook!.acceptedIds()].sort());
    expect(loop.max / 1e6).toBeLessThan(1_000);
  });
});
