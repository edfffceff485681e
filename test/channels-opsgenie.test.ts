/**
 * The Opsgenie channel (Alert API) against a loopback Opsgenie that checks GenieKey auth
 * and every documented field limit and keeps alerts by alias: create on firing, close by
 * alias on resolution, the US and EU addresses, and what each answer does.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { OPSGENIE_LIMITS, opsgenieAlert } from '../src/notify/channels/opsgenie.js';
import { siteEvent } from './events-fixture.js';
import { fakeOpsgenie, type FakeOpsgenie } from './fakes/opsgenie.js';
import { channelWorld, everythingStored } from './fakes/world.js';
import { names, rows, startWorld } from './harness.js';

const API_KEY = 'eb243592-faa2-4ba2-a551-1afdf565c889';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function opsgenie(): Promise<FakeOpsgenie> {
  const og = await fakeOpsgenie(API_KEY);
  cleanups.push(() => og.close());
  return og;
}

const channel = (og: FakeOpsgenie, key = API_KEY) => ({ name: 'genie', type: 'opsgenie', api_key: key, api_url: og.url, timeout: '2s' });

describe('the Opsgenie channel', () => {
  it('creates an alert with the alert id as alias on firing, and closes it by alias when it resolves', async () => {
    const og = await opsgenie();
    const w = await startWorld();
    cleanups.push(() => w.close());
    const app = await w.app({ channels: [channel(og)] });
    await app.runOnce();
    w.sim.world.setHealth(3, { status: 'offline' });
    await app.runOnce();
    w.sim.world.setHealth(3, { status: 'online' });
    await app.runOnce();
    expect(names(w.events)).toEqual(['site.offline:firing', 'site.offline:resolved']);
    const fired = w.events[0]!;
    expect(og.arrivals.map((a) => [a.path, a.query.get('identifierType'), a.problems])).toEqual([
      ['/v2/alerts', null, []],
      [`/v2/alerts/${fired.id}/close`, 'alias', []],
    ]);
    expect(og.arrivals[0]!.json).toMatchObject({ alias: fired.id, priority: 'P1', message: fired.data.summary, entity: fired.data.domain, tags: ['hostwatch', 'critical', 'site.offline'] });
    expect(og.alerts).toEqual([{ alias: fired.id, message: fired.data.summary, priority: 'P1', status: 'closed', count: 1 }]);
    expect(og.arrivals.every((a) => a.headers['authorization'] === `GenieKey ${API_KEY}`)).toBe(true);
  });

  it('uses api.opsgenie.com by default and api.eu.opsgenie.com for region: eu; region and api_url together are an error', () => {
    const parse = (extra: string) =>
      parseConfig(`api: { base_url: https://panel.example.com, key: k }\nchannels:\n  - { name: g, type: opsgenie, api_key: abc-123${extra} }\n`, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    const urlOf = (r: ReturnType<typeof parse>) => (r.ok && r.config.channels[0]!.type === 'opsgenie' ? r.config.channels[0]!.api_url : r);
    expect(urlOf(parse(''))).toBe('https://api.opsgenie.com');
    expect(urlOf(parse(', region: eu'))).toBe('https://api.eu.opsgenie.com');
    expect(urlOf(parse(', api_url: "http://127.0.0.1:9/"'))).toBe('http://127.0.0.1:9');
    const both = parse(', region: eu, api_url: "http://127.0.0.1:9"');
    expect(both.ok ? [] : both.errors.map((e) => `${e.line}: ${e.path}: ${e.message}`)).toEqual([
      '3: channels[0].api_url: must not be set together with region: region picks the API address, api_url names one (for a proxy or a test) (got "http://127.0.0.1:9")',
    ]);
    const region = parse(', region: asia');
    expect(region.ok ? [] : region.errors.map((e) => e.message)).toEqual(['must be us (api.opsgenie.com, the default) or eu (api.eu.opsgenie.com) (got "asia")']);
  });

  it('keeps every field within Opsgenie\'s limits, cut on a character boundary', () => {
    const huge = siteEvent('h', 1, { summary: `${'m'.repeat(128)}😀${'n'.repeat(20_000)}`, domain: `${'d'.repeat(700)}.example` });
    const body = opsgenieAlert(huge);
    expect(body.message).toBe(`${'m'.repeat(128)}…`);
    expect(body.description.length).toBeLessThanOrEqual(OPSGENIE_LIMITS.description);
    expect(body.entity.length).toBeLessThanOrEqual(OPSGENIE_LIMITS.entity);
    expect(Object.entries(body.details).reduce((n, [k, v]) => n + k.length + v.length, 0)).toBeLessThanOrEqual(OPSGENIE_LIMITS.details);
  });

  it('a key Opsgenie refuses (401) disables the channel and the key appears nowhere', async () => {
    const og = await opsgenie();
    const wrong = '00000000-1111-2222-3333-444455556666';
    const { w, app } = await channelWorld([channel(og, wrong)]);
    cleanups.push(() => w.close());
    await app.notifier.publish(siteEvent('k', 1, { status: 'firing' }));
    await app.worker.drain(2_000);
    expect(og.arrivals.map((a) => a.status)).toEqual([401]);
    expect(rows<{ disabled_reason: string }>(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'genie'")).toEqual([
      { disabled_reason: 'Opsgenie HTTP 401: Could not authenticate (the channel is misconfigured or gone)' },
    ]);
    for (const text of [everythingStored(w), w.logs.text]) expect(text).not.toContain(wrong);
  });

  it('a body Opsgenie refuses (422) is dead-lettered with its errors; 429 is retried after its rate-limit period', async () => {
    const og = await opsgenie();
    const { w, app, clock } = await channelWorld([channel(og)]);
    cleanups.push(() => w.close());
    og.respond((a) =>
      a.n === 1
        ? { status: 422, body: { message: 'Request body is not processable. Please check the errors.', errors: { message: 'Message can not be empty.' }, took: 0.002, requestId: 'r1' } }
        : a.n === 2
          ? { status: 429, headers: { 'x-ratelimit-state': 'THROTTLED', 'x-ratelimit-period-in-sec': '60' }, body: { message: 'You are making too many requests! To avoid errors, we recommend you limit requests.', took: 0, requestId: 'r2' } }
          : undefined,
    );
    await app.notifier.publish(siteEvent('a', 1));
    await app.worker.deliverDue();
    await app.notifier.publish(siteEvent('b', 1));
    await app.worker.deliverDue();
    const [dead, throttled] = rows<{ state: string; last_error: string; next_attempt_at: number }>(w, 'SELECT state, last_error, next_attempt_at FROM outbox ORDER BY id');
    expect(dead).toMatchObject({ state: 'dead', last_error: 'permanent failure: Opsgenie HTTP 422: Request body is not processable. Please check the errors. (message: Message can not be empty.)' });
    expect(throttled).toMatchObject({ state: 'pending' });
    expect(throttled!.next_attempt_at).toBe(clock.t + 60_000);
    clock.t = throttled!.next_attempt_at;
    await app.worker.deliverDue();
    expect(og.alerts).toHaveLength(1);
  });
});
