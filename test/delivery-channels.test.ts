/**
 * Webhook additions: 410 Gone disables the endpoint with an operator event, Retry-After is
 * honoured, secret rotation (every secret signs; receivers on the old or the new one
 * verify with standardwebhooks), CloudEvents binary mode (validated by the SDK), and how
 * an answer is read (its status decides; at most 4 KB of its body, for a moment).
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebhookChannelConfig } from '../src/config/types.js';
import type { HostwatchEvent } from '../src/events/types.js';
import { cloudEventRequest, WebhookChannel } from '../src/notify/channels/webhook.js';
import { siteEvent } from './events-fixture.js';
import { startWorld, type World, rows } from './harness.js';
import { startReceiver, TEST_SECRET, waitFor, type Answer, type Received, type Receiver } from './receiver.js';

const NEW_SECRET = `whsec_${Buffer.from('the-new-secret-after-rotation-32').toString('base64')}`;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function world(): Promise<World> {
  const w = await startWorld();
  cleanups.push(() => w.close());
  return w;
}

async function receiver(opts: { secret?: string; answer?: (r: Received) => Answer } = {}): Promise<Receiver> {
  const r = await startReceiver(opts);
  cleanups.push(() => r.close());
  return r;
}

describe('channels whose receivers hang', () => {
  it('hold back only their own rows: the other channel gets every event at once, also those committed while the hung sends wait, and the worker does not spin', async () => {
    const w = await world();
    const hung = await Promise.all([1, 2, 3, 4].map(() => receiver({ answer: () => 'hold' })));
    const ok = await receiver();
    const app = await w.app({
      channels: [
        ...hung.map((h, i) => ({ name: `hung${i}`, type: 'webhook', url: h.url, secret: TEST_SECRET, timeout: '20s' })),
        { name: 'ok', type: 'webhook', url: ok.url, secret: TEST_SECRET },
      ],
      // One lane per channel: the hung channels' oldest rows fill theirs at once.
      delivery: { concurrency: 1 },
    });
    // Count the worker's reads of due rows (its claims are private: a test's look inside).
    const claims = (app.worker as unknown as { claims: { due: (...a: unknown[]) => Promise<unknown[]> } }).claims;
    const due = claims.due.bind(claims);
    let reads = 0;
    claims.due = (...a: unknown[]) => (reads++, due(...a));
    app.worker.start();
    const t0 = Date.now();
    for (let i = 1; i <= 5; i++) await app.notifier.publish(siteEvent(`h${i}`, i));
    await waitFor(() => ok.accepted().length === 5 && hung.every((h) => h.requests.length === 1), 'the other channel', 5_000);
    expect(Date.now() - t0).toBeLessThan(5_000);
    // An event committed later goes out at once too.
    await app.notifier.publish(siteEvent('h6', 6));
    await waitFor(() => ok.accepted().length === 6, 'the later event', 2_000);
    // With the hung sends in flight and nothing else to do, the worker waits: about one read a second.
    const before = reads;
    await new Promise((r) => setTimeout(r, 1_500));
    expect(reads - before).toBeLessThanOrEqual(4);
    expect(hung.map((h) => h.requests.length)).toEqual([1, 1, 1, 1]);
    await Promise.all(hung.map((h) => h.close()));
    await app.stop();
  });
});

describe('retries while another channel hangs', () => {
  /**
   * A channel whose receiver holds its one request and one that answers 503, retried every
   * 100 ms. `slowRead` delays each read of due rows by that long after the time it read at
   * (a test's look inside the worker). Returns how many retries the failing channel got in
   * the 3 s after both first attempts; the hung channel must have had only its first.
   */
  async function retriesIn3s(slowRead = 0): Promise<number> {
    const w = await world();
    const hung = await receiver({ answer: () => 'hold' });
    const failing = await receiver({ answer: () => ({ status: 503 }) });
    const app = await w.app({
      channels: [
        { name: 'hung', type: 'webhook', url: hung.url, secret: TEST_SECRET, timeout: '20s' },
        { name: 'failing', type: 'webhook', url: failing.url, secret: TEST_SECRET },
      ],
      delivery: { retry_schedule: Array.from({ length: 50 }, () => '100ms') },
    });
    if (slowRead > 0) {
      const claims = (app.worker as unknown as { claims: { due: (...a: unknown[]) => Promise<unknown[]> } }).claims;
      const due = claims.due.bind(claims);
      claims.due = async (...a: unknown[]) => {
        const rows = await due(...a);
        await new Promise((r) => setTimeout(r, slowRead));
        return rows;
      };
    }
    app.worker.start();
    await app.notifier.publish(siteEvent('r1', 1));
    await waitFor(() => hung.requests.length === 1 && failing.requests.length === 1, 'the first attempts', 3_000);
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 3_000));
    const tries = failing.requests.filter((r) => r.at >= t0).length;
    expect(hung.requests).toHaveLength(1);
    await hung.close();
    await app.stop();
    return tries;
  }

  it('go out on their schedule, not only when the hung send ends or once a second', async () => {
    // 100 ms apart (±20%) plus a send and its record each, while the hung send is in flight
    // all along: 8 or more in 3 s even on a loaded machine (about 20 on a quiet one); woken
    // only once a second, it would be 3 at most.
    expect(await retriesIn3s()).toBeGreaterThanOrEqual(6);
  });

  it('go out on their schedule also when one falls due while the worker is still reading (a slow store)', async () => {
    // Each read answers 150 ms after the time it read at, so every retry, due 100 ms after
    // its record, falls due during the next read. That read, then the retry read again at
    // once: about 300 ms a try, 9 or 10 in 3 s. A retry due during a read was left to the
    // idle poll, a second later: 3 at most (2 measured).
    expect(await retriesIn3s(150)).toBeGreaterThanOrEqual(5);
  });
});

