import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { createRequire } from 'node:module';
import type { Config } from './config/types.js';

/** Every secret value in a config: the API key, webhook secrets, SMTP passwords, Slack URLs, the server token, the database URL and its password. */
export function secretsOf(config: Config): string[] {
  const out = [config.api.key];
  if (config.server.token) out.push(config.server.token);
  if (config.storage.engine === 'postgres') out.push(config.storage.url, ...databasePassword(config.storage.url));
  for (const c of config.channels) {
    // Every secret of a rotation, and its key part without the prefix.
    if (c.type === 'webhook') for (const s of c.secrets) out.push(s, s.replace(/^whsec_/, ''));
    // The URL's path alone is the credential too (a server may echo just the path).
    if (c.type === 'slack') out.push(c.url, slackPath(c.url));
    if (c.type === 'email' && c.smtp.pass) out.push(c.smtp.pass);
  }
  return out.filter((s) => s.length >= 4);
}

/** The password of a database URL, as written and decoded (a URL may percent-encode it). */
function databasePassword(url: string): string[] {
  try {
    const p = new URL(url).password;
    return p === '' ? [] : [p, decodeURIComponent(p)];
  } catch {
    return [];
  }
}

function slackPath(url: string): string {
  try {
    const path = new URL(url).pathname;
    return path.split('/').filter(Boolean).length >= 2 ? path : '';
  } catch {
    return '';
  }
}

/**
 * A function that replaces every secret in a text with `[REDACTED]` (invariant 7).
 * Applied to every log line and every error text before it is stored.
 */
export function secretScrubber(secrets: readonly string[]): (text: string) => string {
  const list = [...new Set(secrets)].sort((a, b) => b.length - a.length);
  if (list.length === 0) return (t) => t;
  const re = new RegExp(list.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  return (t) => t.replace(re, '[REDACTED]');
}

export interface LoggerOptions {
  level: string;
  pretty: boolean;
  scrub: (text: string) => string;
  /** Where lines go (stdout by default); tests pass a collector. */
  destination?: NodeJS.WritableStream;
}

/**
 * pino, JSON by default, pretty for the demo. Known secret-bearing keys are redacted by
 * pino, and every serialized line also passes through the scrubber, so a secret that ends
 * up in a message or an error text is removed too.
 */
export function createLogger(opts: LoggerOptions): Logger {
  const out = opts.destination ?? process.stdout;
  // pino-pretty is loaded only when asked for: the daemon's JSON logs do not pay its memory.
  const target: NodeJS.WritableStream = opts.pretty
    ? (createRequire(import.meta.url)('pino-pretty') as (o: Record<string, unknown>) => NodeJS.WritableStream)({
        destination: out as never,
        colorize: false,
        ignore: 'pid,hostname',
        translateTime: 'HH:MM:ss',
      })
    : out;
  const scrubbing = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      target.write(opts.scrub(chunk.toString()));
      cb();
    },
  });
  return pino(
    {
      level: opts.level,
      base: { name: 'hostwatch' },
      redact: {
        paths: ['key', 'api.key', 'secret', '*.secret', 'pass', '*.pass', 'authorization', '*.authorization', 'token', '*.token'],
        censor: '[REDACTED]',
      },
    },
    scrubbing,
  );
}
