/**
 * The outbox worker where timing decides: a grouped message that fails and is tried again,
 * and `hostwatch redeliver` while the row's last attempt is still on the wire. On both engines.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import type { Channel } from '../src/notify/channel.js';
import { HttpChannel, standardVerdict, type Provider } from '../src/notify/channels/http.js';
import { localClaims, OutboxWorker, type DeliveryClaims } from '../src/notify/outbox-worker.js';
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

function worker(store: Store, channel: Channel, schedule: number[], claims?: DeliveryClaims): OutboxWorker {
  return new OutboxWorker({
    store,
    claims,
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

  it('records the other rows of a grouped message when `hostwatch redeliver` took one of them while it was on the wire', async () => {
    const store = await storeOf(engine);
    const events = [siteEvent('pair-0', 1), siteEvent('pair-1', 2)];
    await queue(store, events, { channel: 'ops', group_key: 'r0|pair' });
    let release: () => void = () => {};
    const messages: string[][] = [];
    const slack: Channel = {
      name: 'ops',
      type: 'slack',
      send: async () => ({ ok: true, statusCode: 200 }),
      async sendBatch(batch) {
        messages.push(batch.map((e) => e.id));
        if (messages.length === 1) await new Promise<void>((r) => (release = r));
        return { ok: true, statusCode: 200 };
      },
    };
    const w = worker(store, slack, [400]);
    const run = w.deliverDue();
    while (messages.length === 0) await new Promise((r) => setTimeout(r, 10));
    await store.transaction((tx) => repos(tx).events.redeliver({ eventId: events[1]!.id }, null, Date.now()));
    release();
    await run;
    // The first row's delivery is recorded; only the redelivered one goes again (before, the
    // whole message's record was rolled back and both were sent a second time).
    expect(messages).toEqual([[events[0]!.id, events[1]!.id], [events[1]!.id]]);
    const rows = await repos(store).events.deliveries({ failed: false, channel: null }, 10);
    expect(rows.map((r) => r.state)).toEqual(['delivered', 'delivered']);
  });

  it('waits for the row that holds others back instead of reading the outbox again and again (poll --once)', async () => {
    const store = await storeOf(engine);
    const at = { name: 'site.offline', rule: 'site-offline', subject: 'sites/9/health' } as const;
    const [firing, resolved] = [siteEvent('held-f', 9, { ...at, status: 'firing' }), siteEvent('held-r', 9, { ...at, status: 'resolved' })];
    const key = `${at.rule}\u001f${at.subject}`;
    // The firing waits for its retry (in 10 s); its resolution is due now but waits behind it.
    await queue(store, [firing], { channel: 'hooks', attempts: 1, next_attempt_at: Date.now() + 10_000, order_key: key });
    await queue(store, [resolved], { channel: 'hooks', order_key: key });
    const sent: string[] = [];
    const hooks: Channel = { name: 'hooks', type: 'webhook', send: async (e) => (sent.push(e.id), { ok: true, statusCode: 200 }) };
    const started = Date.now();
    const pending = await worker(store, hooks, [60_000]).drain(1_500);
    expect(pending).toBe(2);
    expect(sent).toEqual([]);
    // The next row due is the firing, after the deadline: drain says so at once. Before, the
    // held row counted as due now, and drain read the outbox without a pause until its deadline.
    expect(Date.now() - started).toBeLessThan(1_000);
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

/**
 * A paced provider (PagerDuty's pace: one request every 500 ms) in front of a receiver that
 * takes `answerMs` to answer: messages wait their turn in the channel, after the worker's
 * own checks. Records when each request arrived.
 */
async function slowPager(answerMs: number): Promise<{ channel: HttpChannel; arrived: number[] }> {
  const arrived: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrived.push(Date.now());
      setTimeout(() => res.writeHead(202).end('{}'), answerMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => server.close(r)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const provider: Provider = {
    label: 'PagerDuty',
    minIntervalMs: 500,
    groups: false,
    request: (events) => ({ url, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: events[0]!.id }) }),
    judge: (answer) => standardVerdict(answer.status, '', null, []),
  };
  const channel = new HttpChannel('pager', 'pagerduty', provider, 10_000);
  cleanups.push(() => channel.close?.());
  return { channel, arrived };
}

describe('messages waiting for their turn in a paced channel', () => {
  it('are not sent once the worker is asked to stop, and stay pending with no attempt recorded', async () => {
    const store = await storeOf('sqlite');
    const { channel, arrived } = await slowPager(1_000);
    await queue(store, Array.from({ length: 8 }, (_, i) => siteEvent(`stop-${i}`, 1 + i, { name: 'site.offline', status: 'firing' })), { channel: 'pager' });
    const w = worker(store, channel, [5_000]);
    w.start();
    while (arrived.length === 0) await new Promise((r) => setTimeout(r, 10));
    const askedAt = Date.now();
    await w.stop();
    // The one on the wire finished; the seven in the channel's queue never went (before: all
    // seven, one a second, and stop() took 11 s).
    expect(arrived.filter((t) => t > askedAt)).toEqual([]);
    expect(Date.now() - askedAt).toBeLessThan(3_000);
    const rows = await repos(store).events.deliveries({ failed: false, channel: null }, 10);
    expect(rows.map((r) => r.state).sort()).toEqual(['delivered', ...Array<string>(7).fill('pending')]);
    expect(rows.filter((r) => r.state === 'pending').every((r) => r.attempts === 0)).toBe(true);
  });

  it('are not sent once this cluster member may have lost its lease, though the worker checked before they queued', async () => {
    const store = await storeOf('sqlite');
    const { channel, arrived } = await slowPager(1_000);
    await queue(store, Array.from({ length: 4 }, (_, i) => siteEvent(`lease-${i}`, 1 + i, { name: 'site.offline', status: 'firing' })), { channel: 'pager' });
    // The member's lease holds while the sends start, and may have run out once the first is on the wire.
    let live = true;
    const local = localClaims(store);
    // As clusterClaims: a member that is not surely live claims nothing and sends nothing.
    const claims: DeliveryClaims = { due: async (...a) => (live ? local.due(...a) : []), group: local.group, maySend: () => live };
    const w = worker(store, channel, [5_000], claims);
    const run = w.deliverDue();
    while (arrived.length === 0) await new Promise((r) => setTimeout(r, 10));
    live = false;
    await w.deliverDue();
    await run;
    expect(arrived).toHaveLength(1);
    const rows = await repos(store).events.deliveries({ failed: false, channel: null }, 10);
    expect(rows.map((r) => r.state).sort()).toEqual(['delivered', 'pending', 'pending', 'pending']);
  });
});
