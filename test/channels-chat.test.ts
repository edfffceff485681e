/**
 * The chat channels (Teams, Discord, Telegram, ntfy) against loopback fakes of each
 * provider that check every request as the provider documents it: a group of events is
 * one accepted message; 120 events with 10 KB texts stay within the provider's limits;
 * each provider's permanent errors disable the channel, refused bodies are dead-lettered,
 * 429s wait for the provider's word; messages to one endpoint are paced.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { siteEvent } from './events-fixture.js';
import { fakeDiscord } from './fakes/discord.js';
import { fakeNtfy, NTFY_LIMITED } from './fakes/ntfy.js';
import type { Arrival, Fake, Reply } from './fakes/server.js';
import { cardTexts, fakeTeams } from './fakes/teams.js';
import { fakeTelegram, telegramTooMany } from './fakes/telegram.js';
import { channelWorld } from './fakes/world.js';
import { rows } from './harness.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const CHAT = -1001234567890;

/** One chat provider under test: its fake, its channel config, and how its answers look. */
interface ChatCase {
  type: string;
  start(): Promise<{ fake: Fake; channel: Record<string, unknown>; gone: Reply; refused: Reply; limited: Reply; limitedMs: number; text(a: Arrival): string }>;
  interval: number;
}

const CASES: ChatCase[] = [
  {
    type: 'teams',
    interval: 1000,
    async start() {
      const fake = await fakeTeams();
      return {
        fake,
        channel: { name: 'chat', type: 'teams', url: fake.url, timeout: '2s' },
        gone: { status: 404, body: { error: { code: 'WorkflowNotFound', message: "The workflow '4f1c2d8e9a7b' could not be found." } } },
        refused: { status: 400, body: { error: { code: 'TriggerInputSchemaMismatch', message: 'attachments must hold one card' } } },
        limited: { status: 429, headers: { 'retry-after': '17' }, body: { error: { code: 'WorkflowRequestsThrottled', message: 'Too many requests' } } },
        limitedMs: 17_000,
        text: (a) => cardTexts(a).map((t) => t.text).join('\n'),
      };
    },
  },
  {
    type: 'discord',
    interval: 1000,
    async start() {
      const fake = await fakeDiscord({ limit: 1_000 });
      return {
        fake,
        channel: { name: 'chat', type: 'discord', url: fake.url, timeout: '2s' },
        gone: { status: 404, body: { message: 'Unknown Webhook', code: 10015 } },
        refused: { status: 400, body: { code: 50035, errors: { embeds: { _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: 'Must be 10 or fewer in length.' }] } }, message: 'Invalid Form Body' } },
        limited: { status: 429, headers: { 'retry-after': '13' }, body: { message: 'You are being rate limited.', retry_after: 12.5, global: false } },
        limitedMs: 12_500,
        text: (a) => {
          const j = a.json as { content: string; embeds: Array<{ title: string; description: string }> };
          return [j.content, ...j.embeds.flatMap((e) => [e.title, e.description])].join('\n').replace(/\\([^A-Za-z0-9\s])/g, '$1');
        },
      };
    },
  },
  {
    type: 'telegram',
    interval: 3000,
    async start() {
      const fake = await fakeTelegram([CHAT]);
      return {
        fake,
        channel: { name: 'chat', type: 'telegram', bot_token: fake.token, chat_id: CHAT, api_url: fake.url, timeout: '2s' },
        gone: { status: 403, body: { ok: false, error_code: 403, description: 'Forbidden: bot was kicked from the supergroup chat' } },
        refused: { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: message is too long' } },
        limited: telegramTooMany(35),
        limitedMs: 35_000,
        text: (a) => fake.shown[fake.accepted().indexOf(a)]?.text ?? '',
      };
    },
  },
  {
    type: 'ntfy',
    interval: 1000,
    async start() {
      const fake = await fakeNtfy();
      return {
        fake,
        channel: { name: 'chat', type: 'ntfy', url: fake.url, token: fake.token, timeout: '2s' },
        gone: { status: 403, body: { code: 40301, http: 403, error: 'forbidden', link: 'https://ntfy.sh/docs/publish/#authentication' } },
        refused: { status: 400, body: { code: 40017, http: 400, error: 'invalid request: request body must be message JSON', link: 'https://ntfy.sh/docs/publish/#publish-as-json' } },
        limited: { status: 429, headers: { 'retry-after': '20' }, body: NTFY_LIMITED },
        limitedMs: 20_000,
        text: (a) => {
          const j = a.json as { title: string; message: string };
          return `${j.title}\n${j.message}`;
        },
      };
    },
  },
];

