import { Agent, request } from 'undici';
import { Semaphore } from '../semaphore.js';
import { isRecord } from '../is-record.js';
import { ApiError } from './errors.js';
import { replyScrubber } from './scrub.js';
import { DEFAULT_PAGE_SIZE, isRetryableStatus } from './assumptions.js';

/** What the client needs to know; everything time-related is injectable for tests. */
export interface ApiClientOptions {
  baseUrl: string;
  key: string;
  timeoutMs: number;
  maxRequestsPerSecond: number;
  maxConcurrency: number;
  retries: number;
  maxPages: number;
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

export type Query = Record<string, string | number | boolean | undefined>;

/** Validators the server gave with a reply (ETag / Last-Modified), for conditional requests. */
export interface Validators {
  etag?: string;
  lastModified?: string;
}

/** A conditional read: `notModified` when the server answered 304, else the data and new validators. */
export type ConditionalResult<T> = { notModified: true } | { notModified: false; data: T; validators: Validators };

interface Reply {
  body: unknown;
  validators: Validators;
  notModified: boolean;
}

/** The longest a 429 Retry-After may hold a poll; longer waits fail the poll instead. */
const MAX_RETRY_AFTER_MS = 60_000;
const MAX_BACKOFF_MS = 10_000;

/**
 * Read-only client of the Hosting Control API. It has no way to send anything but GET:
 * invariant 1 (read-only) is a property of its interface, not a convention.
 */
export class ApiClient {
  private readonly agent: Agent;
  private readonly root: string;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly limiter: RateLimiter;
  private readonly slots: Semaphore;
  private readonly scrub: (text: string, value: unknown) => unknown;

  constructor(private readonly opts: ApiClientOptions) {
    this.scrub = replyScrubber(opts.secrets ?? [opts.key]);
    this.root = opts.baseUrl.replace(/\/+$/, '') + '/api/v1';
    this.now = opts.now ?? Date.now;
    this.sleep = opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.random = opts.random ?? Math.random;
    this.limiter = new RateLimiter(opts.maxRequestsPerSecond, this.now, this.sleep);
    this.slots = new Semaphore(opts.maxConcurrency);
    this.agent = new Agent({ connections: Math.max(2, opts.maxConcurrency), keepAliveTimeout: 10_000 });
  }

  /** GET one resource and return its `data`. Retries transient failures. */
  async get(path: string, query: Query = {}): Promise<unknown> {
    const r = await this.getIfChanged(path, query);
    return (r as { data: unknown }).data;
  }

