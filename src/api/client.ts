import { hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { outboundAgent, proxyRefusal } from '../outbound.js';
import { Semaphore } from '../semaphore.js';
import { isRecord } from '../is-record.js';
import { oneLine } from '../notify/channels/render.js';
import { ApiError } from './errors.js';
import { replyScrubber } from './scrub.js';
import { DEFAULT_PAGE_SIZE, isRetryableStatus, MAX_RETRY_AFTER_MS, morePages } from './assumptions.js';
import { defaultTicket, freshTurnMs, HOLDS_CONNECTION, LocalBudget, type RequestBudget, type Ticket } from './budget.js';
import type { ApiConfig } from '../config/types.js';

/** What the client needs to know; everything time-related is injectable for tests. */
export interface ApiClientOptions {
  baseUrl: string;
  key: string;
  timeoutMs: number;
  maxRequestsPerSecond: number;
  maxConcurrency: number;
  retries: number;
  maxPages: number;
  /** The largest reply body read (`api.max_reply_bytes`); a larger one is `too_large`. Default 16 MB. */
  maxReplyBytes?: number;
  /**
   * When each request may go (pace, 429 pause, priority). Default: a LocalBudget at
   * `maxRequestsPerSecond`; a cluster passes one shared by every instance.
   */
  budget?: RequestBudget;
  userAgent?: string;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  /**
   * Secrets to remove from every reply before it is returned (and so before anything is
   * stored): the API key and every other configured secret. Default: the key.
   */
  secrets?: readonly string[];
  /** Called once per HTTP exchange (for metrics and logs); never given the key. */
  onResponse?: (info: { endpoint: string; status: number | null; durationMs: number; code: string | null }) => void;
}

/** The client options `api:` gives, with the secrets to scrub from replies: the daemon's and `check --online`'s alike. */
export function clientOptionsOf(api: ApiConfig, secrets: readonly string[]): ApiClientOptions {
  return {
    baseUrl: api.base_url,
    key: api.key,
    timeoutMs: api.timeout_ms,
    maxRequestsPerSecond: api.max_requests_per_second,
    maxConcurrency: api.max_concurrency,
    retries: api.retries,
    maxPages: api.max_pages,
    maxReplyBytes: api.max_reply_bytes,
    secrets,
  };
}

export type Query = Record<string, string | number | boolean | undefined>;

/**
 * Validators of a reply, for conditional reads: the ETag / Last-Modified the server gave, or,
 * when it gave neither, a digest of the reply's bytes (A10). A server without validators
 * answers every GET in full; a reply with the same bytes as the last one is then
 * "not modified" all the same, found before it is parsed.
 */
export interface Validators {
  etag?: string;
  lastModified?: string;
  digest?: string;
}

/**
 * A conditional read: `notModified` when the server answered 304 (or, without validators, sent
 * the same bytes as last time), else the data and new validators.
 */
export type ConditionalResult<T> = { notModified: true } | { notModified: false; data: T; validators: Validators };

/** A paged read: `partial` when `until` stopped it before the last page. */
export type ListResult = { notModified: true } | { notModified: false; data: unknown[]; validators: Validators; partial: boolean; pages: number };

/** How urgent a read is, and (paged lists) when to stop reading. */
export interface ReadOptions {
  /** Priority and deadline in the request budget; default: normal, due now. */
  ticket?: Ticket;
  /**
   * Paged lists: called with every page's items; `true` stops after that page (a newest-first
   * list read from the top stops at the first page that reaches known records).
   */
  until?: (items: readonly unknown[], page: number) => boolean | Promise<boolean>;
}

interface Reply {
  body: unknown;
  validators: Validators;
  notModified: boolean;
}

const MAX_BACKOFF_MS = 10_000;
const DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024;

/**
 * Read-only client of the Hosting Control API. It has no way to send anything but GET:
 * invariant 1 (read-only) is a property of its interface, not a convention.
 */
export class ApiClient {
  private readonly agent: Dispatcher;
  private readonly root: string;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  /** When each request may go; shared by every caller of this client. */
  readonly budget: RequestBudget;
  private readonly slots: Semaphore;
  private readonly maxReplyBytes: number;
  private readonly scrub: (text: string, value: unknown) => unknown;

  constructor(private readonly opts: ApiClientOptions) {
    this.scrub = replyScrubber(opts.secrets ?? [opts.key]);
    this.root = opts.baseUrl.replace(/\/+$/, '') + '/api/v1';
    this.now = opts.now ?? Date.now;
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.random = opts.random ?? Math.random;
    this.budget = opts.budget ?? new LocalBudget({ maxRate: opts.maxRequestsPerSecond, now: this.now, sleep: this.sleep });
    this.maxReplyBytes = opts.maxReplyBytes ?? DEFAULT_MAX_REPLY_BYTES;
    this.slots = new Semaphore(opts.maxConcurrency);
    this.agent = outboundAgent({ connections: Math.max(2, opts.maxConcurrency), keepAliveTimeout: 10_000 });
  }

  /** GET one resource and return its `data`. Retries transient failures. */
  async get(path: string, query: Query = {}, opts: ReadOptions = {}): Promise<unknown> {
    const r = await this.getOne(path, query, undefined, opts, false);
    return (r as { data: unknown }).data;
  }

  /**
   * GET one resource, sending If-None-Match / If-Modified-Since from `prev` (the validators
   * of the last reply). A 304 is `notModified`: the caller keeps what it had. So is a reply
   * with the digest `prev` holds (a server without validators), which is not parsed.
   */
  getIfChanged(path: string, query: Query = {}, prev?: Validators, opts: ReadOptions = {}): Promise<ConditionalResult<unknown>> {
    return this.getOne(path, query, prev, opts, true);
  }

  private async getOne(path: string, query: Query, prev: Validators | undefined, opts: ReadOptions, conditional: boolean): Promise<ConditionalResult<unknown>> {
    const reply = await this.fetchJson(path, query, prev, opts.ticket, conditional);
    if (reply.notModified) return { notModified: true };
    const body = reply.body;
    if (!isRecord(body) || !('data' in body)) {
      throw new ApiError({ code: 'bad_response', endpoint: path, message: 'reply has no "data" key' });
    }
    return { notModified: false, data: body['data'], validators: reply.validators };
  }

  /**
   * GET every page of a paged list and return all items. A failure on any page fails
   * the whole list (invariant 3: a partial list must never look like removals).
   */
  async list(path: string, query: Query = {}, pageSize = DEFAULT_PAGE_SIZE, opts: ReadOptions = {}): Promise<unknown[]> {
    const r = await this.listPages(path, query, pageSize, undefined, opts, false);
    return (r as { data: unknown[] }).data;
  }

  /**
   * Like list(), conditional on the first page: validators are only kept (and sent) for a
   * read that ended on page 1, because a 304 on page 1 says nothing about later pages.
   * With `until`, the read stops after the first page it accepts (`partial` when more pages
   * were left); the page cap applies only to pages read.
   */
  listIfChanged(path: string, query: Query = {}, pageSize = DEFAULT_PAGE_SIZE, prev?: Validators, opts: ReadOptions = {}): Promise<ListResult> {
    return this.listPages(path, query, pageSize, prev, opts, true);
  }

  private async listPages(path: string, query: Query, pageSize: number, prev: Validators | undefined, opts: ReadOptions, conditional: boolean): Promise<ListResult> {
    const items: unknown[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (let page = 1; ; page++) {
      if (page > this.opts.maxPages) {
        throw new ApiError({
          code: 'page_cap',
          endpoint: path,
          message: `more than ${this.opts.maxPages} pages; raise api.max_pages to read the whole list`,
        });
      }
      const reply = await this.fetchJson(path, { ...query, limit: pageSize, cursor }, page === 1 ? prev : undefined, opts.ticket, conditional && page === 1);
      if (reply.notModified) {
        if (page === 1) return { notModified: true };
        throw new ApiError({ code: 'bad_response', endpoint: path, message: `page ${page}: 304 to an unconditional request` });
      }
      const body = reply.body;
      if (!isRecord(body) || !Array.isArray(body['data'])) {
        throw new ApiError({ code: 'bad_response', endpoint: path, message: `page ${page}: "data" is not a list` });
      }
      for (const item of body['data']) items.push(item);
      const next = body['next_cursor'];
      const validators = page === 1 ? reply.validators : {};
      const more = morePages(body['has_more'], next);
      if (more === null) throw new ApiError({ code: 'bad_response', endpoint: path, message: `page ${page}: has_more is ${typeof body['has_more']}, not true or false` });
      if (!more) return { notModified: false, data: items, validators, partial: false, pages: page };
      if (opts.until && (await opts.until(body['data'], page))) return { notModified: false, data: items, validators, partial: true, pages: page };
      if (typeof next !== 'string' || next === '') {
        throw new ApiError({ code: 'bad_response', endpoint: path, message: `page ${page}: has_more is true but next_cursor is missing` });
      }
      if (seen.has(next)) {
        throw new ApiError({ code: 'bad_response', endpoint: path, message: `page ${page}: the server repeated a cursor` });
      }
      seen.add(next);
      cursor = next;
    }
  }

  /** Release the connection pool. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** `digest`: keep a digest of the reply as its validators when the server gives none. */
  private async fetchJson(path: string, query: Query, prev: Validators | undefined, ticket: Ticket | undefined, digest: boolean): Promise<Reply> {
    let attempt = 0;
    for (;;) {
      try {
        return await this.once(path, query, prev, ticket, digest);
      } catch (e) {
        const err = e instanceof ApiError ? e : toNetworkError(path, e, false);
        // A timeout already held this poll for api.timeout: it is tried again at the next poll
        // of the entity, not now, so one slow entity never holds a worker for timeout × retries.
        if (!err.retryable || err.code === 'timeout' || attempt >= this.opts.retries) throw err;
        if (err.retryAfterMs !== null && err.retryAfterMs > MAX_RETRY_AFTER_MS) throw err;
        attempt++;
        // A 429 with Retry-After paused the whole budget: the retry waits in acquire(), with
        // every other request. Otherwise (5xx, network, 429 without a date) this request backs off.
        if (err.statusCode === 429 && err.retryAfterMs !== null) continue;
        const wait = err.retryAfterMs ?? this.random() * Math.min(MAX_BACKOFF_MS, 250 * 2 ** (attempt - 1));
        // Full jitter (AWS architecture blog): spreads retries of many sites apart.
        await this.sleep(wait);
      }
    }
  }

  private async once(path: string, query: Query, prev: Validators | undefined, ticket: Ticket | undefined, digest: boolean): Promise<Reply> {
    const url = this.root + path + toQueryString(query);
    try {
      await this.budget.acquire(ticket);
    } catch (e) {
      throw e instanceof ApiError ? e.at(path) : e;
    }
    let turnAt = this.now();
    const release = await this.slots.acquire();
    const started = this.now();
    let status: number | null = null;
    let code: string | null = null;
    // One deadline for the whole exchange: undici's headersTimeout bounds the wait for the
    // headers, and a timer started with the request cuts the body at the same deadline (a
    // body dripping a byte at a time never trips bodyTimeout). A plain cleared timer rather
    // than an AbortSignal: undici hangs its request objects on a signal's listeners, which
    // kept them alive past young-generation collections and grew the old heap by hundreds
    // of MB at thousands of requests a second (AbortSignal.timeout also lived out its 30 s).
    // The deadline is real time (performance.now, like the timers), not the injected clock.
    // A reply read whole after it (its timer could not run first: a busy event loop, a body
    // already buffered) is a timeout too, so the deadline holds however the timers run.
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A turn is used when it comes or not at all. While every connection is busy (slow
      // replies), turns keep coming to the requests queued for one; as the connections free
      // up those would go out together, faster than the pace. One that waited past its turn
      // takes a new one, ahead of the requests that hold no connection.
      while (this.now() - turnAt > freshTurnMs(this.budget.state().rate)) {
        await this.budget.acquire({ ...(ticket ?? defaultTicket(this.now())), priority: HOLDS_CONNECTION });
        turnAt = this.now();
      }
      await this.budget.holdWhilePaused(ticket?.signal);
      const deadline = performance.now() + this.opts.timeoutMs;
      const res = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        headers: {
          authorization: `Bearer ${this.opts.key}`,
          accept: 'application/json',
          'user-agent': this.opts.userAgent ?? 'hostwatch',
          ...(prev?.etag ? { 'if-none-match': prev.etag } : {}),
          ...(prev?.lastModified ? { 'if-modified-since': prev.lastModified } : {}),
        },
        headersTimeout: this.opts.timeoutMs,
        bodyTimeout: this.opts.timeoutMs,
      });
      timer = setTimeout(() => {
        timedOut = true;
        res.body.destroy();
      }, Math.max(0, deadline - performance.now()));
      status = res.statusCode;
      const bytes = await this.readCapped(path, res);
      if (performance.now() > deadline) {
        timedOut = true;
        throw new Error('read past the deadline');
      }
      if (status === 429) {
        // Before the connection is released: nothing else goes out until the budget knows.
        this.budget.rateLimited(parseRetryAfter(res.headers['retry-after'], this.now()));
      } else {
        this.budget.succeeded();
      }
      if (status === 304 && prev !== undefined) return { body: null, validators: prev, notModified: true };
      if (status >= 200 && status < 300) {
        const validators = validatorsOf(res.headers);
        // No ETag, no Last-Modified (A10): the reply's bytes stand in for them. The same bytes
        // as last time are "not modified", as a 304 would be, and are not parsed at all.
        if (digest && validators.etag === undefined && validators.lastModified === undefined) {
          validators.digest = bodyDigest(bytes);
          if (prev?.digest === validators.digest) return { body: null, validators: prev, notModified: true };
        }
        // RFC 8259 §8.1: a parser may ignore a byte order mark, which some servers put first.
        const text = bytes.toString('utf8', hasBom(bytes) ? 3 : 0);
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          code = 'bad_response';
          throw new ApiError({
            code, endpoint: path, statusCode: status,
            message: notJsonMessage(status, text, bytes.length, one(res.headers['content-type'])),
            // A truncated body is usually a broken connection: worth one more try.
            retryable: true,
          });
        }
        try {
          return { body: this.scrub(text, parsed), validators, notModified: false };
        } catch (e) {
          if (!(e instanceof RangeError)) throw e;
          // Well-formed, but nested too deep to look through for secrets (the scrubber
          // recurses): the same reply again would fail the same way.
          code = 'bad_response';
          throw new ApiError({ code, endpoint: path, statusCode: status, message: `a ${status} reply nested too deeply to check for secrets (${text.length} bytes)`, retryable: false });
        }
      }
      const err = errorFromReply(path, status, bytes.toString('utf8'), res.headers['retry-after'], this.now(), one(res.headers['location']));
      code = err.code;
      throw err;
    } catch (e) {
      if (e instanceof ApiError) {
        code = e.code;
        throw e.at(path);
      }
      const err = toNetworkError(path, e, timedOut);
      code = err.code;
      throw err;
    } finally {
      clearTimeout(timer);
      release();
      this.opts.onResponse?.({ endpoint: path, status, durationMs: this.now() - started, code });
    }
  }

  /**
   * The reply body, read no further than `maxReplyBytes`: a larger reply (said by
   * Content-Length, or found while reading) is dropped with the connection and becomes
   * `too_large`, so one huge reply never lifts memory by its size. Read with a `data`
   * listener: an async iterator over the body costs 5-35 µs more CPU per reply
   * (docs/benchmarks.md, run 16). A body destroyed before its end (the deadline's timer)
   * rejects, as does a body that fails.
   */
  private async readCapped(path: string, res: { headers: Record<string, string | string[] | undefined>; body: Readable }): Promise<Buffer> {
    const max = this.maxReplyBytes;
    const tooLarge = (what: string): ApiError => {
      res.body.destroy();
      return new ApiError({ code: 'too_large', endpoint: path, message: `the reply is larger than api.max_reply_bytes (${formatBytes(max)}): ${what}` });
    };
    const declared = Number(one(res.headers['content-length']));
    if (Number.isFinite(declared) && declared > max) throw tooLarge(`Content-Length ${formatBytes(declared)}`);
    return new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      const settle = (f: () => void): void => {
        if (settled) return;
        settled = true;
        f();
      };
      res.body.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > max) settle(() => reject(tooLarge(`more than ${formatBytes(max)} read, the rest not`)));
        else chunks.push(chunk);
      });
      res.body.once('end', () => settle(() => resolve(Buffer.concat(chunks, size))));
      // `on`, not `once`: a second error after the first must not go unhandled.
      res.body.on('error', (e: Error) => settle(() => reject(e)));
      res.body.once('close', () => settle(() => reject(new Error('the reply was cut off before its end'))));
    });
  }
}

