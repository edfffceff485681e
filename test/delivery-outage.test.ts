/**
 * Long outages on an injected clock: the real Standard Webhooks schedule (immediately, 5 s,
 * 5 m, 30 m, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h with jitter), a receiver down for a whole
 * simulated day, a restart in the middle of the schedule, and a channel that fails long
 * enough to be disabled. The webhook signs with the wall clock (the receiver checks the
 * signature's age against it); everything that schedules reads the test clock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { WebhookChannelConfig } from '../src/config/types.js';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App } from '../src/main.js';
import { Pacer } from '../src/notify/channels/http.js';
import { WebhookChannel } from '../src/notify/channels/webhook.js';
import { DEFAULT_RETRY_SCHEDULE_MS, nextStep } from '../src/notify/retry.js';
import { mulberry32 } from '../src/simulator/random.js';
import { testClock, type TestClock } from './clock.js';
import { siteEvent } from './events-fixture.js';
import { startWorld, type World, rows } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const MIN = 60_000;
const HOUR = 60 * MIN;

async function setup(down: { value: boolean }, config: Record<string, unknown> = {}): Promise<{ w: World; hook: Receiver; clock: TestClock; app: () => Promise<App> }> {
  const hook = await startReceiver({ answer: () => (down.value ? { status: 503, body: 'maintenance' } : { status: 204 }) });
  const w = await startWorld();
  cleanups.push(() => w.close(), () => hook.close());
  const clock = testClock(new Date().toISOString());
  const cfg: WebhookChannelConfig = { name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET, secrets: [TEST_SECRET], timeout_ms: 2_000, mode: 'structured', template: null };
  const random = mulberry32(7);
  const app = (): Promise<App> =>
    w.app(
      { channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }], ...config },
      { now: clock.now, random, channels: [new WebhookChannel(cfg, Date.now)] },
    );
  return { w, hook, clock, app };
}

describe('a receiver that is down for a long time', () => {
  it('the default retry schedule is Standard Webhooks\' own', () => {
    expect(DEFAULT_RETRY_SCHEDULE_MS).toEqual([5e3, 5 * MIN, 30 * MIN, 2 * HOUR, 5 * HOUR, 10 * HOUR, 14 * HOUR, 20 * HOUR, 24 * HOUR]);
  });

  it('schedules a retry at a whole millisecond whatever the jitter (a time is BIGINT on PostgreSQL)', () => {
    const failed = { ok: false, retryable: true, statusCode: 503, error: 'HTTP 503' } as const;
    for (const r of [0, 0.123456, 0.5, 0.987654]) {
      const step = nextStep(failed, 1, [5_001, 300_000], 1_795_508_835_000, () => r);
      expect(step.state === 'pending' && Number.isInteger(step.nextAttemptAt)).toBe(true);
    }
  });

  it('a server\'s Retry-After counts up to 24 hours: a 503 asking for ten years is tried again every day, and the schedule still ends in a dead letter', () => {
    const tenYears = { ok: false, retryable: true, statusCode: 503, error: 'HTTP 503', retryAfterMs: 315_360_000_000 } as const;
    const start = 1_795_508_835_000;
    let at = start;
    let attempt = 1;
    for (;;) {
      const step = nextStep(tenYears, attempt, DEFAULT_RETRY_SCHEDULE_MS, at, () => 0.5);
      if (step.state !== 'pending') break;
      expect(step.nextAttemptAt).toBe(at + 24 * HOUR);
      at = step.nextAttemptAt;
      attempt++;
    }
    expect(attempt).toBe(DEFAULT_RETRY_SCHEDULE_MS.length + 1);
    expect(at - start).toBe(9 * 24 * HOUR);
    // A shorter wait is still honoured as asked.
    expect(nextStep({ ...tenYears, retryAfterMs: 3 * HOUR }, 1, DEFAULT_RETRY_SCHEDULE_MS, start, () => 0.5)).toEqual({ state: 'pending', nextAttemptAt: start + 3 * HOUR });
  });

  it('a 429 asking for ten years holds the later messages to its endpoint for 24 hours at most', async () => {
    let now = 1_795_508_835_000;
    const pacer = new Pacer({ label: 'Test', minIntervalMs: 0, now: () => now, sleep: async (ms) => void (now += ms) });
    const delivered = async () => ({ ok: true, statusCode: 200 }) as const;
    await pacer.run(async () => ({ ok: false, retryable: true, statusCode: 429, error: 'HTTP 429', retryAfterMs: 315_360_000_000 }));
    expect(await pacer.run(delivered)).toMatchObject({ ok: false, retryable: true, statusCode: null, retryAfterMs: 24 * HOUR });
    now += 24 * HOUR;
    expect(await pacer.run(delivered)).toEqual({ ok: true, statusCode: 200 });
  });

  it('down for a simulated day, it gets every event afterwards: each id at least once, none missing, none dead-lettered', async () => {
    const down = { value: true };
    const { w, hook, clock, app: makeApp } = await setup(down);
    const app = await makeApp();
    await app.scheduler.runAll(); // baseline
    w.sim.world.setHealth(1, { status: 'offline' });
    await app.scheduler.runAll(); // a real poll's event, too
    const published: HostwatchEvent[] = [];
    for (let step = 0; step < (24 * HOUR) / (10 * MIN); step++) {
      if (step % 12 === 0) {
        for (const k of [0, 1]) {
          // Sites 2 and 3: site 1 is offline, which holds its other events back (inhibition).
          const e = siteEvent(`day-${step}-${k}`, 2 + k, { at: clock.t });
          await app.notifier.publish(e);
          published.push(e);
        }
      }
      await app.worker.deliverDue();
      clock.advance(10 * MIN);
    }
    const all = rows<{ id: string }>(w, 'SELECT id FROM events').map((r) => r.id);
    expect(all).toHaveLength(published.length + 1);
    expect(hook.accepted()).toHaveLength(0);
    expect(new Set(hook.requests.map((r) => r.id))).toEqual(new Set(all)); // each was tried
    expect(rows<{ n: number }>(w, "SELECT count(*) AS n FROM outbox WHERE state = 'pending'")[0]!.n).toBe(all.length);

    down.value = false;
    for (let i = 0; i < (4 * 24 * HOUR) / (10 * MIN) && app.worker !== undefined; i++) {
      await app.worker.deliverDue();
      if (rows<{ n: number }>(w, "SELECT count(*) AS n FROM outbox WHERE state = 'pending'")[0]!.n === 0) break;
      clock.advance(10 * MIN);
    }
    expect(hook.acceptedIds()).toEqual(new Set(all));
    expect(rows<{ state: string; n: number }>(w, 'SELECT state, count(*) AS n FROM outbox GROUP BY state')).toEqual([{ state: 'delivered', n: all.length }]);
    for (const r of hook.requests) expect(r.signatureError).toBeNull();
    // The first event was attempted on the schedule: gaps grow, each within ±20% of its step (plus the 10-minute loop).
    const first = rows<{ at: number }>(w, `SELECT a.at FROM delivery_attempts a JOIN outbox o ON o.id = a.outbox_id WHERE o.event_id = '${published[0]!.id}' ORDER BY a.id`).map((r) => r.at);
    const gaps = first.slice(1).map((t, i) => t - first[i]!);
    gaps.forEach((gap, i) => {
      if (i >= 2) {
        expect(gap, `gap ${i}`).toBeGreaterThanOrEqual(DEFAULT_RETRY_SCHEDULE_MS[i]! * 0.8);
        expect(gap, `gap ${i}`).toBeLessThanOrEqual(DEFAULT_RETRY_SCHEDULE_MS[i]! * 1.2 + 10 * MIN);
      }
    });
  });

  it('a restart in the middle of the retry schedule resumes it: the next attempt waits for its time, and counts on', async () => {
    const down = { value: true };
    const { w, hook, clock, app: makeApp } = await setup(down);
    const first = await makeApp();
    const e = siteEvent('restart', 3, { at: clock.t });
    await first.notifier.publish(e);
    await first.worker.deliverDue(); // attempt 1
    clock.advance(6_100);
    await first.worker.deliverDue(); // attempt 2 (5 s)
    clock.advance(6.1 * MIN);
    await first.worker.deliverDue(); // attempt 3 (5 m)
    expect(hook.requests).toHaveLength(3);
    await first.stop();

    const [pending] = rows<{ attempts: number; next_attempt_at: number }>(w, 'SELECT attempts, next_attempt_at FROM outbox');
    expect(pending!.attempts).toBe(3);
    const wait = pending!.next_attempt_at - clock.t;
    expect(wait).toBeGreaterThanOrEqual(0.8 * 30 * MIN);
    expect(wait).toBeLessThanOrEqual(1.2 * 30 * MIN);

    down.value = false;
    const second = await makeApp();
    clock.advance(wait - 1_000);
    await second.worker.deliverDue();
    expect(hook.requests).toHaveLength(3); // not yet due
    clock.advance(1_000);
    await second.worker.deliverDue();
    expect(hook.requests).toHaveLength(4);
    expect(hook.acceptedIds()).toEqual(new Set([e.id]));
    expect(rows<{ attempt: number; outcome: string }>(w, 'SELECT attempt, outcome FROM delivery_attempts ORDER BY id')).toEqual([
      { attempt: 1, outcome: 'retry' },
      { attempt: 2, outcome: 'retry' },
      { attempt: 3, outcome: 'retry' },
      { attempt: 4, outcome: 'delivered' },
    ]);
  });

  it('a channel that fails for longer than disable_after is disabled, with an operator event, and its rows are dead-lettered with the reason', async () => {
    const down = { value: true };
    const { w, hook, clock, app: makeApp } = await setup(down, {
      channels: [{ name: 'hooks', type: 'webhook', url: 'http://127.0.0.1:9/unused', secret: TEST_SECRET }, { name: 'log', type: 'console' }],
      delivery: { disable_after: '1d' },
    });
    const app = await makeApp();
    const e = siteEvent('dis', 1, { at: clock.t });
    await app.notifier.publish(e);
    // Attempts at 0, 5 s, 5 m, 30 m, 2 h, 5 h, 10 h (17.6 h in), then 14 h later: past the day.
    for (let i = 0; i < 40 * 6; i++) {
      await app.worker.deliverDue();
      clock.advance(10 * MIN);
    }
    const state = rows<{ channel: string; disabled_reason: string; failing_since: number }>(w, 'SELECT channel, disabled_reason, failing_since FROM channel_state');
    expect(state).toHaveLength(1);
    expect(state[0]!.disabled_reason).toMatch(/^failing without a success since .*Z; last error: HTTP 503: maintenance$/);
    const ops = rows<{ body: string }>(w, "SELECT body FROM events WHERE type = 'hostwatch.channel.disabled'").map((r) => JSON.parse(r.body) as HostwatchEvent);
    expect(ops).toHaveLength(1);
    expect(ops[0]!.data).toMatchObject({ channel: 'hooks', severity: 'critical' });
    const requestsAtDisable = hook.requests.length;
    const box = rows<{ event_id: string; channel: string; state: string; last_error: string | null }>(w, 'SELECT event_id, channel, state, last_error FROM outbox ORDER BY id');
    // The event is dead on the disabled channel; the operator event reached the console.
    expect(box.find((b) => b.event_id === e.id && b.channel === 'hooks')!.state).toBe('dead');
    expect(box.find((b) => b.event_id === ops[0]!.id && b.channel === 'log')!.state).toBe('delivered');
    // Not queued to the channel it is about (where it could only be dead-lettered, or sent there by redeliver --dead).
    expect(box.find((b) => b.event_id === ops[0]!.id && b.channel === 'hooks')).toBeUndefined();
    down.value = false;
    clock.advance(HOUR);
    await app.worker.deliverDue();
    expect(hook.requests).toHaveLength(requestsAtDisable);
  });
});
