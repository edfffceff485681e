/**
 * The config as users write it (YAML), as a zod schema. Every schema carries the message a
 * user reads: what is allowed. parse.ts adds the path, position and the value it got.
 * Durations leave this schema as milliseconds; defaults are applied later, in parse.ts.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { validateDetailed as validateCron } from 'node-cron';
import { PRIORITIES } from '../api/budget.js';
import { formatDuration, isOverlongDuration, parseDuration } from './duration.js';

/** The start of every unknown-key message; parse.ts splits such issues into one error per key. */
export const UNKNOWN_KEY = 'unknown key';
export const UNKNOWN_SOURCE = 'unknown source';
/** Messages starting with this are about a missing value and get no "(got ...)". */
export const REQUIRED = 'is required';

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export const CHANNEL_TYPES = ['webhook', 'slack', 'email', 'console', 'teams', 'discord', 'pagerduty', 'opsgenie', 'telegram', 'ntfy'] as const;

const M = {
  name: 'must be lowercase letters, digits, ".", "_" or "-", like hostwatch or agency-prod',
  channelName: 'must be lowercase letters, digits, "_" or "-", like ops or oncall',
  apiKey: 'must be a non-empty API key, usually key: ${HOSTWATCH_API_KEY}',
  baseUrl: 'must be an http(s) URL like https://panel.example.com',
  baseUrlCredentials: 'must not carry credentials (user:password@): the panel takes the API key alone, in api.key',
  baseUrlQuery: 'must not have a query (?…) or a fragment (#…): every request path is appended to it, so write the panel address alone, like https://panel.example.com',
  baseUrlApiV1:
    'must not end with /api/v1: the client appends /api/v1 itself, so write the panel address alone, like https://panel.example.com',
  url: 'must be an http(s) URL like https://example.net/hook',
  urlCredentials:
    'must not carry credentials (user:password@): an HTTP client does not send them, so the receiver would refuse every event. Send them in a header of a webhook template instead, like template: { body: ..., headers: { Authorization: "Basic ${HOOK_AUTH}" } } (docs/channels.md#webhook)',
  secret: 'must be a Standard Webhooks secret: "whsec_" followed by base64, like whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  rate: 'must be a number greater than 0 and at most 1000',
  path: 'must be a non-empty file path',
  storageUrl: 'must be a PostgreSQL URL like postgres://hostwatch:${PGPASS}@db.example.net:5432/hostwatch',
  instance: 'must be 1 to 63 letters, digits, ".", "_", ":" or "-", like hostwatch-1 or ${HOSTWATCH_INSTANCE}',
  sites: 'must be "all", a non-empty list of site ids like [12, 40], or a map like { watch: all, max: 10000 }',
  sitesWatch: 'must be "all" or a non-empty list of site ids, like [12, 40]',
  siteId: 'must be a positive integer site id',
  rules: 'must be a list of rule files or folders, like [./rules]',
  channels: 'must be a list of channels, each like { name: ops, type: slack, url: ... }',
  channel: `must be a map with a name and a type (${CHANNEL_TYPES.join(', ')})`,
  channelType: `must be one of ${CHANNEL_TYPES.join(', ')}`,
  email: 'must be an e-mail address like ops@example.net or "Ops <ops@example.net>"',
  emails: 'must be an e-mail address or a non-empty list of them, like [ops@example.net]',
  host: 'must be a non-empty host name like smtp.example.net',
  text: 'must be a non-empty string',
  routes: 'must be a list of routes, each like { match: "severity == \'critical\'", channels: [ops] }',
  match: 'must be a non-empty CEL expression in a string, like "severity == \'critical\'", or left out to match every event',
  routeChannels: 'must be a non-empty list of channel names, like [ops, hooks]',
  retrySchedule: 'must be a list of durations, like [5s, 5m, 30m]',
  listen: 'must be host:port like 127.0.0.1:8080 or [::1]:8080, with a port from 0 to 65535',
  token: 'must be a string, usually token: ${HOSTWATCH_TOKEN}; empty or left out for no token',
  allowedHost: 'must be a host name like hostwatch.example.net, a leading dot for every name under a domain (.example.net), or * for any name',
  allowedHosts: 'must be a list of host names the server is reached by, like [hostwatch.example.net]',
  level: `must be one of ${LOG_LEVELS.join(', ')}`,
  bool: 'must be true or false',
  secrets: 'must be a Standard Webhooks secret or a list of them (rotation: every one signs), like [whsec_new..., whsec_old...]',
  mode: 'must be structured (the whole CloudEvent as JSON, the default) or binary (ce-* headers, data as the body)',
  groupBy: `must be a list of event fields to group by, like [site_id] or [labels.client, name]; allowed: site_id, domain, name, type, severity, rule, subject, status, labels.<name>`,
  digest: 'must be like "daily at 08:00" or "daily at 08:00 Europe/Paris" (24-hour time, IANA time zone)',
  cron: 'must be a cron expression of 5 fields, like "0 2 * * 0" (Sundays at 02:00)',
  timezone: 'must be an IANA time zone like Europe/Paris or UTC',
  windowName: 'must be lowercase letters, digits, "_" or "-", like nightly-backup',
  eventName: 'must be an event name like site.offline',
  labelName: 'must be a label name: lower-case letters, digits and underscores, like client or tier',
  labelValue: 'must be a text value, like acme',
  siteLabels: 'must be a list of entries, each like { match: "glob(domain, \'*.acme.com\')", labels: { client: acme } } or { from: client_reports, label: client }',
  siteLabelFrom: 'must be client_reports (client reports tie sites to clients by domain)',
  heartbeatUrl: 'must be an http(s) URL like https://hc-ping.com/<uuid> (a dead man\'s switch check)',
  heartbeatUrlCredentials: 'must not carry credentials (user:password@): an HTTP client does not send them, so the pings would go out without them; use a URL whose path is the secret (https://hc-ping.com/<uuid>)',
  minSites: 'must be a number of sites from 2 up (like 5), or a percentage of the watched sites (like "20%")',
  template: 'must be a non-empty Liquid template, like "{{ data.summary }} ({{ data.domain }})"',
  routingKey: 'must be the 32-character integration key of a PagerDuty Events API v2 integration, usually routing_key: ${PAGERDUTY_ROUTING_KEY}',
  opsgenieKey: 'must be the API key of an Opsgenie API integration, usually api_key: ${OPSGENIE_API_KEY}',
  region: 'must be us (api.opsgenie.com, the default) or eu (api.eu.opsgenie.com)',
  botToken: 'must be a Telegram bot token from @BotFather, like 123456789:AAH..., usually bot_token: ${TELEGRAM_BOT_TOKEN}',
  chatId: 'must be a Telegram chat id (an integer like -1001234567890) or a public channel name like @my_alerts',
  ntfyUrl: 'must be an ntfy topic URL like https://ntfy.sh/my-alerts (the last path part is the topic: letters, digits, _ or -, at most 64)',
  ntfyToken: 'must be an ntfy access token, usually token: ${NTFY_TOKEN}, or left out for a public topic',
  headerName: 'must be an HTTP header name (letters, digits and !#$%&\'*+.^_`|~-), not Host, Content-Length, Transfer-Encoding or Connection (the HTTP client sets those)',
  webhookTemplate: 'must be a map like { body: "{\"text\": {{ data.summary | json }}}", headers: { X-Kind: "{{ type }}" }, content_type: application/json }',
} as const;

