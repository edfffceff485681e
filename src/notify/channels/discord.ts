import type { DiscordChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, header, jsonOf, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider, type Verdict } from './http.js';
import { cut, escapedCut, moreLine, renderItem, subjectOf, summaryText, type ItemText } from './render.js';

/**
 * A Discord webhook: one embed per event (up to 10 a message) and
 * `allowed_mentions: { parse: [] }`, so no text can ping anyone; every API text is
 * Markdown-escaped besides, so `@everyone`, `<@id>`, `[x](url)` and `**bold**` show as
 * typed. Discord's rate-limit headers pace the next message (docs/channels.md).
 */

/** Discord's documented limits (Execute Webhook, Embed Limits). */
export const DISCORD_LIMITS = { content: 2000, embeds: 10, title: 256, description: 4096, footer: 2048, total: 6000 } as const;
/** At most one message a second per webhook, and never while the rate-limit bucket is empty. */
export const DISCORD_MIN_INTERVAL_MS = 1000;

/**
 * Escape one character for Discord Markdown: every Markdown, mention and link character
 * gets a backslash, which Discord drops when it shows the text. `\@everyone` is text,
 * `\<@1>` is not a mention, `http\://` is not a link.
 */
export function escapeDiscord(char: string): string {
  return /[\\*_~`|<>#\-[\]()@:.!+]/.test(char) ? `\\${char}` : char;
}

const COLOR: Record<string, number> = { critical: 0xd32f2f, warning: 0xf57c00, info: 0x1976d2 };
const RESOLVED = 0x388e3c;

/** The most of an event's place shown. */
const WHERE_MAX = 300;

/**
 * The webhook body for a group of events: a heading, one embed per event (the first 10,
 * all within 6000 characters together) and a line saying how many were left out.
 */
export function discordMessage(events: readonly HostwatchEvent[], text: ItemText = summaryText) {
  const shown = events.slice(0, DISCORD_LIMITS.embeds);
  // Each embed gets an equal share of the 6000 characters all embeds may hold together.
  const share = Math.floor(DISCORD_LIMITS.total / shown.length);
  const embeds = shown.map((e) => {
    const i = renderItem(e, text);
    const title = escapedCut(`${i.icon} ${i.title}`, DISCORD_LIMITS.title, escapeDiscord);
    const footer = `hostwatch · ${i.id}`;
    const where = `\n\n${escapedCut(i.where, WHERE_MAX, escapeDiscord)}`;
    const room = Math.min(DISCORD_LIMITS.description, share - title.length - footer.length) - where.length;
    return {
      title,
      description: escapedCut(i.summary, Math.max(1, room), escapeDiscord) + where,
      color: e.data.status === 'resolved' ? RESOLVED : (COLOR[i.severity] ?? COLOR['info']),
      timestamp: e.time,
      // A footer shows no Markdown, so it holds only our own text.
      footer: { text: footer },
    };
  });
  const heading = `**hostwatch**: ${escapedCut(subjectOf(events, text).replace(/^\[hostwatch\] /, ''), 1500, escapeDiscord)}`;
  const more = events.length > shown.length ? `\n${moreLine(events.length - shown.length)}` : '';
  return { content: cut(heading + more, DISCORD_LIMITS.content), embeds, allowed_mentions: { parse: [] as string[] } };
}

/**
 * What Discord's answer means. A deleted webhook (404, code 10015) or a bad token (401,
 * code 50027) is gone for good: Discord asks not to call it again, so the channel is
 * disabled. A refused body (400, code 50035) is dead-lettered. 429 waits for
 * `retry_after` (the body's seconds, else Retry-After).
 */
export function judgeDiscord(answer: HttpAnswer, now: number): Verdict {
  const json = jsonOf(answer.body);
  const detail = detailOf(answer.body, (j) => (typeof j['message'] === 'string' ? `${j['message']}${j['code'] !== undefined ? ` (code ${String(j['code'])})` : ''}` : null));
  const seconds = typeof json?.['retry_after'] === 'number' ? (json['retry_after'] as number) : null;
  const retryAfterMs = seconds !== null ? Math.ceil(seconds * 1000) : retryAfterHeader(answer, now);
  return standardVerdict(answer.status, detail, retryAfterMs, [401, 403, 404]);
}

/** When Discord says the webhook's bucket is empty, the time it refills (X-RateLimit-Reset-After). */
export function discordHoldUntil(answer: HttpAnswer, now: number): number | null {
  if (header(answer, 'x-ratelimit-remaining') !== '0') return null;
  const after = Number(header(answer, 'x-ratelimit-reset-after'));
  return Number.isFinite(after) && after > 0 ? now + Math.ceil(after * 1000) : null;
}

/** The Discord provider for a channel. `wait=true` makes Discord confirm the message was saved (or say why not). */
export function discordProvider(cfg: DiscordChannelConfig, text: ItemText = summaryText): Provider {
  const url = new URL(cfg.url);
  url.searchParams.set('wait', 'true');
  return {
    label: 'Discord',
    groups: true,
    minIntervalMs: DISCORD_MIN_INTERVAL_MS,
    request: (events) => ({ url: url.toString(), headers: { 'content-type': 'application/json' }, body: JSON.stringify(discordMessage(events, text)) }),
    judge: judgeDiscord,
    holdUntil: discordHoldUntil,
  };
}
