/**
 * The PagerDuty channel (Events API v2) against a loopback PagerDuty that checks every
 * event as PagerDuty documents it and keeps its alerts by dedup_key: trigger on firing,
 * resolve on resolution, one dedup_key per alert firing across retries, restarts and a
 * second instance; severity mapping; what each of PagerDuty's answers does.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { pagerDutyEvent } from '../src/notify/channels/pagerduty.js';
import { siteEvent } from './events-fixture.js';
import { fakePagerDuty, type FakePagerDuty } from './fakes/pagerduty.js';
import { channelWorld, everythingStored } from './fakes/world.js';
import { names, rows, startWorld } from './harness.js';

const ROUTING_KEY = 'R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function pagerduty(): Promise<FakePagerDuty> {
  const pd = await fakePagerDuty(ROUTING_KEY);
  cleanups.push(() => pd.close());
  return pd;
}

function channel(pd: FakePagerDuty, key = ROUTING_KEY): Record<string, unknown> {
  return { name: 'pager', type: 'pagerduty', routing_key: key, api_url: pd.url, timeout: '2s' };
}

type PdBody = { routing_key: string; event_action: string; dedup_key: string; payload?: { summary: string; severity: string; source: string; custom_details: Record<string, unknown> } };
const bodies = (pd: FakePagerDuty) => pd.accepted().map((a) => a.json as PdBody);

describe('the PagerDuty channel', () => {
  it('triggers on firing and resolves on resolution with one dedup_key, across a daemon restart', async () => {
    const pd = await pagerduty();
    const w = await startWorld();
    cleanups.push(() => w.close());
    const first = await w.app({ channels: [channel(pd)] });
    await first.runOnce();
    w.sim.world.setHealth(2, { status: 'offline' });
    await first.runOnce();
    await first.stop();
    // A new process on the same database sees the site come back.
    w.sim.world.setHealth(2, { status: 'online' });
    const second = await w.app({ channels: [channel(pd)] });
    await second.runOnce();
    expect(names(w.events)).toEqual(['site.offline:firing', 'site.offline:resolved']);
    const [fired] = w.events;
    expect(pd.arrivals.every((a) => a.problems.length === 0)).toBe(true);
    expect(bodies(pd).map((b) => [b.event_action, b.dedup_key])).toEqual([
      ['trigger', fired!.id],
      ['resolve', fired!.id],
    ]);
    expect(pd.alerts).toEqual([{ dedupKey: fired!.id, status: 'resolved', triggers: 1, summary: fired!.data.summary, severity: 'critical' }]);
    expect(pd.arrivals[0]!.headers['content-type']).toBe('application/json');
  });

  it('a second instance watching the same sites sends the same dedup_key, so PagerDuty opens one alert', async () => {
    const pd = await pagerduty();
    const w = await startWorld();
    cleanups.push(() => w.close());
    const a = await w.app({ channels: [channel(pd)] });
    const b = await w.app({ channels: [channel(pd)], storage: { path: join(w.dir, 'second.db') } });
    await a.runOnce();
    await b.runOnce();
    w.sim.world.setHealth(1, { status: 'offline' });
    await a.runOnce();
    await b.runOnce();
    expect(bodies(pd).map((x) => x.event_action)).toEqual(['trigger', 'trigger']);
    expect(pd.alerts).toHaveLength(1);
    expect(pd.alerts[0]!.triggers).toBe(2);
    w.sim.world.setHealth(1, { status: 'online' });
    await a.runOnce();
    expect(pd.alerts[0]!.status).toBe('resolved');
  });

  it('a retried trigger keeps its dedup_key: a 500, then a 429, then accepted, still one alert', async () => {
    const pd = await pagerduty();
    const { w, app, clock } = await channelWorld([channel(pd)]);
    cleanups.push(() => w.close());
    pd.respond((a) =>
      a.n === 1 ? { status: 500, body: 'Internal Server Error' } : a.n === 2 ? { status: 429, headers: { 'retry-after': '30' }, body: { status: 'throttle event', message: 'Request Limit Exceeded' } } : undefined,
    );
    await app.notifier.publish(siteEvent('r1', 1, { name: 'site.offline', severity: 'critical', status: 'firing' }));
    await app.worker.deliverDue();
    expect(rows<{ state: string; last_error: string }>(w, 'SELECT state, last_error FROM outbox')).toEqual([{ state: 'pending', last_error: 'PagerDuty HTTP 500: Internal Server Error' }]);
    clock.advance(6_000);
    await app.worker.deliverDue();
    const [after429] = rows<{ state: string; last_error: string; next_attempt_at: number }>(w, 'SELECT state, last_error, next_attempt_at FROM outbox');
    expect(after429).toMatchObject({ state: 'pending', last_error: 'PagerDuty HTTP 429: Request Limit Exceeded' });
    clock.t = after429!.next_attempt_at;
    await app.worker.deliverDue();
    expect(rows<{ state: string }>(w, 'SELECT state FROM outbox')).toEqual([{ state: 'delivered' }]);
    const keys = new Set(pd.arrivals.map((a) => (a.json as PdBody).dedup_key));
    expect(keys.size).toBe(1);
    expect(pd.alerts).toHaveLength(1);
  });

  it('a trigger that waits for its retry goes before the resolve queued after it, so the alert it opened is closed', async () => {
    const pd = await pagerduty();
    const { w, app, clock } = await channelWorld([channel(pd)]);
    cleanups.push(() => w.close());
    pd.respond((a) => (a.n === 1 ? { status: 503, body: 'Service Unavailable' } : undefined));
    const at = { name: 'site.offline', severity: 'critical', rule: 'site-offline', subject: 'sites/4/health' } as const;
    const firing = siteEvent('down', 4, { ...at, status: 'firing' });
    const fired = { ...firing, data: { ...firing.data, alert_id: firing.id } };
    const back = siteEvent('up', 4, { ...at, status: 'resolved' });
    await app.notifier.publish(fired);
    await app.worker.deliverDue();
    // PagerDuty is back, and the site recovered before the trigger's retry is due: the
    // resolve is due now, but waits for the trigger it closes.
    await app.notifier.publish({ ...back, data: { ...back.data, alert_id: firing.id } });
    await app.worker.deliverDue();
    expect(pd.arrivals).toHaveLength(1);
    expect(rows<{ state: string }>(w, 'SELECT state FROM outbox ORDER BY id')).toEqual([{ state: 'pending' }, { state: 'pending' }]);
    clock.advance(10_000);
    await app.worker.deliverDue();
    expect(bodies(pd).map((b) => b.event_action)).toEqual(['trigger', 'resolve']);
    expect(pd.alerts).toEqual([expect.objectContaining({ dedupKey: firing.id, status: 'resolved', triggers: 1 })]);
  });

  it('a resolve whose trigger was dead-lettered is not held back by it', async () => {
    const pd = await pagerduty();
    const { w, app } = await channelWorld([channel(pd)]);
    cleanups.push(() => w.close());
    // The trigger is refused for good (a 400 about the event): the resolve still goes.
    pd.respond((a) => (a.n === 1 ? { status: 400, body: { status: 'invalid event', message: 'Event object is invalid', errors: ['payload.summary is missing'] } } : undefined));
    const at = { name: 'site.offline', severity: 'critical', rule: 'site-offline', subject: 'sites/5/health' } as const;
    await app.notifier.publish(siteEvent('down5', 5, { ...at, status: 'firing' }));
    await app.notifier.publish(siteEvent('up5', 5, { ...at, status: 'resolved' }));
    await app.worker.deliverDue();
    expect(rows<{ state: string }>(w, 'SELECT state FROM outbox ORDER BY id')).toEqual([{ state: 'dead' }, { state: 'delivered' }]);
  });

  it('maps severity (critical, warning, info) and keeps the summary within 1024 characters, cut on a character boundary', () => {
    const sev = (severity: 'critical' | 'warning' | 'info') => pagerDutyEvent(siteEvent('s', 1, { severity, status: 'firing' }), ROUTING_KEY).payload!.severity;
    expect([sev('critical'), sev('warning'), sev('info')]).toEqual(['critical', 'warning', 'info']);
    const long = pagerDutyEvent(siteEvent('l', 1, { summary: `${'x'.repeat(1022)}😀 and more` }), ROUTING_KEY);
    expect(long.payload!.summary).toBe(`${'x'.repeat(1022)}…`);
    // A change event (no status) is a trigger keyed by its own id; a resolution carries no payload.
    const change = siteEvent('c', 1);
    expect(pagerDutyEvent(change, ROUTING_KEY)).toMatchObject({ event_action: 'trigger', dedup_key: change.id });
    const resolved: HostwatchEvent = { ...siteEvent('x', 1, { status: 'resolved' }) };
    resolved.data['alert_id'] = 'firing-id';
    expect(pagerDutyEvent(resolved, ROUTING_KEY)).toEqual({ routing_key: ROUTING_KEY, event_action: 'resolve', dedup_key: 'firing-id' });
  });

  it('an invalid routing key disables the channel with an operator event, and the key is in no error, log or row even when PagerDuty echoes it', async () => {
    const pd = await pagerduty();
    const wrong = 'W0NGK3YW0NGK3YW0NGK3YW0NGK3YW0NG';
    const { w, app } = await channelWorld([channel(pd, wrong), { name: 'log', type: 'console' }]);
    cleanups.push(() => w.close());
    pd.respond(() => ({ status: 400, body: { status: 'invalid event', message: 'Event object is invalid', errors: [`Invalid routing key ${wrong}`] } }));
    await app.notifier.publish(siteEvent('k1', 1, { status: 'firing' }));
    await app.worker.drain(2_000);
    expect(pd.arrivals).toHaveLength(1);
    expect(rows<{ disabled_reason: string }>(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'pager'")).toEqual([
      { disabled_reason: 'PagerDuty HTTP 400: Event object is invalid: Invalid routing key [REDACTED] (the channel is misconfigured or gone)' },
    ]);
    expect(w.events.map((e) => e.data.name)).toContain('channel.disabled');
    for (const text of [everythingStored(w), w.logs.text, JSON.stringify(w.events)]) expect(text).not.toContain(wrong);
  });

  it('a refused event (400 that is not about the key) is dead-lettered; the channel keeps working', async () => {
    const pd = await pagerduty();
    const { w, app } = await channelWorld([channel(pd)]);
    cleanups.push(() => w.close());
    pd.respond((a) => (a.n === 1 ? { status: 400, body: { status: 'invalid event', message: 'Event object is invalid', errors: ["'payload.summary' is missing"] } } : undefined));
    await app.notifier.publish(siteEvent('d1', 1));
    await app.notifier.publish(siteEvent('d2', 1));
    await app.worker.drain(2_000);
    expect(rows<{ state: string; last_error: string | null }>(w, 'SELECT state, last_error FROM outbox ORDER BY id')).toEqual([
      { state: 'dead', last_error: "permanent failure: PagerDuty HTTP 400: Event object is invalid: 'payload.summary' is missing" },
      { state: 'delivered', last_error: null },
    ]);
    expect(rows(w, 'SELECT * FROM channel_state WHERE disabled_at IS NOT NULL')).toEqual([]);
  });

  it('paces events to one integration key at one every half second', async () => {
    const pd = await pagerduty();
    const { w, app, sleeps } = await channelWorld([channel(pd)]);
    cleanups.push(() => w.close());
    for (let i = 0; i < 3; i++) await app.notifier.publish(siteEvent(`p${i}`, i + 1));
    await app.worker.deliverDue();
    expect(pd.accepted()).toHaveLength(3);
    expect(sleeps).toEqual([500, 500]);
  });
});