/** True for `postgres://` or `postgresql://` URLs with a host (what node-postgres connects to). */
export function isPostgresUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'postgres:' || u.protocol === 'postgresql:') && u.hostname !== '';
  } catch {
    return false;
  }
}

/** Event fields a route's group_by may name (`site` is site_id and domain together); `labels.<name>` too. */
export const GROUP_FIELDS = ['site_id', 'domain', 'name', 'type', 'severity', 'rule', 'subject', 'status'] as const;
const LABEL_NAME = /^[a-z_][a-z0-9_]*$/;
const GROUP_LABEL = /^labels\.[a-z_][a-z0-9_]*$/;

/** `daily at HH:MM [Zone]`: the digest schedule of a channel. */
const DIGEST = /^daily at ([01]\d|2[0-3]):([0-5]\d)(?: ([A-Za-z_]+(?:\/[A-Za-z0-9_+-]+)*))?$/;

/** True for a time zone name the runtime knows. */
export function isTimeZone(value: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return true;
  } catch {
    return false;
  }
}

/** Parse `daily at 08:00 Europe/Paris` (zone defaults to UTC); null when it is not that shape. */
export function parseDigest(value: string): { hour: number; minute: number; timezone: string } | null {
  const m = DIGEST.exec(value.trim());
  if (!m) return null;
  const timezone = m[3] ?? 'UTC';
  if (!isTimeZone(timezone)) return null;
  return { hour: Number(m[1]), minute: Number(m[2]), timezone };
}

// ---- building blocks ----------------------------------------------------------------------

/**
 * A map whose keys are all known: anything else is an unknown key. The message is
 * "<UNKNOWN_KEY or UNKNOWN_SOURCE>; allowed: a, b, c"; parse.ts reads the list back to
 * suggest the nearest key, and splits the issue into one error per unknown key.
 */
function section<T extends z.ZodRawShape>(shape: T, options: { unknown?: string; notAMap?: string } = {}) {
  const keys = Object.keys(shape).join(', ');
  const unknown = `${options.unknown ?? UNKNOWN_KEY}; allowed: ${keys === '' ? '(none)' : keys}`;
  const notAMap = options.notAMap ?? `must be a map with keys ${keys}`;
  return z.strictObject(shape, { error: (issue) => (issue.code === 'unrecognized_keys' ? unknown : notAMap) });
}

