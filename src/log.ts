import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';
import { createRequire } from 'node:module';
import type { Config } from './config/types.js';
import { SECRET_HEADER } from './config/schema.js';
import { secretPattern } from './secret-forms.js';
import { terminalLine } from './notify/channels/render.js';

/**
 * Every secret value in a config: the API key, the server token, webhook secrets and
 * credential headers, SMTP passwords, routing keys, API keys, bot tokens, ntfy tokens, the
 * URLs that are credentials themselves (Slack, Teams, Discord, ntfy), and the database URL
 * and its password.
 */
export function secretsOf(config: Config): string[] {
  const out = [config.api.key];
  if (config.server.token) out.push(config.server.token);
  if (config.storage.engine === 'postgres') out.push(config.storage.url, ...databasePassword(config.storage.url));
  for (const c of config.channels) {
    switch (c.type) {
      case 'webhook':
        // Every secret of a rotation, and its key part without the prefix.
        for (const s of c.secrets) out.push(s, s.replace(/^whsec_/, ''));
        for (const [name, value] of Object.entries(c.template?.headers ?? {})) if (SECRET_HEADER.test(name)) out.push(...credentialParts(value));
        break;
      case 'slack':
      case 'teams':
      case 'discord':
      case 'ntfy':
        // A server may echo only a part: the path (Slack, Discord's id/token) or a query value (Teams' sig).
        out.push(...urlSecrets(c.url));
        if (c.type === 'ntfy' && c.token) out.push(c.token);
        break;
      case 'email':
        if (c.smtp.pass) out.push(c.smtp.pass);
        break;
      case 'pagerduty':
        out.push(c.routing_key);
        break;
      case 'opsgenie':
        out.push(c.api_key);
        break;
      case 'telegram':
        // The token, and its secret half after the bot id.
        out.push(c.bot_token, c.bot_token.slice(c.bot_token.indexOf(':') + 1));
        break;
      case 'console':
        break;
    }
  }
  // A dead man's switch URL is its check's token, often a single path part (hc-ping.com/<uuid>).
  if (config.heartbeat) out.push(...urlSecrets(config.heartbeat.url));
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

/** Path parts of 16 characters or more (a check's uuid), never short words like `services`. */
function longPathParts(url: string): string[] {
  try {
    return new URL(url).pathname.split('/').filter((p) => p.length >= 16);
  } catch {
    return [];
  }
}

/**
 * A credential-bearing URL, its path when that holds at least two parts, each long part of
 * the path alone (a Slack or Discord token an error may echo without the rest), and the long
 * values of its query parameters.
 */
function urlSecrets(url: string): string[] {
  try {
    const u = new URL(url);
    const path = u.pathname.split('/').filter(Boolean).length >= 2 ? u.pathname : '';
    // Short query values (api-version=1, sv=1.0) are not secrets and would scrub common words.
    const query = [...u.searchParams.values()].filter((v) => v.length >= 16);
    return [url, path, ...longPathParts(url), ...query];
  } catch {
    return [url];
  }
}

/** A credential header value and its last word (the token of "Bearer <token>"). */
function credentialParts(value: string): string[] {
  const last = value.trim().split(/\s+/).at(-1) ?? '';
  return last.includes('{{') ? [] : [value, last];
}

/**
 * A function that replaces every secret in a text with `[REDACTED]` (invariant 7), written
 * or encoded (secretForms). Applied to every log line and every error text before it is stored.
 */
export function secretScrubber(secrets: readonly string[]): (text: string) => string {
  const pattern = secretPattern(secrets);
  if (pattern === null) return (t) => t;
  const re = new RegExp(pattern, 'g');
  return (t) => t.replace(re, '[REDACTED]');
}

export interface LoggerOptions {
  level: string;
  pretty: boolean;
  scrub: (text: string) => string;
  /** Where lines go (stderr by default: stdout is for command output and the console channel); tests pass a collector. */
  destination?: NodeJS.WritableStream;
}

/**
 * A JSON log line whose text pino-pretty will print as it is: its strings (API text in a
 * message or an error) lose their control characters (terminalLine), so a line break in them
 * cannot forge a log line, nor an escape rewrite the terminal.
 */
function forTerminal(line: string): string {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return terminalLine(line);
  }
  const clean = (v: unknown, key: string): unknown => {
    // A stack keeps its line breaks (pino-pretty indents it under its record), not its escapes.
    if (typeof v === 'string') return key === 'stack' ? v.split('\n').map(terminalLine).join('\n') : terminalLine(v);
    if (Array.isArray(v)) return v.map((x) => clean(x, ''));
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clean(x, k)]));
    return v;
  };
  return `${JSON.stringify(clean(record, ''))}\n`;
}

/**
 * pino, JSON by default, pretty for the demo. Known secret-bearing keys are redacted by
 * pino, and every serialized line also passes through the scrubber, so a secret that ends
 * up in a message or an error text is removed too.
 */
export function createLogger(opts: LoggerOptions): Logger {
  const out = opts.destination ?? process.stderr;
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
      const line = opts.scrub(chunk.toString());
      target.write(opts.pretty ? forTerminal(line) : line);
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
