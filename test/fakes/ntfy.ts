/**
 * An ntfy server on loopback, published to as JSON (docs.ntfy.sh, "Publish as JSON"):
 * POST to the root URL with `{topic, message, title, tags, priority, markdown}`. Errors are
 * ntfy's `{"code":…,"http":…,"error":…,"link":…}` (server/errors.go): 401 40101
 * unauthorized and 403 40301 forbidden for a missing or wrong token on a protected topic,
 * 400 40009 for a bad topic, 40007 for a bad priority, 40017 for a body that is not message
 * JSON, and 429 42901 when the limit is reached. A message over 4096 bytes is refused here
 * (ntfy would turn it into an attachment). A success echoes the message.
 */
import { randomBytes } from 'node:crypto';
import { startFake, type Arrival, type Fake } from './server.js';

export interface FakeNtfy extends Fake {
  /** The topic URL to configure. */
  url: string;
  topic: string;
  /** The token a publish needs (null: the topic is open). */
  token: string | null;
}

const ERR = {
  unauthorized: { code: 40101, http: 401, error: 'unauthorized', link: 'https://ntfy.sh/docs/publish/#authentication' },
  forbidden: { code: 40301, http: 403, error: 'forbidden', link: 'https://ntfy.sh/docs/publish/#authentication' },
  topic: { code: 40009, http: 400, error: 'invalid request: topic invalid' },
  priority: { code: 40007, http: 400, error: 'invalid priority parameter', link: 'https://ntfy.sh/docs/publish/#message-priority' },
  json: { code: 40017, http: 400, error: 'invalid request: request body must be message JSON', link: 'https://ntfy.sh/docs/publish/#publish-as-json' },
  large: { code: 41301, http: 413, error: 'attachment too large, or bandwidth limit reached', link: 'https://ntfy.sh/docs/publish/#limitations' },
} as const;

/** ntfy's 429. */
export const NTFY_LIMITED = { code: 42901, http: 429, error: 'limit reached: too many requests, please be nice', link: 'https://ntfy.sh/docs/publish/#limitations' };

/** Start a fake ntfy server with one topic, protected by a token or open. */
export async function fakeNtfy(opts: { token?: string | null; path?: string } = {}): Promise<FakeNtfy> {
  const topic = 'hostwatch-alerts_x7';
  const token = opts.token === undefined ? 'tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2' : opts.token;
  const root = opts.path ?? '/';
  const check = (a: Arrival): string[] => {
    if (a.method !== 'POST' && a.method !== 'PUT') return ['json'];
    if (a.path !== root) return ['topic'];
    const j = a.json as { topic?: unknown; message?: unknown; title?: unknown; tags?: unknown; priority?: unknown } | undefined;
    if (!j || typeof j.topic !== 'string') return ['json'];
    if (j.topic !== topic) return ['topic'];
    if (token !== null) {
      const auth = a.headers['authorization'];
      if (auth === undefined) return ['unauthorized'];
      if (auth !== `Bearer ${token}`) return ['forbidden'];
    }
    if (j.priority !== undefined && (!Number.isInteger(j.priority) || (j.priority as number) < 1 || (j.priority as number) > 5)) return ['priority'];
    if (j.tags !== undefined && (!Array.isArray(j.tags) || j.tags.some((t) => typeof t !== 'string'))) return ['json'];
    if (typeof j.message === 'string' && Buffer.byteLength(j.message) > 4096) return ['large'];
    return [];
  };
  const fake = await startFake({
    check,
    refuse: (_a, problems) => {
      const e = ERR[problems[0] as keyof typeof ERR];
      return { status: e.http, body: e };
    },
    accept: (a) => ({ status: 200, body: { id: randomBytes(6).toString('hex'), time: Math.floor(Date.now() / 1000), event: 'message', ...(a.json as object) } }),
  });
  return Object.assign(fake, { url: `${fake.origin}${root}${topic}`, topic, token });
}
