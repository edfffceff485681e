/**
 * A send succeeds, then recording the attempt fails (a full disk, a locked file, a database
 * that refuses the write). The row must not be sent again at once: the worker holds it
 * until the record is written, backs off while the store fails, sends nothing new
 * meanwhile, and once the store works again records what happened, so every event reaches
 * the receiver once. Real faults: SQLite's max_page_count (a real SQLITE_FULL), and on
 * PostgreSQL a constraint that refuses new attempt rows (a real failed INSERT).
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../src/main.js';
import type { Channel } from '../src/notify/channel.js';
import { OutboxWorker, storeBackoffMs } from '../src/notify/outbox-worker.js';
import { openStore } from '../src/store/db.js';
import { toEventRow } from '../src/store/events-repo.js';
import { repos } from '../src/store/repos.js';
import { siteEvent } from './events-fixture.js';
import { sqliteOf, type World } from './harness.js';
import { closeHookedWorlds, hookedWorld } from './hooked-world.js';
import { ENGINES, freshStorage, relayTo, type Engine } from './pg.js';
import { waitFor } from './receiver.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  await closeHookedWorlds();
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SITES = 5;

/** A way to make the store refuse to record attempts, and to heal it. */
interface Fault {
  break(app: App): Promise<void>;
  heal(app: App): Promise<void>;
  /**
   * Whether the receiver takes the sends before the first record fails. On PostgreSQL every
   * record fails at once, so the sends that cannot be recorded are successful ones; SQLite's
   * file fills up with the refused attempts' rows first.
   */
  acceptFirst: boolean;
}

const FAULTS: Record<Engine, (w: World) => Fault> = {
  // The database may not grow by a page: an attempt's new row soon finds no room. The
  // failed sends before that fill the last page (each attempt is a row).
  sqlite: () => ({
    async break(app) {
      const db = sqliteOf(app.store);
      db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    },
    async heal(app) {
      sqliteOf(app.store).pragma('max_page_count = 1073741823');
    },
    acceptFirst: false,
  }),
  postgres: (w) => {
    const url = w.storage.engine === 'postgres' ? w.storage.url : '';
    const ddl = async (sql: string): Promise<void> => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(sql);
      } finally {
        await c.end();
      }
    };
    return {
      break: () => ddl('ALTER TABLE delivery_attempts ADD CONSTRAINT test_refuse_attempts CHECK (attempt < 0) NOT VALID'),
      heal: () => ddl('ALTER TABLE delivery_attempts DROP CONSTRAINT test_refuse_attempts'),
      acceptFirst: true,
    };
  },
};

describe.each(ENGINES)('a delivery attempt that cannot be recorded, on %s', (engine) => {
  it('is not sent again while the store fails, nothing new is sent meanwhile, and once the store works every event has reached the receiver once', async () => {
    let accept = false;
    const { w, hook } = await hookedWorld({
      engine,
      sites: SITES,
      answer: () => (accept ? { status: 204 } : { status: 503 }),
      timeout: '2s',
      config: { delivery: { retry_schedule: Array.from({ length: 60 }, () => '100ms') } },
    });
    const app = await w.app();
    await app.runOnce();
    for (let id = 1; id <= SITES; id++) w.sim.world.setHealth(id, { status: 'offline' });
    const fault = FAULTS[engine](w);
    await app.start();
    await waitFor(() => w.events.filter((e) => e.data.name === 'site.offline').length === SITES && hook.requests.length >= SITES, 'the alerts and their first (refused) sends', 15_000);
    await fault.break(app);
    accept = fault.acceptFirst;
    await waitFor(() => w.logs.text.includes('could not record a delivery attempt'), 'a record that fails', 15_000);
    accept = true;
    // From the first failed record on: a storm would send these rows again and again.
    const from = hook.requests.length;
    await new Promise((r) => setTimeout(r, 3_000));
    const during = hook.requests.slice(from);
    const perId = new Map<string, number>();
    for (const r of during) perId.set(r.id, (perId.get(r.id) ?? 0) + 1);
    expect([...perId.values()].every((n) => n <= 1), JSON.stringify([...perId])).toBe(true);
    expect(during.length).toBeLessThanOrEqual(SITES);
    expect(app.worker.unrecordedRows).toBeGreaterThan(0);

    await fault.heal(app);
    await waitFor(() => app.worker.unrecordedRows === 0 && hook.acceptedIds().size === SITES, 'every alert delivered and its held records written', 20_000);
    // The last send's record may still be on its way to the store when the receiver has it.
    await waitFor(async () => (await pendingRows(w)) === 0, 'no row left pending', 10_000);
    // Each event was accepted exactly once: the records held back were written, not the sends repeated.
    expect(hook.accepted()).toHaveLength(SITES);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(hook.accepted()).toHaveLength(SITES);
    expect(w.logs.text).toContain('delivery attempt recorded after the store recovered');
  });
});

