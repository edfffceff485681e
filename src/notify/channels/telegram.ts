import type { TelegramChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, jsonOf, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider, type Verdict } from './http.js';
import { cut, fitting, moreLine, renderItem, subjectOf, summaryText, type ItemText } from './render.js';

/**
 * A Telegram bot's sendMessage with `parse_mode: HTML`: our own words in <b> and <i>, every
 * API text escaped (`&`, `<`, `>` are the only characters Telegram's HTML needs escaped),
 * so a review spelling `<a href=…>` or `<b>` shows the tags as typed. `@name` and
 * `/command` get an invisible word joiner, so they are not made mentions or commands, and
 * link previews are off (docs/channels.md).
 */

/** Telegram's limit: 4096 characters of text after entities are parsed (tags do not count). */
export const TELEGRAM_MAX_CHARS = 4096;
/** Telegram allows about one message a second to a chat, and 20 a minute to a group. */
export const TELEGRAM_MIN_INTERVAL_MS = { private: 1000, group: 3000 } as const;
const WHERE_MAX = 300;
const TEXT_MAX = 1000;

/** Escape text for Telegram HTML. */
export function escapeTelegram(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A word joiner after `@` and after a `/` that starts a word: no mention, no bot command, same look. */
export function defang(text: string): string {
  return text.replace(/@/g, '@\u2060').replace(/(^|\s)\//g, '$1/\u2060');
}

/** API text as shown: defanged, cut to `max` visible characters, then escaped (so a cut never splits an entity). */
function shown(text: string, max: number): { html: string; length: number } {
  const visible = cut(defang(text), max);
  return { html: escapeTelegram(visible), length: visible.length };
}

/**
 * The message text for a group of events: a bold heading, then per event its title,
 * place, text and time, as many as fit in 4096 visible characters, and a "more" line.
 */
export function telegramText(events: readonly HostwatchEvent[], text: ItemText = summaryText): string {
  const heading = shown(subjectOf(events, text).replace(/^\[hostwatch\] /, ''), 400);
  const head = { html: `<b>hostwatch</b>: ${heading.html}\n`, length: 'hostwatch: '.length + heading.length + 1 };
  const items = events.map((e) => {
    const i = renderItem(e, text);
    const where = shown(i.where, WHERE_MAX);
    const said = shown(i.summary, TEXT_MAX);
    return {
      html: `\n${i.icon} <b>${escapeTelegram(i.title)}</b> · ${where.html}\n${said.html}\n<i>${i.time}</i>\n`,
      length: 1 + i.icon.length + 1 + i.title.length + 3 + where.length + 1 + said.length + 1 + i.time.length + 1,
    };
  });
  const n = fitting(
    items.map((i) => i.length),
    TELEGRAM_MAX_CHARS - head.length,
    moreLine(items.length).length + 2,
  );
  const more = n < items.length ? `\n${moreLine(items.length - n)}` : '';
  return head.html + items.slice(0, n).map((i) => i.html).join('') + more;
}

/**
 * What the Bot API's answer means (`{ok, error_code, description, parameters}`). A wrong
 * token (401, 404), a bot blocked or removed (403), a chat that does not exist or became a
 * supergroup (400 with migrate_to_chat_id) will never take a message: disabled. Other 400s
 * (a text Telegram refuses) are dead-lettered. 429 waits for parameters.retry_after.
 */
export function judgeTelegram(answer: HttpAnswer, now: number): Verdict {
  const json = jsonOf(answer.body);
  const params = (json?.['parameters'] ?? {}) as { retry_after?: unknown; migrate_to_chat_id?: unknown };
  const detail = detailOf(answer.body, (j) => (typeof j['description'] === 'string' ? j['description'] : null));
  if (answer.status === 400 && params.migrate_to_chat_id !== undefined) {
    return { kind: 'disable', detail: `${detail}; set chat_id to ${String(params.migrate_to_chat_id)}` };
  }
  if (answer.status === 400 && /chat not found|chat_id is empty|peer_id_invalid/i.test(detail)) return { kind: 'disable', detail };
  const retryAfterMs = typeof params.retry_after === 'number' ? params.retry_after * 1000 : retryAfterHeader(answer, now);
  const v = standardVerdict(answer.status, detail, retryAfterMs, [401, 403, 404]);
  if (v.kind === 'ok' && json?.['ok'] !== true) return { kind: 'retry', detail: detail || 'the answer did not say ok' };
  return v;
}

/** The Telegram provider for a channel. The token is part of the URL, so errors never name the URL. */
export function telegramProvider(cfg: TelegramChannelConfig, text: ItemText = summaryText): Provider {
  const chatId = /^-?\d+$/.test(cfg.chat_id) ? Number(cfg.chat_id) : cfg.chat_id;
  const group = String(cfg.chat_id).startsWith('-') || String(cfg.chat_id).startsWith('@');
  return {
    label: 'Telegram',
    groups: true,
    minIntervalMs: group ? TELEGRAM_MIN_INTERVAL_MS.group : TELEGRAM_MIN_INTERVAL_MS.private,
    request: (events) => ({
      url: `${cfg.api_url}/bot${cfg.bot_token}/sendMessage`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        chat_id: chatId,
        ...(cfg.message_thread_id !== null ? { message_thread_id: cfg.message_thread_id } : {}),
        text: telegramText(events, text),
        parse_mode: 'HTML',
        link_preview_options: { is_disabled: true },
      }),
    }),
    judge: judgeTelegram,
  };
}