/**
 * A loopback server that hands every request's response to `answer` once the request body
 * arrived (for answers the receiver of receiver.ts cannot give: a body that streams). Its URL.
 */
async function streamingServer(answer: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

/** A webhook channel on its own (no outbox), on the clock given, closed after the test. */
function webhookTo(url: string, clock: { now?: () => number; sleep?: (ms: number) => Promise<void> } = {}): WebhookChannel {
  const cfg: WebhookChannelConfig = { name: 'h', type: 'webhook', url, secret: TEST_SECRET, secrets: [TEST_SECRET], timeout_ms: 10_000, mode: 'structured', template: null };
  const channel = new WebhookChannel(cfg, clock.now, undefined, clock.sleep);
  cleanups.push(() => channel.close());
  return channel;
}

describe('webhook channel', () => {
  it('a 410 Gone disables the endpoint: the row is dead, an operator event says so, and later events are not sent to it', async () => {
    const w = await world();
    const gone = await receiver({ answer: () => ({ status: 410, body: 'endpoint deleted' }) });
    const ok = await receiver();
    const app = await w.app({
      channels: [
        { name: 'gone', type: 'webhook', url: gone.url, secret: TEST_SECRET },
        { name: 'ok', type: 'webhook', url: ok.url, secret: TEST_SECRET },
      ],
    });
    await app.notifier.publish(siteEvent('g1', 2));
    await app.worker.drain(3_000);
    expect(gone.requests).toHaveLength(1);
    expect(rows(w, 'SELECT channel, disabled_reason FROM channel_state WHERE disabled_at IS NOT NULL')).toEqual([
      { channel: 'gone', disabled_reason: 'HTTP 410: endpoint deleted' },
    ]);
    const op = ok.accepted().map((r) => r.event!).find((e) => e.type === 'hostwatch.channel.disabled');
    expect(op?.data).toMatchObject({ name: 'channel.disabled', channel: 'gone', reason: 'HTTP 410: endpoint deleted', summary: 'channel gone is disabled: HTTP 410: endpoint deleted' });
    await app.notifier.publish(siteEvent('g2', 2));
    await app.worker.drain(3_000);
    expect(gone.requests).toHaveLength(1);
    expect(ok.accepted()).toHaveLength(3);
    const dead = rows<{ state: string; last_error: string }>(w, "SELECT state, last_error FROM outbox WHERE channel = 'gone' ORDER BY id");
    // g1 and g2; the channel.disabled about it is not queued to it.
    expect(dead.map((d) => d.state)).toEqual(['dead', 'dead']);
    expect(dead[0]!.last_error).toBe('channel disabled: HTTP 410: endpoint deleted');
  });

  it('honours a 503\'s Retry-After when it is longer than the scheduled retry', async () => {
    const w = await world();
    const hook = await receiver({ answer: (r) => (r.n === 1 ? { status: 503, headers: { 'retry-after': '90' }, body: 'busy' } : { status: 200 }) });
    const t0 = Date.now();
    const app = await w.app({ channels: [{ name: 'h', type: 'webhook', url: hook.url, secret: TEST_SECRET }] });
    await app.notifier.publish(siteEvent('ra', 2));
    await app.worker.deliverDue();
    const [row] = rows<{ state: string; next_attempt_at: number }>(w, 'SELECT state, next_attempt_at FROM outbox');
    expect(row!.state).toBe('pending');
    expect(row!.next_attempt_at - t0).toBeGreaterThanOrEqual(90_000);
    expect(row!.next_attempt_at - t0).toBeLessThan(100_000);
  });

  it('signs with every secret during a rotation: a receiver on the old secret and one on the new both verify', async () => {
    const w = await world();
    const onOld = await receiver({ secret: TEST_SECRET });
    const onNew = await receiver({ secret: NEW_SECRET });
    const app = await w.app({
      channels: [
        { name: 'a', type: 'webhook', url: onOld.url, secret: [NEW_SECRET, TEST_SECRET] },
        { name: 'b', type: 'webhook', url: onNew.url, secret: [NEW_SECRET, TEST_SECRET] },
      ],
    });
    await app.notifier.publish(siteEvent('rot', 2));
    expect(await app.worker.drain(3_000)).toBe(0);
    for (const r of [...onOld.requests, ...onNew.requests]) {
      expect(r.signatureError).toBeNull();
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+ v1,[A-Za-z0-9+/=]+$/);
    }
    expect(onOld.accepted()).toHaveLength(1);
    expect(onNew.accepted()).toHaveLength(1);
    // A receiver that knows neither secret still rejects it.
    const stranger = await receiver({ secret: `whsec_${Buffer.from('somebody-else-entirely-32-bytes!').toString('base64')}` });
    await app.stop(); // one daemon per database file
    const app2 = await w.app({ channels: [{ name: 'c', type: 'webhook', url: stranger.url, secret: [NEW_SECRET, TEST_SECRET] }] });
    await app2.notifier.publish(siteEvent('rot2', 2));
    await app2.worker.deliverDue();
    expect(stranger.requests[0]!.signatureError).not.toBeNull();
  });

  it('in binary mode percent-encodes ce-* header values, so a subject with spaces, quotes, % or non-Latin-1 text can be sent', () => {
    const e = siteEvent('enc', 2, { subject: 'sites/2/files/wp-content/日本 "a" 100%.php' });
    const { headers } = cloudEventRequest(e, JSON.stringify(e), 'binary');
    expect(headers['ce-subject']).toBe('sites/2/files/wp-content/%E6%97%A5%E6%9C%AC%20%22a%22%20100%25.php');
    expect(decodeURIComponent(headers['ce-subject']!)).toBe(e.subject);
    expect(headers['ce-type']).toBe(e.type); // printable ASCII stays as it is
  });

  it('in binary mode sends data as the body and the attributes as ce-* headers: a valid CloudEvent, signed over the body sent', async () => {
    const w = await world();
    const hook = await receiver();
    const app = await w.app({ channels: [{ name: 'bin', type: 'webhook', url: hook.url, secret: TEST_SECRET, mode: 'binary' }] });
    const e = siteEvent('bin', 2, { summary: 'binary mode' });
    await app.notifier.publish(e);
    expect(await app.worker.drain(3_000)).toBe(0);
    const r = hook.requests[0]!;
    expect(r.signatureError).toBeNull();
    expect(r.cloudEventError).toBeNull();
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    expect(r.headers['ce-id']).toBe(e.id);
    expect(r.headers['ce-type']).toBe('hostwatch.backup.failed');
    expect(r.cloudEvent).toMatchObject({ id: e.id, source: 'hostwatch://test', type: e.type, subject: e.subject, specversion: '1.0' });
    expect(r.cloudEvent!.data).toEqual(e.data);
    expect(JSON.parse(r.body) as HostwatchEvent['data']).toEqual(e.data);
  });
});

