import type { NtfyChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider, type Verdict } from './http.js';
import { cut, cutBytes, fitting, moreLine, renderItem, subjectOf, summaryText, worstOf, type ItemText } from './render.js';

/**
 * An ntfy topic (ntfy.sh or self-hosted), published as JSON to the server's root URL with
 * the topic in the body, so titles in any script need no header encoding. Plain text
 * (`markdown: false`): ntfy shows it as written. Priority and tags follow the worst event
 * of the message; an access token goes in `Authorization: Bearer` (docs/channels.md).
 */

/** ntfy's limit: a message of at most 4096 bytes (longer ones would become attachments). */
export const NTFY_MAX_BYTES = 4096;
/** ntfy refills a publisher's requests at one per 5 s after a burst of 60; one a second keeps bursts short. */
export const NTFY_MIN_INTERVAL_MS = 1000;
const TITLE_MAX = 250;

/** Priority (1-5) and tag (an emoji shortcode ntfy shows as an icon) of the worst event. */
const LOOK = {
  CRITICAL: { priority: 5, tag: 'rotating_light' },
  WARNING: { priority: 4, tag: 'warning' },
  INFO: { priority: 3, tag: 'information_source' },
  RESOLVED: { priority: 2, tag: 'white_check_mark' },
} as const;

/** The server's publish URL and the topic of a topic URL (`https://ntfy.sh/alerts` → `https://ntfy.sh/`, `alerts`). */
export function ntfyTarget(topicUrl: string): { publishUrl: string; topic: string } {
  const url = new URL(topicUrl);
  const parts = url.pathname.split('/');
  const topic = parts.pop()!;
  url.pathname = `${parts.join('/')}/`;
  url.search = '';
  return { publishUrl: url.toString(), topic };
}

/** The JSON message for a group of events. */
export function ntfyMessage(events: readonly HostwatchEvent[], topic: string, text: ItemText = summaryText) {
  const lines = events.map((e) => {
    const i = renderItem(e, text);
    return `${i.icon} ${i.title} · ${cut(i.where, 300)}\n${cut(i.summary, 1000)}\n`;
  });
  const sizes = lines.map((l) => Buffer.byteLength(l) + 1);
  const n = fitting(sizes, NTFY_MAX_BYTES, Buffer.byteLength(moreLine(lines.length)) + 1);
  const body = lines.slice(0, n).join('\n') + (n < lines.length ? `\n${moreLine(lines.length - n)}` : '');
  const look = LOOK[worstOf(events)];
  return {
    topic,
    title: cut(`hostwatch: ${subjectOf(events, text).replace(/^\[hostwatch\] /, '')}`, TITLE_MAX),
    message: cutBytes(body.trim(), NTFY_MAX_BYTES),
    priority: look.priority,
    tags: [look.tag, 'hostwatch'],
    markdown: false,
  };
}

/**
 * What ntfy's answer means (`{code, http, error, link}`). 401/403: the token is wrong or
 * may not write the topic, 404: the URL is not an ntfy server: disabled. 400 and 413: the
 * message is refused: dead-lettered. 429 (limit reached) and 5xx: retried.
 */
export function judgeNtfy(answer: HttpAnswer, now: number): Verdict {
  const detail = detailOf(answer.body, (j) => (typeof j['error'] === 'string' ? `${j['error']}${j['code'] !== undefined ? ` (code ${String(j['code'])})` : ''}` : null));
  return standardVerdict(answer.status, detail, retryAfterHeader(answer, now), [401, 403, 404]);
}

/** The ntfy provider for a channel. */
export function ntfyProvider(cfg: NtfyChannelConfig, text: ItemText = summaryText): Provider {
  const { publishUrl, topic } = ntfyTarget(cfg.url);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (cfg.token) headers['authorization'] = `Bearer ${cfg.token}`;
  return {
    label: 'ntfy',
    groups: true,
    minIntervalMs: NTFY_MIN_INTERVAL_MS,
    request: (events) => ({ url: publishUrl, headers, body: JSON.stringify(ntfyMessage(events, topic, text)) }),
    judge: judgeNtfy,
  };
}
