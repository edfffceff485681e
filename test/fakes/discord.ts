/**
 * A Discord webhook on loopback: POST /api/webhooks/{id}/{token}, checked against
 * Discord's documented limits (Execute Webhook; Embed Limits): content ≤ 2000, at most 10
 * embeds, title ≤ 256, description ≤ 4096, footer ≤ 2048, all embed text ≤ 6000 together,
 * and content or embeds present. A refused body is 400 `{"code":50035,"errors":{…},
 * "message":"Invalid Form Body"}`; an unknown webhook 404 `{"message":"Unknown Webhook",
 * "code":10015}`; a wrong token 401 `{"message":"Invalid Webhook Token","code":50027}`.
 * It keeps a rate-limit bucket per webhook in real time and answers with Discord's
 * X-RateLimit-* headers, and 429 `{"message":"You are being rate limited.","retry_after":…,
 * "global":false}` with Retry-After when the bucket is empty. With `?wait=true` a success
 * is 200 with the message; without, 204.
 */
import { at, startFake, type Arrival, type Fake } from './server.js';

export interface FakeDiscord extends Fake {
  /** The webhook URL to configure. */
  url: string;
  /** Requests refused with a 429 because the bucket was empty (Discord counts these against you). */
  limited: number;
}

/** The characters Discord counts toward an embed's share of 6000. */
function embedChars(e: Record<string, unknown>): number {
  const s = (p: string) => String(at(e, p) ?? '').length;
  const fields = Array.isArray(e['fields']) ? (e['fields'] as Array<Record<string, unknown>>) : [];
  return s('title') + s('description') + s('footer.text') + s('author.name') + fields.reduce((n, f) => n + String(f['name'] ?? '').length + String(f['value'] ?? '').length, 0);
}

/** Start a fake Discord webhook with a bucket of `limit` requests per `windowMs`. */
export async function fakeDiscord(opts: { limit?: number; windowMs?: number } = {}): Promise<FakeDiscord> {
  const id = '112233445566778899';
  const token = 'dWx0cmEtc2VjcmV0LXdlYmhvb2stdG9rZW4tZm9yLXRlc3Rz';
  const limit = opts.limit ?? 5;
  const windowMs = opts.windowMs ?? 2000;
  let remaining = limit;
  let windowEnd = 0;
  const state = { limited: 0 };
  const bucketHeaders = (now: number): Record<string, string> => ({
    'x-ratelimit-limit': String(limit),
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': ((windowEnd) / 1000).toFixed(3),
    'x-ratelimit-reset-after': ((windowEnd - now) / 1000).toFixed(3),
    'x-ratelimit-bucket': 'f00dfeedcafe',
  });
  const check = (a: Arrival): string[] => {
    const m = /^\/api\/webhooks\/(\d+)\/([^/]+)$/.exec(a.path);
    if (a.method !== 'POST' || !m || m[1] !== id) return ['unknown webhook'];
    if (m[2] !== token) return ['invalid token'];
    const j = a.json as Record<string, unknown> | undefined;
    if (!j) return ['body: must be JSON'];
    const p: string[] = [];
    const embeds = (Array.isArray(j['embeds']) ? j['embeds'] : []) as Array<Record<string, unknown>>;
    if (typeof j['content'] === 'string' && j['content'].length > 2000) p.push('content: Must be 2000 or fewer in length.');
    if (!j['content'] && embeds.length === 0) p.push('content: Cannot send an empty message');
    if (embeds.length > 10) p.push('embeds: Must be 10 or fewer in length.');
    embeds.forEach((e, i) => {
      for (const [path, max] of [['title', 256], ['description', 4096], ['footer.text', 2048]] as const) {
        if (String(at(e, path) ?? '').length > max) p.push(`embeds.${i}.${path}: Must be ${max} or fewer in length.`);
      }
    });
    if (embeds.reduce((n, e) => n + embedChars(e), 0) > 6000) p.push('embeds: Embed size exceeds maximum size of 6000');
    return p;
  };
  const fake = await startFake({
    check,
    refuse: (_a, problems) =>
      problems[0] === 'unknown webhook'
        ? { status: 404, body: { message: 'Unknown Webhook', code: 10015 } }
        : problems[0] === 'invalid token'
          ? { status: 401, body: { message: 'Invalid Webhook Token', code: 50027 } }
          : { status: 400, body: { code: 50035, errors: Object.fromEntries(problems.map((p) => [p.split(':')[0]!, { _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: p }] }])), message: 'Invalid Form Body' } },
    accept: (a) => {
      const now = Date.now();
      if (now >= windowEnd) {
        remaining = limit;
        windowEnd = now + windowMs;
      }
      if (remaining === 0) {
        state.limited++;
        const after = (windowEnd - now) / 1000;
        return { status: 429, headers: { ...bucketHeaders(now), 'retry-after': String(Math.ceil(after)), 'x-ratelimit-scope': 'user' }, body: { message: 'You are being rate limited.', retry_after: after, global: false } };
      }
      remaining--;
      const message = { id: String(1_000_000 + a.n), type: 0, channel_id: '998877', webhook_id: id, ...(a.json as object) };
      return a.query.get('wait') === 'true' ? { status: 200, headers: bucketHeaders(now), body: message } : { status: 204, headers: bucketHeaders(now) };
    },
  });
  const out = Object.assign(fake, { url: `${fake.origin}/api/webhooks/${id}/${token}`, limited: 0 });
  Object.defineProperty(out, 'limited', { get: () => state.limited });
  return out;
}

/** The text Discord shows for Markdown source: backslash escapes dropped. */
export function discordShown(source: string): string {
  return source.replace(/\\([^A-Za-z0-9\s])/g, '$1');
}

/**
 * Markdown, mention or link syntax left live in a text (not escaped): what Discord would
 * render or ping. Empty when every such character is escaped.
 */
export function liveDiscordMarkup(source: string): string[] {
  const unescaped = source.replace(/\\[^A-Za-z0-9\s]/g, '');
  const live: string[] = [];
  for (const re of [/@(everyone|here)/, /<[@#][!&]?\d+>/, /\[[^\]]*\]\([^)]*\)/, /\*\*|__|~~|\|\||`/, /https?:\/\//]) {
    const m = re.exec(unescaped);
    if (m) live.push(m[0]);
  }
  return live;
}