describe('a webhook answer', () => {
  it('that is 2xx is delivered once, also when its body is still arriving after the timeout (it is not "timed out" and sent again)', async () => {
    const w = await world();
    let requests = 0;
    const url = await streamingServer((res) => {
      requests++;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('accepted, ');
      const timer = setTimeout(() => res.end('and that is all'), 1_500);
      res.on('close', () => clearTimeout(timer));
    });
    const app = await w.app({ channels: [{ name: 'slow', type: 'webhook', url, secret: TEST_SECRET, timeout: '300ms' }] });
    await app.notifier.publish(siteEvent('slow-body', 2));
    await app.worker.deliverDue();
    expect(rows(w, 'SELECT state, last_error FROM outbox')).toEqual([{ state: 'delivered', last_error: null }]);
    expect(rows(w, 'SELECT outcome, status_code, error FROM delivery_attempts')).toEqual([{ outcome: 'delivered', status_code: 200, error: null }]);
    expect(await app.worker.drain(1_000)).toBe(0);
    expect(requests).toBe(1);
  });

  it('is read only so far: a 2xx streaming a huge body is delivered without the body being read to its end', async () => {
    const total = 64 * 1024 * 1024;
    const sent = { bytes: 0, finished: false, closed: false };
    const url = await streamingServer((res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const pump = (): void => {
        while (sent.bytes < total) {
          sent.bytes += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
        sent.finished = true;
      };
      res.on('close', () => (sent.closed = true));
      pump();
    });
    const e = siteEvent('huge-body', 2);
    expect(await webhookTo(url).send(e, JSON.stringify(e))).toEqual({ ok: true, statusCode: 200 });
    await waitFor(() => sent.closed, 'the receiver to see the connection closed');
    expect(sent.finished).toBe(false);
    expect(sent.bytes).toBeLessThan(total);
  });

  it('that is an error is stored on one line: its line breaks, NUL and terminal escapes cannot forge a row or recolour a terminal', async () => {
    const w = await world();
    const forged = 'oops\r\n2026-11-21T00:00:00Z  hooks  delivered  200\u0000\u001b[31mred\u001b[0m\u001b]0;title\u0007';
    const hook = await receiver({ answer: () => ({ status: 500, body: forged }) });
    const app = await w.app({ channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] });
    await app.notifier.publish(siteEvent('forged', 2));
    await app.worker.deliverDue();
    const expected = 'HTTP 500: oops 2026-11-21T00:00:00Z  hooks  delivered  200 [31mred [0m ]0;title';
    expect(rows(w, 'SELECT state, last_error FROM outbox')).toEqual([{ state: 'pending', last_error: expected }]);
    expect(rows(w, 'SELECT error FROM delivery_attempts')).toEqual([{ error: expected }]);
  });
});