async function setup(c: ChatCase, config: Record<string, unknown> = {}) {
  const p = await c.start();
  const cw = await channelWorld([p.channel, { name: 'log', type: 'console' }], { config: { routes: [{ channels: ['chat', 'log'], group_wait: '0s' }], ...config } });
  cleanups.push(() => cw.w.close(), () => p.fake.close());
  return { ...p, ...cw };
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Every string inside a JSON value. */
function strings(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (v === null || typeof v !== 'object') return [];
  return Object.values(v).flatMap(strings);
}

const many = (n: number, summary: (i: number) => string): HostwatchEvent[] => Array.from({ length: n }, (_, i) => siteEvent(`m${i}`, 1, { summary: summary(i) }));

describe.each(CASES)('the $type channel', (c) => {
  it('sends a group of events as one message the provider accepts, naming every event', async () => {
    const { app, fake, text } = await setup(c);
    const events = many(3, (i) => `backup number ${i} failed`);
    for (const e of events) await app.notifier.publish(e);
    await app.worker.deliverDue();
    expect(fake.arrivals).toHaveLength(1);
    expect(fake.arrivals[0]!.problems).toEqual([]);
    expect(fake.accepted()).toHaveLength(1);
    for (let i = 0; i < 3; i++) expect(text(fake.arrivals[0]!)).toContain(`backup number ${i} failed`);
  });

  it('keeps 120 events of 10 KB each within the provider\'s limits, cuts on a character boundary and says how many were left out', async () => {
    const { app, fake, text } = await setup(c);
    for (const e of many(120, (i) => `${i} ${'x'.repeat(400)}${'😀'.repeat(5_000)}`)) await app.notifier.publish(e);
    await app.worker.deliverDue();
    expect(fake.arrivals).toHaveLength(1);
    expect(fake.arrivals[0]!.problems).toEqual([]);
    expect(fake.accepted()).toHaveLength(1);
    const shown = text(fake.arrivals[0]!);
    expect(shown).toMatch(/…and \d+ more events \(hostwatch events lists them all\)/);
    // No half emoji anywhere: a lone surrogate would be a broken character.
    expect(strings(fake.arrivals[0]!.json).filter((t) => LONE_SURROGATE.test(t))).toEqual([]);
  });

  it('an answer that says the endpoint is gone disables the channel, with an operator event to the others', async () => {
    const { w, app, fake, gone } = await setup(c);
    fake.respond(() => gone);
    await app.notifier.publish(siteEvent('g', 1));
    await app.worker.drain(2_000);
    expect(fake.arrivals).toHaveLength(1);
    const [state] = rows<{ disabled_reason: string }>(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat' AND disabled_at IS NOT NULL");
    expect(state!.disabled_reason).toMatch(/HTTP 40[34]: .+ \(the channel is misconfigured or gone\)$/);
    expect(w.events.map((e) => e.data.name)).toEqual(['channel.disabled']);
    const operator = rows<{ channel: string; state: string }>(w, "SELECT o.channel, o.state FROM outbox o JOIN events e ON e.id = o.event_id WHERE e.type = 'hostwatch.channel.disabled'");
    expect(operator).toContainEqual({ channel: 'log', state: 'delivered' });
    // Not to the channel it is about: a row there would only be dead-lettered, or sent there by redeliver --dead.
    expect(operator.filter((o) => o.channel === 'chat')).toEqual([]);
  });

  it('a body the provider refuses is dead-lettered with its words, and the channel stays enabled', async () => {
    const { w, app, fake, refused } = await setup(c);
    fake.respond((a) => (a.n === 1 ? refused : undefined));
    await app.notifier.publish(siteEvent('r', 1));
    await app.worker.deliverDue();
    const [row] = rows<{ state: string; last_error: string }>(w, "SELECT state, last_error FROM outbox WHERE channel = 'chat'");
    expect(row!.state).toBe('dead');
    expect(row!.last_error).toMatch(/^permanent failure: \w+ HTTP 400: /);
    expect(rows(w, 'SELECT * FROM channel_state WHERE disabled_at IS NOT NULL')).toEqual([]);
  });

  it('a 429 is retried after the provider\'s wait, and later messages to the endpoint wait too instead of being refused', async () => {
    const { w, app, fake, limited, limitedMs, clock } = await setup(c);
    fake.respond((a) => (a.n === 1 ? limited : undefined));
    await app.notifier.publish(siteEvent('l1', 1));
    await app.worker.deliverDue();
    const [row] = rows<{ state: string; next_attempt_at: number }>(w, "SELECT state, next_attempt_at FROM outbox WHERE channel = 'chat'");
    expect(row).toMatchObject({ state: 'pending', next_attempt_at: clock.t + limitedMs });
    // Another message meanwhile is not sent into the limit: it goes back to the outbox with the wait.
    clock.advance(1_000);
    await app.notifier.publish(siteEvent('l2', 2));
    await app.worker.deliverDue();
    expect(fake.arrivals).toHaveLength(1);
    clock.t = row!.next_attempt_at;
    await app.worker.deliverDue();
    expect(fake.arrivals.length).toBeGreaterThanOrEqual(2);
    expect(fake.accepted().length).toBe(fake.arrivals.length - 1);
  });

  it(`paces messages to one endpoint (${c.interval} ms apart)`, async () => {
    const { app, fake, sleeps } = await setup(c, { routes: [{ channels: ['chat'], group_wait: '0s', group_by: ['site_id'] }] });
    for (let site = 1; site <= 3; site++) await app.notifier.publish(siteEvent(`p${site}`, site));
    await app.worker.deliverDue();
    expect(fake.accepted()).toHaveLength(3);
    expect(sleeps).toEqual([c.interval, c.interval]);
  });
});

describe('poll --once', () => {
  it('sends the channel.disabled of a channel it disabled while draining to a grouped channel, instead of leaving it for group_wait and the next run', async () => {
    const [gone, teams] = await Promise.all([fakeDiscord(), fakeTeams()]);
    gone.respond(() => ({ status: 404, body: { message: 'Unknown Webhook', code: 10015 } }));
    const channels = [
      { name: 'dead', type: 'discord', url: gone.url, timeout: '2s' },
      { name: 'team', type: 'teams', url: teams.url, timeout: '2s' },
    ];
    const cw = await channelWorld(channels, { realTime: true, config: { routes: [{ channels: ['dead', 'team'], group_wait: '30s' }] } });
    cleanups.push(() => cw.w.close(), () => gone.close(), () => teams.close());
    cw.w.sim.world.setHealth(1, { status: 'offline' });
    const { pending } = await cw.app.runOnce();
    expect(pending).toBe(0);
    expect(gone.arrivals).toHaveLength(1);
    // The site's alert, then the notice that the other channel is disabled, both to Teams.
    const texts = teams.accepted().map((a) => cardTexts(a).map((t) => t.text).join('\n'));
    expect(texts).toHaveLength(2);
    expect(texts[0]).toContain('is offline');
    expect(texts[1]).toMatch(/dead/);
  });
});

describe('two channels to one endpoint', () => {
  it('share its pace: two Discord channels on one webhook (a template each) send 1 s apart, not together', async () => {
    const fake = await fakeDiscord({ limit: 1_000 });
    const channels = [
      { name: 'plain', type: 'discord', url: fake.url },
      { name: 'worded', type: 'discord', url: fake.url, template: '{{ data.summary }} (client view)' },
    ];
    const cw = await channelWorld(channels);
    cleanups.push(() => cw.w.close(), () => fake.close());
    await cw.app.notifier.publish(siteEvent('e1', 1));
    await cw.app.worker.deliverDue();
    expect(fake.accepted()).toHaveLength(2);
    expect(cw.sleeps).toEqual([1000]);
  });
});