/** Bytes as people read them: "16 MB", "62.9 MB", "800 bytes". */
export function formatBytes(n: number): string {
  if (n < 1024 * 1024) return n < 1024 ? `${n} bytes` : `${+(n / 1024).toFixed(1)} KB`;
  return `${+(n / (1024 * 1024)).toFixed(1)} MB`;
}

function hasBom(bytes: Buffer): boolean {
  return bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
}

/** What a 2xx reply that is no JSON was: nothing, a web page (a proxy's, a login's), or broken JSON. */
function notJsonMessage(status: number, text: string, size: number, contentType: string | undefined): string {
  if (text.trim() === '') return `an empty ${status} reply where JSON was expected`;
  const type = contentType === undefined ? '' : `, content-type ${contentType.split(';')[0]!.trim()}`;
  if (/^\s*</.test(text)) return `an HTML or XML page in a ${status} reply where JSON was expected (${size} bytes${type}): is api.base_url the API's address?`;
  return `malformed JSON in a ${status} reply (${size} bytes${type})`;
}

/** Where a redirect pointed, without its query (which could carry anything): it is not followed. */
function redirectTo(location: string | undefined): string {
  if (location === undefined) return 'a redirect, not followed';
  const where = location.split(/[?#]/)[0]!.slice(0, 200);
  return `a redirect to ${where}, not followed: is api.base_url the API's address?`;
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Build an ApiError from a non-2xx reply (A1: `{error: {code, message, details}}`, tolerant). */
function errorFromReply(
  endpoint: string,
  status: number,
  text: string,
  retryAfter: string | string[] | undefined,
  nowMs: number,
  location?: string,
): ApiError {
  let code = `http_${status}`;
  let message = status >= 300 && status < 400 ? `HTTP ${status}: ${redirectTo(location)}` : `HTTP ${status}`;
  let details: Record<string, unknown> = {};
  try {
    const body: unknown = JSON.parse(text);
    const e = isRecord(body) && isRecord(body['error']) ? body['error'] : body;
    if (isRecord(e)) {
      // The server's words, on one line: they end up in poll states, events and the CLI's rows.
      if (typeof e['code'] === 'string') code = oneLine(e['code']).slice(0, 100);
      if (typeof e['message'] === 'string') message = `${code}: ${oneLine(e['message']).slice(0, 300)}`;
      else message = `${code} (HTTP ${status})`;
      if (isRecord(e['details'])) details = e['details'];
    }
  } catch {
    // Not JSON (a proxy's HTML page, say): keep the status-derived code.
  }
  return new ApiError({
    code,
    endpoint,
    statusCode: status,
    message,
    details,
    retryable: isRetryableStatus(status),
    retryAfterMs: status === 429 || status === 503 ? parseRetryAfter(retryAfter, nowMs) : null,
  });
}

/** A3: Retry-After as delay-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  // An HTTP date (each of its three forms starts with the day's name): Date.parse alone
  // would read "1.5" as 5 January 2001, a pause already over.
  if (!/^[A-Za-z]{3}/.test(v.trim())) return null;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * What stands in for validators a server did not give: the first 96 bits of the SHA-1 of the
 * reply's bytes (base64). It is compared only with the same entity's previous reply, so a
 * false "not modified" needs a collision between two consecutive replies of one entity.
 */
export function bodyDigest(bytes: Buffer): string {
  // Encoded from the first 12 bytes, not sliced from the whole: a slice would keep the
  // longer string alive beside it, for every entity.
  return hash('sha1', bytes, 'buffer').toString('base64', 0, 12);
}

function validatorsOf(headers: Record<string, string | string[] | undefined>): Validators {
  const out: Validators = {};
  const etag = one(headers['etag']);
  const lastModified = one(headers['last-modified']);
  if (etag) out.etag = etag;
  if (lastModified) out.lastModified = lastModified;
  return out;
}

function toNetworkError(endpoint: string, e: unknown, timedOut: boolean): ApiError {
  const name = (e as { name?: string })?.name;
  const ucode = String((e as { code?: string })?.code ?? '');
  const timeout = timedOut || name === 'TimeoutError' || ucode.includes('TIMEOUT');
  const refusal = proxyRefusal(e);
  return new ApiError({
    code: timeout ? 'timeout' : 'network',
    endpoint,
    message: timeout ? 'request timed out' : refusal !== null ? `network error: ${refusal}` : networkMessage(ucode || name || ''),
    retryable: true,
  });
}

/** What the usual network failures mean, for people; the code stays for searches. */
const NETWORK_MEANINGS: Readonly<Record<string, string>> = {
  UND_ERR_SOCKET: 'the connection closed before the whole reply arrived',
  ECONNRESET: 'the connection was reset',
  ECONNREFUSED: 'the connection was refused (nothing listens at api.base_url)',
  ENOTFOUND: "api.base_url's host name was not found (DNS)",
  EAI_AGAIN: "api.base_url's host name could not be looked up now (DNS)",
  EHOSTUNREACH: "api.base_url's host cannot be reached",
  ENETUNREACH: 'the network is unreachable',
};

function networkMessage(code: string): string {
  const meaning = NETWORK_MEANINGS[code];
  return meaning === undefined ? `network error ${code}`.trim() : `network error: ${meaning} (${code})`;
}

function toQueryString(q: Query): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(q)) {
    if (v !== undefined) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}