function text(message: string = M.text) {
  return z.string(message).refine((value) => value.trim() !== '', message);
}

/** Numbers may also arrive as strings, which is what `${VAR}` gives: `port: ${SMTP_PORT}`. */
function numeric(message: string) {
  return z.union([z.number(message), z.string(message).regex(/^\s*-?\d+(\.\d+)?\s*$/, message).transform(Number)], message);
}

function integer(min: number, max: number, message = `must be an integer from ${min} to ${max}`) {
  return numeric(message).pipe(z.number().int(message).min(min, message).max(max, message));
}

/** Booleans may also arrive as the strings "true" / "false" (from `${VAR}`). */
function bool() {
  // The spellings YAML itself reads as booleans, also as a variable's text (`pretty: ${PRETTY}`).
  return z.union([z.boolean(M.bool), z.enum(['true', 'True', 'TRUE', 'false', 'False', 'FALSE'], M.bool).transform((value) => value.toLowerCase() === 'true')], M.bool);
}

/** The longest duration a config takes anywhere: longer is a typo (`30d` for `30s`), not a plan. */
export const MAX_DURATION_MS = 3650 * 86_400_000;
/**
 * The longest wait a timer is set to from a config value (an interval, a drain): Node's
 * timers hold at most 2^31 - 1 ms (24.8 days) and fire at once beyond it, so a heartbeat of
 * `every: 30d` would ping without pause.
 */
const TIMER_MAX_MS = 24 * 86_400_000;
/** The longest timeout of a request: longer only hides a hung connection. */
const TIMEOUT_MAX_MS = 3_600_000;

/** A duration string (`30s`, `1h30m`) at least `minMs` and at most `maxMs` long; comes out as milliseconds. */
export function duration(minMs = 0, maxMs = MAX_DURATION_MS) {
  const message =
    minMs === 0
      ? 'must be a duration like 30s, 5m, 6h'
      : minMs === 1
        ? 'must be a duration greater than 0, like 10s, 1m'
        : `must be a duration of at least ${formatDuration(minMs)}, like ${formatDuration(minMs)} or ${formatDuration(minMs * 6)}`;
  // `0` alone needs no unit; YAML reads it as a number.
  return z.preprocess((value) => (value === 0 ? '0' : value), z.union([z.string(message), z.number(message)], message)).transform((value, ctx) => {
    // A bare number (`timeout: 30`): seconds or minutes? Say what is missing.
    if ((typeof value === 'number' || /^\s*\d+(\.\d+)?\s*$/.test(value)) && Number(value) > 0) {
      const n = String(value).trim();
      ctx.addIssue({ code: 'custom', message: `${message}; a number needs a unit: ${n}s or ${n}m, not ${n}` });
      return z.NEVER;
    }
    const text = typeof value === 'string' ? value.trim() : '';
    const ms = parseDuration(text);
    // Written as a duration, but more milliseconds than a number holds exactly: too long, not malformed.
    const tooLong = (ms === null && isOverlongDuration(text)) || (ms !== null && ms > maxMs);
    if (tooLong) {
      ctx.addIssue({ code: 'custom', message: `is too long: at most ${formatDuration(maxMs)}` });
      return z.NEVER;
    }
    if (ms === null || ms < minMs) {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    }
    return ms;
  });
}

const BYTE_UNITS: Record<string, number> = { '': 1, b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** Bytes as `16MB`, `512 KB`, `1GB` (binary multiples) or a plain number of bytes, from min to max. */
export function parseBytes(value: string | number): number | null {
  if (typeof value === 'number') return Number.isInteger(value) ? value : null;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!m) return null;
  const n = Number(m[1]) * BYTE_UNITS[(m[2] ?? '').toLowerCase()]!;
  return Number.isFinite(n) ? Math.round(n) : null;
}

function byteSize(min: number, max: number) {
  const message = `must be a size like 16MB, 512KB or 1GB (or a number of bytes), from 64KB to 1GB`;
  return z.union([z.number(message), z.string(message)], message).transform((value, ctx) => {
    const n = parseBytes(value);
    if (n === null || n < min || n > max) {
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    }
    return n;
  });
}

