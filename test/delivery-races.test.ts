/**
 * The outbox worker where timing decides: a grouped message that fails and is tried again,
 * and `hostwatch redeliver` while the row's last attempt is still on the wire. On both engines.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import type { Channel } from '../src/notify/channel.js';
import { OutboxWorker } from '../src/notify/outbox-worker.js';
import { openStore, type Store } from '../src/store/db.js';
import { toEventRow, type OutboxInsert } from '../src/store/events-repo.js';
import { repos } from '../src/store/repos.js';
import { siteEvent } from './events-fixture.js';
import { ENGINES, freshStorage, type Engine } from './pg.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function storeOf(engine: Engine): Promise<Store> {
  const fresh = await freshStorage(engine);
  cleanups.push(fresh.cleanup);
  const store = await openStore(fresh.storage, { now: Date.now });
  cleanups.push(() => store.close());
  return store;
}

async function queue(store: Store, events: HostwatchEvent[], row: Partial<OutboxInsert> & { channel: string }): Promise<void> {
  const now = Date.now();
  await store.transaction(async (tx) => {
    const r = repos(tx);
    for (const e of events) {
      await r.events.addEvent(toEventRow(e));
      await r.events.enqueue({ event_id: e.id, state: 'pending', attempts: 0, next_attempt_at: now, last_error: null, created_at: now, updated_at: now, ...row });
    }
  });
}

function worker(store: Store, channel: Channel, schedule: number[]): OutboxWorker {
  return new OutboxWorker({
    store,
    disableAfterMs: 5 * 86_400_000,
    channels: new Map([[channel.name, channel]]),
    retryScheduleMs: schedule,
    concurrency: 8,
    now: Date.now,
    // Each row draws its own jitter (±20%).
    random: Math.random,
    log: pino({ level: 'silent' }),
    scrub: (s) => s,
  });
}

describe.each(ENGINES)('the outbox worker on %s', (engine) => {
  it('tries a grouped message that failed again as one message with every event of its group', async () => {
    const store = await storeOf(engine);
    const messages: number[] = [];
    let calls = 0;
    const slack: Channel = {
      name: 'ops',
      type: 'slack',
      send: async () => ({ ok: true, statusCode: 200 }),
      async sendBatch(events) {
        calls++;
        if (calls === 1) return { ok: false, retryable: true, statusCode: 500, error: 'HTTP 500' };
        messages.push(events.length);
        return { ok: true, statusCode: 200 };
      },
    };
    await queue(store, Array.from({ length: 6 }, (_, i) => siteEvent(`group-${i}`, 1 + i)), { channel: 'ops', group_key: 'r0|site_id=null' });
    const pending = await worker(store, slack, [400, 400]).drain(5_000);
    expect(pending).toBe(0);
    // Before: each row drew its own retry time, and the six came back as six messages.
    expect(messages).toEqual([6]);
    expect(calls).toBe(2);
  });

  it('keeps a row that `hostwatch redeliver` queued again while its last attempt was on the wire', async () => {
    const store = await storeOf(engine);
    const e = siteEvent('on-the-wire', 1);
    // One failed attempt already: the one on the wire is the last of a one-step schedule.
    await queue(store, [e], { channel: 'hooks', attempts: 1, last_error: 'HTTP 503' });
    let release: () => void = () => {};
    const started: number[] = [];
    const hooks: Channel = {
      name: 'hooks',
      type: 'webhook',
      async send() {
        started.push(Date.now());
        if (started.length === 1) await new Promise<void>((r) => (release = r));
        return { ok: false, retryable: true, statusCode: 503, error: 'HTTP 503' };
      },
    };
    const w = worker(store, hooks, [60_000]);
    const run = w.deliverDue();
    while (started.length === 0) await new Promise((r) => setTimeout(r, 10));
    // The operator runs `hostwatch redeliver` (its own transaction) while the attempt hangs.
    const n = await store.transaction((tx) => repos(tx).events.redeliver({ eventId: e.id }, null, Date.now()));
    expect(n).toBe(1);
    release();
    await run;
    const [row] = await repos(store).events.deliveries({ failed: false, channel: null }, 1);
    // The attempt on the wire did not dead-letter it over the redelivery: the row was sent
    // again with a fresh schedule, and waits for its retry.
    expect(started).toHaveLength(2);
    expect(row).toMatchObject({ state: 'pending', attempts: 1 });
    expect(w.claimsLost).toBe(1);
  });
});
