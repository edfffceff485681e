/**
 * The Telegram Bot API on loopback: POST /bot{token}/sendMessage with JSON. A wrong token
 * is 401 `{"ok":false,"error_code":401,"description":"Unauthorized"}`; an unknown chat 400
 * "Bad Request: chat not found". With parse_mode HTML the text is parsed the way the Bot
 * API documents ("HTML style"): only its tags, only the entities &lt; &gt; &amp; &quot;
 * and numeric ones, every other `<` `>` `&` escaped; else 400 "Bad Request: can't parse
 * entities: …". The text may hold 1-4096 characters after parsing; else 400 "Bad
 * Request: message is too long". A success returns the Message, with the text as shown
 * and its entities.
 */
import { startFake, type Arrival, type Fake } from './server.js';

export interface FakeTelegram extends Fake {
  /** The API address to configure (`api_url`). */
  url: string;
  token: string;
  /** What each accepted message showed: its text after parsing, and the entities the HTML made. */
  shown: Array<{ chatId: number | string; text: string; entities: Array<{ type: string; offset: number; length: number }> }>;
}

const TAGS: Record<string, string> = {
  b: 'bold', strong: 'bold', i: 'italic', em: 'italic', u: 'underline', ins: 'underline', s: 'strikethrough', strike: 'strikethrough', del: 'strikethrough',
  'tg-spoiler': 'spoiler', span: 'spoiler', a: 'text_link', code: 'code', pre: 'pre', blockquote: 'blockquote', 'tg-emoji': 'custom_emoji',
};
const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"' };

/** Parse Telegram HTML into the text shown and its entities, or the Bot API's error. */
export function parseTelegramHtml(html: string): { text: string; entities: Array<{ type: string; offset: number; length: number }> } | { error: string } {
  let text = '';
  const stack: Array<{ tag: string; offset: number }> = [];
  const entities: Array<{ type: string; offset: number; length: number }> = [];
  let i = 0;
  const byteOffset = (k: number) => Buffer.byteLength(html.slice(0, k));
  while (i < html.length) {
    const c = html[i]!;
    if (c === '<') {
      const m = /^<(\/?)([a-zA-Z-]+)((?:\s+[a-z-]+(?:="[^"]*")?)*)\s*>/.exec(html.slice(i));
      if (!m) return { error: `Bad Request: can't parse entities: Unexpected character "<" at byte offset ${byteOffset(i)}` };
      const [all, close, tag] = m as unknown as [string, string, string];
      const name = tag.toLowerCase();
      if (!(name in TAGS)) return { error: `Bad Request: can't parse entities: Unsupported start tag "${name}" at byte offset ${byteOffset(i)}` };
      if (close) {
        const open = stack.pop();
        if (!open || open.tag !== name) return { error: `Bad Request: can't parse entities: Unmatched end tag at byte offset ${byteOffset(i)}, expected "</${open?.tag ?? ''}>", found "</${name}>"` };
        entities.push({ type: TAGS[name]!, offset: open.offset, length: text.length - open.offset });
      } else stack.push({ tag: name, offset: text.length });
      i += all.length;
    } else if (c === '&') {
      const m = /^&(?:([a-z]+)|#(\d+)|#x([0-9a-fA-F]+));/.exec(html.slice(i));
      if (!m || (m[1] !== undefined && !(m[1] in NAMED))) return { error: `Bad Request: can't parse entities: Can't find end of the entity starting at byte offset ${byteOffset(i)}` };
      text += m[1] !== undefined ? NAMED[m[1]]! : String.fromCodePoint(m[2] !== undefined ? Number(m[2]) : parseInt(m[3]!, 16));
      i += m[0].length;
    } else if (c === '>') {
      return { error: `Bad Request: can't parse entities: Unexpected character ">" at byte offset ${byteOffset(i)}` };
    } else {
      text += c;
      i++;
    }
  }
  if (stack.length > 0) return { error: `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "${stack.at(-1)!.tag}"` };
  return { text, entities };
}

/** Start a fake Bot API for one bot token and the chats it may write to. */
export async function fakeTelegram(chats: Array<number | string>): Promise<FakeTelegram> {
  const token = '7012345678:AAHk3Vb_q9Zx-t2LmNoPqRsTuVwXyZ01234';
  const shown: FakeTelegram['shown'] = [];
  const bad = (code: number, description: string, parameters?: object) => ({ status: code, body: { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) } });
  const check = (a: Arrival): string[] => {
    const m = /^\/bot([^/]+)\/sendMessage$/.exec(a.path);
    if (a.method !== 'POST' || !m) return ['404 Not Found'];
    if (m[1] !== token) return ['401 Unauthorized'];
    const j = a.json as { chat_id?: unknown; text?: unknown; parse_mode?: unknown } | undefined;
    if (!j || typeof j.text !== 'string' || j.text === '') return ['400 Bad Request: message text is empty'];
    if (!chats.includes(j.chat_id as number | string)) return ['400 Bad Request: chat not found'];
    const parsed = j.parse_mode === 'HTML' ? parseTelegramHtml(j.text) : { text: j.text, entities: [] };
    if ('error' in parsed) return [`400 ${parsed.error}`];
    if (parsed.text.length > 4096) return ['400 Bad Request: message is too long'];
    return [];
  };
  const fake = await startFake({
    check,
    refuse: (_a, problems) => {
      const [code, ...words] = problems[0]!.split(' ');
      return bad(Number(code), words.join(' '));
    },
    accept: (a) => {
      const j = a.json as { chat_id: number | string; text: string; parse_mode?: string };
      const parsed = j.parse_mode === 'HTML' ? (parseTelegramHtml(j.text) as { text: string; entities: FakeTelegram['shown'][number]['entities'] }) : { text: j.text, entities: [] };
      shown.push({ chatId: j.chat_id, ...parsed });
      return {
        status: 200,
        body: { ok: true, result: { message_id: a.n, from: { id: 7012345678, is_bot: true, first_name: 'hostwatch', username: 'hostwatch_bot' }, chat: { id: j.chat_id, type: 'supergroup' }, date: Math.floor(Date.now() / 1000), text: parsed.text, entities: parsed.entities } },
      };
    },
  });
  return Object.assign(fake, { url: fake.origin, token, shown });
}

/** The Bot API's 429 answer. */
export function telegramTooMany(seconds: number) {
  return { status: 429, body: { ok: false, error_code: 429, description: `Too Many Requests: retry after ${seconds}`, parameters: { retry_after: seconds } } };
}
