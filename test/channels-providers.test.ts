/**
 * What is particular to each chat provider, against its loopback fake: Discord's
 * rate-limit headers and its request shape; Telegram's chats, topics and migrations;
 * ntfy's priorities, tags, tokens and self-hosted paths; the Teams card and its signature.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { siteEvent } from './events-fixture.js';
import { fakeDiscord } from './fakes/discord.js';
import { fakeNtfy } from './fakes/ntfy.js';
import { fakeTeams } from './fakes/teams.js';
import { fakeTelegram } from './fakes/telegram.js';
import { channelWorld, everythingStored } from './fakes/world.js';
import { rows } from './harness.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const bySite = { routes: [{ channels: ['chat'], group_wait: '0s', group_by: ['site_id'] }] };

describe('Discord', () => {
  it('waits for an empty rate-limit bucket to refill (X-RateLimit-Reset-After) instead of running into a 429', async () => {
    const discord = await fakeDiscord({ limit: 1, windowMs: 1_500 });
    const { w, app } = await channelWorld([{ name: 'chat', type: 'discord', url: discord.url }], { config: bySite, realTime: true });
    cleanups.push(() => w.close(), () => discord.close());
    await app.notifier.publish(siteEvent('a', 1));
    await app.notifier.publish(siteEvent('b', 2));
    const started = Date.now();
    await app.worker.deliverDue();
    expect(discord.accepted()).toHaveLength(2);
    expect(discord.limited).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_300);
  });

  it('asks Discord to confirm the message (wait=true) and never allows a mention', async () => {
    const discord = await fakeDiscord();
    const { w, app } = await channelWorld([{ name: 'chat', type: 'discord', url: discord.url }]);
    cleanups.push(() => w.close(), () => discord.close());
    await app.notifier.publish(siteEvent('a', 1, { status: 'resolved' }));
    await app.worker.drain(2_000);
    const [a] = discord.arrivals;
    expect(a!.query.get('wait')).toBe('true');
    expect(a!.status).toBe(200);
    expect(a!.json).toMatchObject({ allowed_mentions: { parse: [] }, embeds: [{ color: 0x388e3c, timestamp: '2026-11-21T00:00:00.000Z' }] });
  });

  it('a wrong webhook token (401, code 50027) disables the channel, and the token is stored nowhere', async () => {
    const discord = await fakeDiscord();
    const url = discord.url.replace(/\/[^/]+$/, '/bm90LXRoZS1yaWdodC10b2tlbi1hdC1hbGwtcmVhbGx5');
    const { w, app } = await channelWorld([{ name: 'chat', type: 'discord', url }]);
    cleanups.push(() => w.close(), () => discord.close());
    await app.notifier.publish(siteEvent('a', 1));
    await app.worker.drain(2_000);
    expect(rows(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'Discord HTTP 401: Invalid Webhook Token (code 50027) (the channel is misconfigured or gone)' },
    ]);
    expect(everythingStored(w)).not.toContain('bm90LXRoZS1yaWdodC10b2tlbi1hdC1hbGwtcmVhbGx5');
  });
});

describe('Telegram', () => {
  const CHAT = -1001112223334;

  async function telegram(chat: number | string = CHAT, extra: Record<string, unknown> = {}) {
    const tg = await fakeTelegram([CHAT, '@hostwatch_alerts']);
    const cw = await channelWorld([{ name: 'chat', type: 'telegram', bot_token: tg.token, chat_id: chat, api_url: tg.url, ...extra }]);
    cleanups.push(() => cw.w.close(), () => tg.close());
    return { tg, ...cw };
  }

  it('sends to a forum topic and to a public channel by name', async () => {
    const { tg, app } = await telegram(CHAT, { message_thread_id: 42 });
    await app.notifier.publish(siteEvent('t', 1));
    await app.worker.drain(2_000);
    expect(tg.arrivals[0]!.json).toMatchObject({ chat_id: CHAT, message_thread_id: 42, parse_mode: 'HTML' });
    const byName = await telegram('@hostwatch_alerts');
    await byName.app.notifier.publish(siteEvent('n', 1));
    await byName.app.worker.drain(2_000);
    expect(byName.tg.accepted().map((a) => (a.json as { chat_id: unknown }).chat_id)).toEqual(['@hostwatch_alerts']);
  });

  it('a group that became a supergroup disables the channel and names the new chat id', async () => {
    const { tg, w, app } = await telegram();
    tg.respond(() => ({ status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: group chat was upgraded to a supergroup chat', parameters: { migrate_to_chat_id: -1009998887776 } } }));
    await app.notifier.publish(siteEvent('m', 1));
    await app.worker.drain(2_000);
    expect(rows(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'Telegram HTTP 400: Bad Request: group chat was upgraded to a supergroup chat; set chat_id to -1009998887776 (the channel is misconfigured or gone)' },
    ]);
  });

  it('a chat the bot cannot find, or a wrong token, disables the channel; the token (part of the URL) is stored nowhere', async () => {
    const unknown = await telegram(-100555);
    await unknown.app.notifier.publish(siteEvent('u', 1));
    await unknown.app.worker.drain(2_000);
    expect(rows(unknown.w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'Telegram HTTP 400: Bad Request: chat not found (the channel is misconfigured or gone)' },
    ]);
    const tg = await fakeTelegram([CHAT]);
    const wrongToken = '7012345678:AAwrongwrongwrongwrongwrongwrong00';
    const bad = await channelWorld([{ name: 'chat', type: 'telegram', bot_token: wrongToken, chat_id: CHAT, api_url: tg.url }]);
    cleanups.push(() => bad.w.close(), () => tg.close());
    await bad.app.notifier.publish(siteEvent('w', 1));
    await bad.app.worker.drain(2_000);
    expect(rows(bad.w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'Telegram HTTP 401: Unauthorized (the channel is misconfigured or gone)' },
    ]);
    for (const text of [everythingStored(bad.w), bad.w.logs.text]) expect(text).not.toContain('AAwrongwrongwrongwrongwrongwrong00');
  });
});

describe('ntfy', () => {
  it('sets priority and tags from the worst event: 5 and rotating_light for a critical alert, 2 and white_check_mark when all is resolved', async () => {
    const ntfy = await fakeNtfy();
    const { w, app } = await channelWorld([{ name: 'chat', type: 'ntfy', url: ntfy.url, token: ntfy.token }], { config: bySite });
    cleanups.push(() => w.close(), () => ntfy.close());
    await app.notifier.publish(siteEvent('c', 1, { severity: 'critical', status: 'firing' }));
    await app.notifier.publish(siteEvent('r', 2, { severity: 'critical', status: 'resolved' }));
    await app.notifier.publish(siteEvent('w', 3, { severity: 'warning' }));
    await app.worker.drain(2_000);
    expect(ntfy.accepted().map((a) => a.json as { priority: number; tags: string[]; topic: string })).toEqual([
      expect.objectContaining({ priority: 5, tags: ['rotating_light', 'hostwatch'], topic: ntfy.topic }),
      expect.objectContaining({ priority: 2, tags: ['white_check_mark', 'hostwatch'] }),
      expect.objectContaining({ priority: 4, tags: ['warning', 'hostwatch'] }),
    ]);
    expect(ntfy.arrivals[0]!.headers['authorization']).toBe(`Bearer ${ntfy.token}`);
  });

  it('publishes to a self-hosted server under a path, and to an open topic without a token', async () => {
    const ntfy = await fakeNtfy({ token: null, path: '/push/' });
    const { w, app } = await channelWorld([{ name: 'chat', type: 'ntfy', url: ntfy.url }]);
    cleanups.push(() => w.close(), () => ntfy.close());
    await app.notifier.publish(siteEvent('s', 1));
    await app.worker.drain(2_000);
    expect(ntfy.accepted().map((a) => [a.path, a.headers['authorization']])).toEqual([['/push/', undefined]]);
  });

  it('a protected topic without a token answers 401 and disables the channel', async () => {
    const ntfy = await fakeNtfy();
    const { w, app } = await channelWorld([{ name: 'chat', type: 'ntfy', url: ntfy.url }]);
    cleanups.push(() => w.close(), () => ntfy.close());
    await app.notifier.publish(siteEvent('s', 1));
    await app.worker.drain(2_000);
    expect(rows(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'ntfy HTTP 401: unauthorized (code 40101) (the channel is misconfigured or gone)' },
    ]);
  });
});

describe('Teams', () => {
  it('posts a message with one Adaptive Card 1.4, colour-coded per event', async () => {
    const teams = await fakeTeams();
    const { w, app } = await channelWorld([{ name: 'chat', type: 'teams', url: teams.url }], { config: { routes: [{ channels: ['chat'], group_wait: '0s' }] } });
    cleanups.push(() => w.close(), () => teams.close());
    await app.notifier.publish(siteEvent('c', 1, { severity: 'critical', status: 'firing' }));
    await app.notifier.publish(siteEvent('r', 2, { severity: 'critical', status: 'resolved' }));
    await app.worker.drain(2_000);
    const body = teams.accepted()[0]!.json as { attachments: Array<{ contentType: string; content: { version: string; body: Array<{ type: string; style?: string }> } }> };
    expect(body.attachments[0]!.contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(body.attachments[0]!.content.version).toBe('1.4');
    expect(body.attachments[0]!.content.body.map((b) => b.style ?? b.type)).toEqual(['RichTextBlock', 'attention', 'good']);
  });

  it('a signature Teams refuses (401) disables the channel, and the signature is stored nowhere', async () => {
    const teams = await fakeTeams();
    const { w, app } = await channelWorld([{ name: 'chat', type: 'teams', url: teams.url.replace(teams.sig, 'AAAAbadsignaturebadsignaturebadsig000000000') }]);
    cleanups.push(() => w.close(), () => teams.close());
    await app.notifier.publish(siteEvent('s', 1));
    await app.worker.drain(2_000);
    expect(rows(w, "SELECT disabled_reason FROM channel_state WHERE channel = 'chat'")).toEqual([
      { disabled_reason: 'Teams HTTP 401: AuthorizationFailed: The authentication credentials are not valid. (the channel is misconfigured or gone)' },
    ]);
    expect(everythingStored(w)).not.toContain('AAAAbadsignaturebadsignaturebadsig000000000');
  });
});