describe('a webhook 429', () => {
  it('holds the later messages to its endpoint: within 10 s they wait out its Retry-After, beyond it they go back to the outbox with the wait, unsent', async () => {
    const hook = await receiver({
      answer: (r) => (r.n === 1 ? { status: 429, headers: { 'retry-after': '5' } } : r.n === 3 ? { status: 429, headers: { 'retry-after': '60' } } : { status: 200 }),
    });
    let now = Date.now();
    const slept: number[] = [];
    let wake = (): void => undefined;
    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        slept.push(ms);
        wake = resolve;
      });
    const hooks = webhookTo(hook.url, { now: () => now, sleep });
    const send = (key: string) => {
      const e = siteEvent(key, 2);
      return hooks.send(e, JSON.stringify(e));
    };
    expect(await send('first')).toMatchObject({ ok: false, retryable: true, statusCode: 429, retryAfterMs: 5_000 });
    const waited = send('second');
    await waitFor(() => slept.length === 1, 'the second message to wait');
    expect(hook.requests).toHaveLength(1);
    now += slept[0]!;
    wake();
    expect(await waited).toEqual({ ok: true, statusCode: 200 });
    expect(slept).toEqual([5_000]);
    expect(hook.requests).toHaveLength(2);

    expect(await send('third')).toMatchObject({ ok: false, retryable: true, statusCode: 429, retryAfterMs: 60_000 });
    const held = await send('fourth');
    expect(held).toMatchObject({ ok: false, retryable: true, statusCode: null, retryAfterMs: 60_000, notSent: true, notBefore: now + 60_000 });
    expect(!held.ok && held.error).toBe(`webhook: held back until ${new Date(now + 60_000).toISOString()} (the provider's rate limit)`);
    expect(hook.requests).toHaveLength(3);
  });

  it('counts no attempt against a message it held back unsent: with no retries left to spend, the later event waits in the outbox for the Retry-After instead of being dead-lettered', async () => {
    const w = await world();
    const hook = await receiver({ answer: (r) => (r.n === 1 ? { status: 429, headers: { 'retry-after': '60' } } : { status: 200 }) });
    const app = await w.app({ delivery: { retry_schedule: [] }, channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] });
    const t0 = Date.now();
    await app.notifier.publish(siteEvent('refused', 2));
    await app.worker.deliverDue();
    await app.notifier.publish(siteEvent('held', 3));
    await app.worker.deliverDue();
    expect(hook.requests).toHaveLength(1);
    // The refused one was sent (and, with no retries configured, is dead); the held one was never sent.
    const byEvent = new Map(rows<{ event_id: string; state: string; attempts: number; next_attempt_at: number }>(w, 'SELECT event_id, state, attempts, next_attempt_at FROM outbox').map((r) => [r.event_id, r]));
    expect(byEvent.get(siteEvent('refused', 2).id)).toMatchObject({ state: 'dead', attempts: 1 });
    const held = byEvent.get(siteEvent('held', 3).id)!;
    expect(held).toMatchObject({ state: 'pending', attempts: 0 });
    expect(held.next_attempt_at).toBeGreaterThanOrEqual(t0 + 55_000);
    expect(rows(w, 'SELECT COUNT(*) AS n FROM delivery_attempts')).toEqual([{ n: 1 }]);
  });

  it('leaves the webhook\'s sends parallel otherwise: three messages reach a slow receiver before it answers the first', async () => {
    const hook = await receiver({ answer: () => ({ status: 200, delayMs: 1_500 }) });
    const hooks = webhookTo(hook.url);
    const events = ['p1', 'p2', 'p3'].map((k) => siteEvent(k, 2));
    const results = await Promise.all(events.map((e) => hooks.send(e, JSON.stringify(e))));
    expect(results.every((r) => r.ok)).toBe(true);
    const at = hook.requests.map((r) => r.at);
    expect(Math.max(...at) - Math.min(...at)).toBeLessThan(1_500);
  });
});