/** True for an absolute http: or https: URL with a host. */
export function isHttpUrl(value: string): boolean {
  if (/\s/.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** True for a URL that carries credentials (`user:password@host`). */
export function hasUrlCredentials(value: string): boolean {
  try {
    const url = new URL(value);
    return url.username !== '' || url.password !== '';
  } catch {
    return false;
  }
}

function httpUrl(message: string = M.url) {
  return z.string(message).refine(isHttpUrl, message);
}

const ADDRESS = '[^\\s@<>"]+@[^\\s@<>"]+';
const EMAIL = new RegExp(`^(?:${ADDRESS}|[^<>@]*<${ADDRESS}>)$`);

function email() {
  return z.string(M.email).regex(EMAIL, M.email);
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** True for `whsec_` followed by non-empty standard base64 (the Standard Webhooks secret format). */
export function isWebhookSecret(value: string): boolean {
  if (!value.startsWith('whsec_')) return false;
  const body = value.slice('whsec_'.length);
  return body.length > 0 && BASE64.test(body);
}

const LISTEN = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/;

/** True for `host:port` with a port from 0 to 65535 (IPv6 hosts in brackets). */
export function isListenAddress(value: string): boolean {
  const port = LISTEN.exec(value)?.[3];
  return port !== undefined && Number(port) <= 65_535;
}

/** The host of a `host:port` listen address (IPv6 without brackets), or null when it is not one. */
export function listenHost(value: string): string | null {
  const m = LISTEN.exec(value);
  return m ? (m[1] ?? m[2] ?? null) : null;
}

/** Loopback names and addresses: the only binds allowed without a token. */
export function isLoopback(host: string): boolean {
  // Host names are case-insensitive: LOCALHOST is localhost.
  if (host.toLowerCase() === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

// ---- the sections -------------------------------------------------------------------------

const apiSection = section({
  base_url: z
    .string(M.baseUrl)
    .transform((value) => value.trim().replace(/\/+$/, ''))
    .superRefine((value, ctx) => {
      if (!isHttpUrl(value)) ctx.addIssue({ code: 'custom', message: M.baseUrl });
      else if (hasUrlCredentials(value)) ctx.addIssue({ code: 'custom', message: M.baseUrlCredentials });
      else if (/[?#]/.test(value)) ctx.addIssue({ code: 'custom', message: M.baseUrlQuery });
      else if (/\/api\/v1$/i.test(value)) ctx.addIssue({ code: 'custom', message: M.baseUrlApiV1 });
    }),
  key: text(M.apiKey),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  max_requests_per_second: numeric(M.rate).pipe(z.number().gt(0, M.rate).max(1000, M.rate)).optional(),
  max_concurrency: integer(1, 64).optional(),
  retries: integer(0, 10).optional(),
  max_pages: integer(1, 10_000).optional(),
  max_reply_bytes: byteSize(64 * 1024, 1024 * 1024 * 1024).optional(),
});

const siteList = z
  .array(integer(1, Number.MAX_SAFE_INTEGER, M.siteId), M.sites)
  .min(1, M.sites)
  .superRefine((ids, ctx) => {
    const first = new Map<number, number>();
    ids.forEach((id, index) => {
      const earlier = first.get(id);
      if (earlier === undefined) first.set(id, index);
      else ctx.addIssue({ code: 'custom', path: [index], message: `must be unique; ${id} is already listed at [${earlier}]` });
    });
  });

/** The site section: `all`, a list of ids, or `{ watch, max }` (max: the most sites a site list may hold). */
const sitesSection = z.union(
  [
    z.literal('all', M.sites),
    siteList,
    section({
      watch: z.union([z.literal('all', M.sitesWatch), siteList], M.sitesWatch).optional(),
      max: integer(1, 1_000_000).optional(),
    }).superRefine((s, ctx) => {
      // A list of ids longer than the cap would be cut at every poll: say so here.
      if (Array.isArray(s.watch) && s.max !== undefined && s.watch.length > s.max) {
        ctx.addIssue({ code: 'custom', path: ['watch'], message: `lists ${s.watch.length} sites, more than max (${s.max}); raise max or list fewer` });
      }
    }),
  ],
  M.sites,
);

const filePaths = 'must be a non-empty list of paths inside the site folder, like [.htaccess, wp-config.php]';
/**
 * A list of paths inside a site folder, each once: the API refuses a path that leaves the
 * folder (`/etc/passwd`, `../x`) at every poll, and a path listed twice is read twice.
 */
function sitePaths() {
  const inside = (p: string): boolean => !p.startsWith('/') && !p.startsWith('\\') && !p.split(/[/\\]/).includes('..');
  return z
    .array(text(filePaths).refine(inside, 'must be a path inside the site folder, relative to it (no leading / and no ..), like wp-config.php or config/app.php'), filePaths)
    .min(1, filePaths)
    .superRefine((list, ctx) => {
      list.forEach((p, i) => {
        if (list.indexOf(p) < i) ctx.addIssue({ code: 'custom', path: [i], message: `lists ${p} twice` });
      });
    });
}
const PRIORITY_MESSAGE = `must be one of ${PRIORITIES.join(', ')} (critical keeps its interval when the request budget is short; low stretches first)`;
const sourceOverride = section({
  enabled: bool().optional(),
  every: duration(10_000).optional(),
  priority: z.enum(PRIORITIES, PRIORITY_MESSAGE).optional(),
  max_events: integer(1, 100_000).optional(),
  paths: sitePaths().optional(),
  site_paths: z
    .record(z.string(), sitePaths(), 'must be a map of site ids to lists of paths, like { 12: [wp-config.php] }')
    .superRefine((map, ctx) => {
      for (const key of Object.keys(map)) {
        if (!/^[1-9]\d*$/.test(key)) ctx.addIssue({ code: 'custom', path: [key], message: 'the key must be a positive integer site id, like 12: [wp-config.php]' });
      }
    })
    .optional(),
});

function sourcesSection(sourceNames: readonly string[]) {
  const shape: Record<string, z.ZodOptional<z.ZodNullable<typeof sourceOverride>>> = {};
  for (const name of sourceNames) shape[name] = sourceOverride.nullable().optional();
  return section(shape, { unknown: UNKNOWN_SOURCE, notAMap: `must be a map of source names to { enabled, every, priority, paths }` });
}

const CHANNEL_NAME = /^[a-z0-9_-]+$/;
const channelName = z.string(M.channelName).regex(CHANNEL_NAME, M.channelName);

/**
 * What is wrong with a channel's name, or null. For a channel whose type is not one of
 * CHANNEL_TYPES: the union then reports only the type, and this names the name's mistake too.
 */
export function channelNameProblem(name: unknown): string | null {
  return typeof name === 'string' && CHANNEL_NAME.test(name) ? null : M.channelName;
}

/** True when `type` is one of CHANNEL_TYPES. */
export function isChannelType(type: unknown): boolean {
  return (CHANNEL_TYPES as readonly unknown[]).includes(type);
}

const webhookSecret = z.string(M.secret).refine(isWebhookSecret, M.secret);

/** Header names a template may set: an HTTP token, and none that the transport owns. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
const isHeaderName = (n: string): boolean => /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(n) && !RESERVED_HEADERS.has(n.toLowerCase());

const webhookTemplate = section(
  {
    body: text(M.template),
    // Each name is checked here rather than as the record's key, so a bad one (Host) is named
    // with what is wrong with it, not as a bad map.
    headers: z
      .record(z.string(), text(M.template), 'must be a map of header names to templates, like { X-Kind: "{{ type }}" }')
      .superRefine((headers, ctx) => {
        for (const name of Object.keys(headers)) if (!isHeaderName(name)) ctx.addIssue({ code: 'custom', path: [name], message: M.headerName });
      })
      .optional(),
    content_type: text().optional(),
  },
  { notAMap: M.webhookTemplate },
);

const webhookChannel = section({
  name: channelName,
  type: z.literal('webhook'),
  // undici sends no Authorization for `user:pass@`: every event would be refused (401) and dead-lettered.
  url: httpUrl().refine((value) => !hasUrlCredentials(value), M.urlCredentials),
  // A list while rotating: every secret signs, so receivers on the old or the new one verify.
  // Optional with a template (a receiver that is not a Standard Webhooks one); required otherwise.
  secret: z.union([webhookSecret, z.array(webhookSecret, M.secrets).min(1, M.secrets)], M.secrets).optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  mode: z.enum(['structured', 'binary'], M.mode).optional(),
  template: webhookTemplate.optional(),
}).superRefine((hook, ctx) => {
  if (hook.secret === undefined && hook.template === undefined) {
    ctx.addIssue({ code: 'custom', path: ['secret'], message: `${REQUIRED} (a webhook without a template sends signed CloudEvents); ${M.secret}` });
  }
  if (hook.template !== undefined && hook.mode !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['mode'], message: 'is for CloudEvents webhooks; a webhook with a template sends the body its template renders' });
  }
});

const digest = z.string(M.digest).refine((value) => parseDigest(value) !== null, M.digest);

// Templates are checked as Liquid (with their variables) in parse.ts, which knows positions.
const template = text(M.template);

const slackChannel = section({
  name: channelName,
  type: z.literal('slack'),
  url: httpUrl('must be an http(s) URL like https://hooks.slack.com/services/...'),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
  template: template.optional(),
});

const smtpSection = section({
  host: text(M.host),
  port: integer(1, 65_535).optional(),
  user: text().optional(),
  pass: text().optional(),
  secure: bool().optional(),
  require_tls: bool().optional(),
}).superRefine((smtp, ctx) => {
  // A login needs both halves; one alone is a config slip, not a choice.
  if (smtp.user !== undefined && smtp.pass === undefined) {
    ctx.addIssue({ code: 'custom', path: ['pass'], message: `${REQUIRED} when user is set (an SMTP login needs both)` });
  }
  if (smtp.pass !== undefined && smtp.user === undefined) {
    ctx.addIssue({ code: 'custom', path: ['user'], message: `${REQUIRED} when pass is set (an SMTP login needs both)` });
  }
});

const emailChannel = section({
  name: channelName,
  type: z.literal('email'),
  to: z.union([email().transform((address) => [address]), z.array(email(), M.emails).min(1, M.emails)], M.emails),
  from: email(),
  smtp: smtpSection,
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
});

const consoleChannel = section({ name: channelName, type: z.literal('console') });

const teamsChannel = section({
  name: channelName,
  type: z.literal('teams'),
  url: httpUrl('must be the http(s) URL of a Teams Workflows webhook ("Post to a channel when a webhook request is received")'),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
  template: template.optional(),
});

const discordChannel = section({
  name: channelName,
  type: z.literal('discord'),
  url: httpUrl('must be an http(s) URL like https://discord.com/api/webhooks/ID/TOKEN'),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
  template: template.optional(),
});

const pagerdutyChannel = section({
  name: channelName,
  type: z.literal('pagerduty'),
  routing_key: z.string(M.routingKey).regex(/^[A-Za-z0-9]{32}$/, M.routingKey),
  api_url: httpUrl('must be an http(s) URL like https://events.pagerduty.com (the channel appends /v2/enqueue)').optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  template: template.optional(),
});

const opsgenieChannel = section({
  name: channelName,
  type: z.literal('opsgenie'),
  api_key: text(M.opsgenieKey),
  region: z.enum(['us', 'eu'], M.region).optional(),
  api_url: httpUrl('must be an http(s) URL like https://api.opsgenie.com (the channel appends /v2/alerts)').optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  template: template.optional(),
}).superRefine((og, ctx) => {
  if (og.region !== undefined && og.api_url !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['api_url'], message: 'must not be set together with region: region picks the API address, api_url names one (for a proxy or a test)' });
  }
});

const telegramChannel = section({
  name: channelName,
  type: z.literal('telegram'),
  bot_token: z.string(M.botToken).regex(/^\d+:[A-Za-z0-9_-]+$/, M.botToken),
  chat_id: z.union([z.number(M.chatId).int(M.chatId), z.string(M.chatId).regex(/^(-?\d+|@[A-Za-z][A-Za-z0-9_]{3,})$/, M.chatId)], M.chatId),
  message_thread_id: integer(1, Number.MAX_SAFE_INTEGER, 'must be the positive integer id of a forum topic').optional(),
  api_url: httpUrl('must be an http(s) URL like https://api.telegram.org (the channel appends /bot<token>/sendMessage)').optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
  template: template.optional(),
});

/** True for an http(s) URL whose last path part is an ntfy topic name. */
export function isNtfyTopicUrl(value: string): boolean {
  if (!isHttpUrl(value)) return false;
  const parts = new URL(value).pathname.split('/');
  return /^[-_A-Za-z0-9]{1,64}$/.test(parts.at(-1) ?? '');
}

const ntfyChannel = section({
  name: channelName,
  type: z.literal('ntfy'),
  url: z.string(M.ntfyUrl).refine(isNtfyTopicUrl, M.ntfyUrl),
  token: text(M.ntfyToken).optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
  digest: digest.optional(),
  template: template.optional(),
});

const channel = z.discriminatedUnion('type', [webhookChannel, slackChannel, emailChannel, consoleChannel, teamsChannel, discordChannel, pagerdutyChannel, opsgenieChannel, telegramChannel, ntfyChannel], {
  error: (issue) => (issue.code === 'invalid_union' ? M.channelType : M.channel),
});

const route = section({
  match: text(M.match).nullable().optional(),
  channels: z.array(channelName, M.routeChannels).min(1, M.routeChannels),
  continue: bool().optional(),
  group_by: z
    .array(z.string(M.groupBy).refine((f) => (GROUP_FIELDS as readonly string[]).includes(f) || GROUP_LABEL.test(f), M.groupBy), M.groupBy)
    .optional(),
  // group_wait holds a group's first message back; longer than a day it is a typo (30m for 30s?).
  group_wait: duration(0, 86_400_000).optional(),
  group_interval: duration(0, 7 * 86_400_000).optional(),
  send_resolved: bool().optional(),
});

/** A route's keys that a channel does not take (written on a channel, they are named as a route's). */
export const ROUTE_KEYS: ReadonlySet<string> = new Set(Object.keys(route.shape).filter((k) => k !== 'channels'));

const timezone = z.string(M.timezone).refine(isTimeZone, M.timezone);

const maintenanceWindow = section({
  name: z.string(M.windowName).regex(/^[a-z0-9_-]+$/, M.windowName),
  schedule: z.string(M.cron).refine((value) => value.trim().split(/\s+/).length === 5 && validateCron(value.trim()).valid, M.cron),
  duration: duration(60_000),
  timezone: timezone.optional(),
  sites: siteList.optional(),
  match: text(M.match).optional(),
});

const eventName = z.string(M.eventName).regex(/^[a-z0-9_]+(\.[a-z0-9_]+)+$/, M.eventName);

const inhibitRule = section({
  source: eventName,
  target: text(M.match).optional(),
});

const deliverySection = section({
  retry_schedule: z.array(duration(), M.retrySchedule).optional(),
  drain_timeout: duration(0, TIMEOUT_MAX_MS).optional(),
  concurrency: integer(1, 64).optional(),
  disable_after: duration(60_000).optional(),
});

/** A host name (no port), `.domain` for every name under it, or `*`. */
const ALLOWED_HOST = /^(\*|\.?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)$/;

const serverSection = section({
  listen: z.string(M.listen).refine(isListenAddress, M.listen).nullable().optional(),
  // Empty is no token (`${HOSTWATCH_TOKEN:-}`): fine on loopback; parse.ts refuses it beyond.
  token: z.string(M.token).nullable().optional(),
  not_ready_after: duration(60_000).optional(),
  allowed_hosts: z.array(z.string(M.allowedHost).regex(ALLOWED_HOST, M.allowedHost), M.allowedHosts).optional(),
});

const silencesSection = section({
  max_duration: duration(60_000).optional(),
});

const degradedSection = section({
  after_failures: integer(1, 1000).optional(),
  after: duration(60_000).optional(),
});

const historySection = section({
  retention: duration(3_600_000).optional(),
  prune_every: duration(60_000, TIMER_MAX_MS).optional(),
});

// A bad name and a bad value in one map are both reported (a key schema, not a refinement).
const labelMap = z.record(z.string().regex(LABEL_NAME), z.string(M.labelValue).min(1, M.labelValue), {
  error: (issue) => (issue.code === 'invalid_key' ? M.labelName : 'must be a map of label names to values, like { client: acme, tier: gold }'),
});

const siteLabelMatch = section({
  match: text(M.match).optional(),
  labels: labelMap,
});
const siteLabelFrom = section({
  from: z.literal('client_reports', M.siteLabelFrom),
  label: z.string(M.labelName).regex(LABEL_NAME, M.labelName),
});
const siteLabel = z.union([siteLabelMatch, siteLabelFrom], M.siteLabels);

const heartbeatSection = section({
  // Credentials in the URL are not sent by the HTTP client: the pings would go out without them.
  url: httpUrl(M.heartbeatUrl).refine((value) => !hasUrlCredentials(value), M.heartbeatUrlCredentials),
  every: duration(10_000, TIMER_MAX_MS).optional(),
  timeout: duration(1, TIMEOUT_MAX_MS).optional(),
});

const clusterSection = section({
  // Names this instance among the members (cluster status, metrics, logs); unique per process.
  instance: z.string(M.instance).regex(/^[A-Za-z0-9._:-]{1,63}$/, M.instance).optional(),
  // Between 1 s (tests, a LAN) and 10 min: the longest an instance that died keeps its work.
  lease: duration(1_000).refine((ms) => ms <= 600_000, 'must be at most 10m').optional(),
});

const watchdogSection = section({
  enabled: bool().optional(),
  every: duration(60_000, TIMER_MAX_MS).optional(),
});

const minSites = z.union(
  [
    integer(2, 1_000_000, M.minSites),
    z.string(M.minSites).regex(/^\s*\d{1,3}(\.\d+)?\s*%\s*$/, M.minSites).refine((v) => {
      const n = Number(v.replace('%', '').trim());
      return n > 0 && n <= 100;
    }, M.minSites),
  ],
  M.minSites,
);

const incidentsSection = section({
  enabled: bool().optional(),
  min_sites: minSites.optional(),
  window: duration(60_000).optional(),
  wait: duration().optional(),
  alerts: z.array(eventName, 'must be a list of alert event names, like [site.offline, backup.stale]').optional(),
});

const logSection = section({
  level: z.enum(LOG_LEVELS, M.level).optional(),
  pretty: bool().optional(),
});

/**
 * The schema of a config file. Source names come from the caller (the sources registry), so
 * a misspelt source is an error listing the real ones. Optional sections may be left empty.
 */
export function buildConfigSchema(sourceNames: readonly string[]) {
  const shape = {
    name: z.string(M.name).regex(/^[a-z0-9._-]+$/, M.name).optional(),
    api: apiSection,
    storage: section({
      path: text(M.path).optional(),
      url: z.string(M.storageUrl).refine(isPostgresUrl, M.storageUrl).optional(),
    }).nullish(),
    sites: sitesSection.nullish(),
    sources: sourcesSection(sourceNames).nullish(),
    rules: z.array(text(M.path), M.rules).nullish(),
    channels: z.array(channel, M.channels).nullish(),
    routes: z.array(route, M.routes).nullish(),
    maintenance: z.array(maintenanceWindow, 'must be a list of windows, each like { name: nightly, schedule: "0 2 * * *", duration: 1h }').nullish(),
    inhibit: z.array(inhibitRule, 'must be a list like [{ source: site.offline }]').nullish(),
    delivery: deliverySection.nullish(),
    server: serverSection.nullish(),
    silences: silencesSection.nullish(),
    degraded: degradedSection.nullish(),
    log: logSection.nullish(),
    history: historySection.nullish(),
    site_labels: z.array(siteLabel, M.siteLabels).nullish(),
    heartbeat: heartbeatSection.nullish(),
    watchdog: watchdogSection.nullish(),
    incidents: incidentsSection.nullish(),
    cluster: clusterSection.nullish(),
  };
  return section(shape, { notAMap: `the file must be a map with keys ${Object.keys(shape).join(', ')}` });
}

export type ConfigSchema = ReturnType<typeof buildConfigSchema>;
/** The config as users write it (before defaults and before durations become milliseconds). */
export type WrittenConfig = z.input<ConfigSchema>;
/** The config after validation: durations are milliseconds, defaults not yet applied. */
export type CheckedConfig = z.output<ConfigSchema>;

/** Channel keys whose values are credentials. */
const SECRET_CHANNEL_KEYS = new Set(['secret', 'routing_key', 'api_key', 'bot_token', 'token']);

/** Header names that carry credentials, in a webhook template (their values are secrets). */
export const SECRET_HEADER = /auth|token|key|secret|signature|password|cookie/i;

/**
 * What a read-only command puts in place of a value it never uses whose environment variable
 * is unset: a secret (never sent anywhere, since these commands call no API and no channel)
 * or `cluster.instance` (the daemon's own name, set per service: `${HOSTWATCH_INSTANCE}` is
 * not in an operator's shell when they run `cluster status`); with `serverUnused` (a command
 * that neither serves nor asks the daemon's server) also `server.listen`, the other value
 * that differs per instance (`127.0.0.1:${PORT}` for instances on one host; docs/cluster.md).
 * A value of the right form; null for any other path.
 */
export function unsetPlaceholder(path: readonly (string | number)[], opts: { serverUnused?: boolean } = {}): string | null {
  if (path[0] === 'cluster' && path[1] === 'instance' && path.length === 2) return 'unset-instance';
  if (opts.serverUnused === true && path[0] === 'server' && path[1] === 'listen' && path.length === 2) return '127.0.0.1:0';
  // The database URL is the one secret these commands use: its variable must be set.
  if (path[0] === 'storage') return null;
  if (!isSecretPath(path, {})) return null;
  const key = path.includes('secret') ? 'secret' : String(path[path.length - 1]);
  return SECRET_PLACEHOLDERS[key] ?? 'unset-secret';
}

/** Placeholders that pass each secret key's own format check. */
const SECRET_PLACEHOLDERS: Record<string, string> = {
  secret: 'whsec_dW5zZXQtc2VjcmV0',
  url: 'https://unset.invalid/unset',
  routing_key: 'unsetunsetunsetunsetunsetunset00',
  bot_token: '0:unset',
};

/**
 * True if the value at `path` is a secret, whose value must never appear in an error:
 * api.key, server.token, heartbeat.url, storage.url (it carries the database password), an
 * api.base_url with credentials written into it,
 * channels[*].secret / routing_key / api_key / bot_token / token,
 * channels[*].smtp.pass, credential-like headers of a webhook template, and
 * channels[*].url of every channel that is not a plain webhook (a Slack, Teams, Discord or
 * ntfy URL is its own credential), and of a webhook whose URL carries credentials.
 */
export function isSecretPath(path: readonly (string | number)[], data: unknown): boolean {
  const [first, second, third, fourth, fifth] = path;
  if (first === 'api' && second === 'key') return true;
  if (first === 'api' && second === 'base_url') {
    // No credential belongs there (refused, never shown).
    const url = (data as { api?: { base_url?: unknown } } | null)?.api?.base_url;
    return typeof url === 'string' && hasUrlCredentials(url);
  }
  if (first === 'storage' && second === 'url') return true;
  // A dead man's switch URL carries its check's token (hc-ping.com/<uuid>).
  if (first === 'heartbeat' && second === 'url') return true;
  if (first === 'server' && second === 'token') return true;
  if (first !== 'channels' || typeof second !== 'number') return false;
  if (typeof third === 'string' && SECRET_CHANNEL_KEYS.has(third)) return true;
  if (third === 'smtp' && fourth === 'pass') return true;
  if (third === 'template' && fourth === 'headers' && typeof fifth === 'string') return SECRET_HEADER.test(fifth);
  if (third === 'url') {
    const written = (data as { channels?: unknown } | null)?.channels;
    const channel = Array.isArray(written) ? (written[second] as { type?: unknown; url?: unknown } | null) : undefined;
    // A webhook URL is no credential, unless one was written into it (refused, never shown).
    return channel?.type !== 'webhook' || (typeof channel.url === 'string' && hasUrlCredentials(channel.url));
  }
  return false;
}