  /**
   * GET one resource, sending If-None-Match / If-Modified-Since from `prev` (the validators
   * of the last reply). A 304 is `notModified`: the caller keeps what it had.
   */
  async getIfChanged(path: string, query: Query = {}, prev?: Validators): Promise<ConditionalResult<unknown>> {
    const reply = await this.fetchJson(path, query, prev);
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
  async list(path: string, query: Query = {}, pageSize = DEFAULT_PAGE_SIZE): Promise<unknown[]> {
    const r = await this.listIfChanged(path, query, pageSize);
    return (r as { data: unknown[] }).data;
  }

  /**
   * Like list(), conditional on the first page: validators are only kept (and sent) for a
   * list that fit in one page, because a 304 on page 1 says nothing about later pages.
   */
  async listIfChanged(path: string, query: Query = {}, pageSize = DEFAULT_PAGE_SIZE, prev?: Validators): Promise<ConditionalResult<unknown[]>> {
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
      const reply = await this.fetchJson(path, { ...query, limit: pageSize, cursor }, page === 1 ? prev : undefined);
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
      // A plain (unpaged) list has neither field: one page is the whole list (A4, A5).
      if (body['has_more'] !== true) return { notModified: false, data: items, validators: page === 1 ? reply.validators : {} };
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

  private async fetchJson(path: string, query: Query, prev?: Validators): Promise<Reply> {
    let attempt = 0;
    for (;;) {
      try {
        return await this.once(path, query, prev);
      } catch (e) {
        const err = e instanceof ApiError ? e : toNetworkError(path, e);
        if (!err.retryable || attempt >= this.opts.retries) throw err;
        let wait: number;
        if (err.retryAfterMs !== null) {
          if (err.retryAfterMs > MAX_RETRY_AFTER_MS) throw err;
          wait = err.retryAfterMs;
        } else {
          // Full jitter (AWS architecture blog): spreads retries of many sites apart.
          wait = this.random() * Math.min(MAX_BACKOFF_MS, 250 * 2 ** attempt);
        }
        attempt++;
        await this.sleep(wait);
      }
    }
  }

  private async once(path: string, query: Query, prev?: Validators): Promise<Reply> {
    const url = this.root + path + toQueryString(query);
    await this.limiter.take();
    const release = await this.slots.acquire();
    const started = this.now();
    let status: number | null = null;
    let code: string | null = null;
    try {
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
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      status = res.statusCode;
      const text = await res.body.text();
      if (status === 304 && prev !== undefined) return { body: null, validators: prev, notModified: true };
      if (status >= 200 && status < 300) {
        try {
          return { body: this.scrub(text, JSON.parse(text)), validators: validatorsOf(res.headers), notModified: false };
        } catch {
          code = 'bad_response';
          throw new ApiError({
            code, endpoint: path, statusCode: status,
            message: `malformed JSON in a ${status} reply (${text.length} bytes)`,
            // A truncated body is usually a broken connection: worth one more try.
            retryable: true,
          });
        }
      }
      const err = errorFromReply(path, status, text, res.headers['retry-after'], this.now());
      code = err.code;
      throw err;
    } catch (e) {
      if (e instanceof ApiError) throw e;
      const err = toNetworkError(path, e);
      code = err.code;
      throw err;
    } finally {
      release();
      this.opts.onResponse?.({ endpoint: path, status, durationMs: this.now() - started, code });
    }
  }
}

/** Build an ApiError from a non-2xx reply (A1: `{error: {code, message, details}}`, tolerant). */
function errorFromReply(
  endpoint: string,
  status: number,
  text: string,
  retryAfter: string | string[] | undefined,
  nowMs: number,
): ApiError {
  let code = `http_${status}`;
  let message = `HTTP ${status}`;
  let details: Record<string, unknown> = {};
  try {
    const body: unknown = JSON.parse(text);
    const e = isRecord(body) && isRecord(body['error']) ? body['error'] : body;
    if (isRecord(e)) {
      if (typeof e['code'] === 'string') code = e['code'];
      if (typeof e['message'] === 'string') message = `${code}: ${e['message'].slice(0, 300)}`;
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
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

function validatorsOf(headers: Record<string, string | string[] | undefined>): Validators {
  const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);
  const out: Validators = {};
  const etag = one(headers['etag']);
  const lastModified = one(headers['last-modified']);
  if (etag) out.etag = etag;
  if (lastModified) out.lastModified = lastModified;
  return out;
}

function toNetworkError(endpoint: string, e: unknown): ApiError {
  const name = (e as { name?: string })?.name;
  const ucode = String((e as { code?: string })?.code ?? '');
  const timeout = name === 'TimeoutError' || ucode.includes('TIMEOUT');
  return new ApiError({
    code: timeout ? 'timeout' : 'network',
    endpoint,
    message: timeout ? 'request timed out' : `network error ${ucode || name || ''}`.trim(),
    retryable: true,
  });
}

function toQueryString(q: Query): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(q)) {
    if (v !== undefined) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}


/** Spaces requests at least 1/rate apart (a leaky bucket), fair in arrival order. */
class RateLimiter {
  private nextSlot = 0;
  private readonly interval: number;
  constructor(rate: number, private readonly now: () => number, private readonly sleep: (ms: number) => Promise<void>) {
    this.interval = 1000 / rate;
  }
  /** Wait for this request's slot. */
  async take(): Promise<void> {
    const now = this.now();
    const slot = Math.max(now, this.nextSlot);
    this.nextSlot = slot + this.interval;
    if (slot > now) await this.sleep(slot - now);
  }
}