async function pendingRows(w: World): Promise<number> {
  const [row] = await w.query<{ n: number | string }>("SELECT count(*) AS n FROM outbox WHERE state = 'pending'");
  return Number(row!.n);
}

describe('the store backoff', () => {
  it('doubles from 1 s to a minute', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map(storeBackoffMs)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });

  it('spaces the worker\'s tries of a database it cannot reach at all 1 s, 2 s, 4 s apart (not every second, each with its log line), and sends what is due as soon as a commit shows the database is back', async () => {
    const fresh = await freshStorage('postgres');
    cleanups.push(fresh.cleanup);
    const url = (fresh.storage as { url: string }).url;
    const relay = await relayTo(url);
    cleanups.push(relay.cleanup);
    const through = new URL(url);
    through.port = String(relay.port);
    const store = await openStore({ engine: 'postgres', url: through.toString() }, { now: Date.now });
    cleanups.push(() => store.close());
    const lines: Array<{ msg: string; retry_in_ms?: number }> = [];
    const log = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _e, done) => void (lines.push(JSON.parse(chunk.toString())), done()) }));
    const sent: string[] = [];
    const hooks: Channel = { name: 'hooks', type: 'webhook', send: async (e) => (sent.push(e.id), { ok: true, statusCode: 200 }) };
    const worker = new OutboxWorker({
      store,
      disableAfterMs: 86_400_000,
      channels: new Map([['hooks', hooks]]),
      retryScheduleMs: [1_000],
      concurrency: 2,
      now: Date.now,
      random: Math.random,
      log,
      scrub: (t) => t,
    });
    worker.start();
    cleanups.push(() => worker.stop());

    await relay.cut();
    const failed = (): Array<{ retry_in_ms?: number }> => lines.filter((l) => l.msg === 'outbox worker pass failed');
    await waitFor(() => failed().length >= 3, 'three failed passes', 10_000, 50);
    // 1 s, then 2 s, then 4 s: the third try came about 3 s after the first, not 2.
    const waits = failed().slice(0, 3).map((l) => Math.round((l.retry_in_ms ?? 0) / 100) * 100);
    expect(waits).toEqual([1_000, 2_000, 4_000]);

    // Queued meanwhile by another connection (another member, a CLI command), due now.
    const e = siteEvent('backoff', 1);
    const direct = await openStore(fresh.storage, { now: Date.now });
    await direct.transaction(async (tx) => {
      const r = repos(tx);
      await r.events.addEvent(toEventRow(e));
      await r.events.enqueue({ event_id: e.id, channel: 'hooks', state: 'pending', attempts: 0, next_attempt_at: Date.now(), last_error: null, created_at: Date.now(), updated_at: Date.now() });
    });
    await direct.close();
    await relay.restore();
    // What the daemon does when it commits new events: the commit shows the database is
    // back, so the worker looks now instead of after the rest of its 4 s backoff.
    const back = Date.now();
    worker.kick();
    await waitFor(() => sent.length > 0, 'the queued event sent after the database came back', 15_000, 20);
    expect(Date.now() - back).toBeLessThan(2_000);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(sent).toEqual([e.id]);
  }, 40_000);
});
