import type { Readable } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { outboundAgent, proxyRefusal } from '../../outbound.js';
import { parseRetryAfter } from '../../api/client.js';
import type { HostwatchEvent } from '../../events/types.js';
import { notSent, type Channel, type SendGate, type SendResult } from '../channel.js';
import { MAX_SERVER_WAIT_MS } from '../retry.js';
import { cut, oneLine } from './render.js';

/**
 * What every channel that POSTs JSON to a provider shares (Teams, Discord, PagerDuty,
 * Opsgenie, Telegram, ntfy): one pooled connection per channel, a timeout, no redirects,
 * pacing per endpoint (Pacer, also used by Slack), and one reading of an answer into a
 * SendResult. A provider adds only what is its own: the request it builds and what its
 * answers mean (a Verdict).
 */

/** A provider's answer, as far as a channel reads it. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as text (the first 4 KB: enough for any error a provider sends). */
  body: string;
}

/** One request to a provider. */
export interface OutgoingRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/**
 * What a provider's answer means:
 * - ok: delivered;
 * - retry: try again on the outbox schedule (5xx, 429, timeouts), after `retryAfterMs` if the provider said so;
 * - dead: this message will never be taken (a payload the provider refuses): dead-lettered;
 * - disable: the endpoint is gone or the credential is wrong: no message will be taken, so
 *   the channel is disabled with an operator event.
 */
export type Verdict =
  | { kind: 'ok' }
  | { kind: 'retry'; detail: string; retryAfterMs?: number | null }
  | { kind: 'dead'; detail: string }
  | { kind: 'disable'; detail: string };

/**
 * The SendResult of a verdict, its error text naming the provider (when `label` is not
 * empty), the status and the provider's words.
 */
export function resultOf(label: string, status: number, v: Verdict): SendResult {
  if (v.kind === 'ok') return { ok: true, statusCode: status };
  const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
  const error = `${label ? `${label} ` : ''}HTTP ${status}${redirect}${v.detail ? `: ${v.detail}` : ''}`;
  if (v.kind === 'retry') return { ok: false, retryable: true, statusCode: status, error, retryAfterMs: v.retryAfterMs ?? null };
  if (v.kind === 'dead') return { ok: false, retryable: false, statusCode: status, error };
  return { ok: false, retryable: false, statusCode: status, error: `${error} (the channel is misconfigured or gone)`, disable: true };
}

/**
 * The verdict every provider starts from: 2xx ok; statuses in `disableOn` (the provider's
 * "wrong credential" and "gone") disable; 408, 429 and 5xx retry; redirects and other 4xx
 * are permanent for this message.
 */
export function standardVerdict(status: number, detail: string, retryAfterMs: number | null, disableOn: readonly number[]): Verdict {
  if (status >= 200 && status < 300) return { kind: 'ok' };
  if (disableOn.includes(status)) return { kind: 'disable', detail };
  if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', detail, retryAfterMs };
  return { kind: 'dead', detail };
}

/** The body as JSON, or null when it is not JSON. */
export function jsonOf(body: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(body);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * A provider's words for an error, on one line and at most 300 characters: what `pick`
 * finds in its JSON, else the raw body. Stored and logged after secrets are scrubbed.
 */
export function detailOf(body: string, pick: (json: Record<string, unknown>) => string | null): string {
  const json = jsonOf(body);
  const picked = json ? pick(json) : null;
  return cut(oneLine(picked ?? body), 300);
}

/** A Retry-After header (seconds or a date), in milliseconds from now. */
export function retryAfterHeader(answer: HttpAnswer, now: number): number | null {
  return parseRetryAfter(answer.headers['retry-after'], now);
}

/** A header's first value. */
export function header(answer: HttpAnswer, name: string): string | undefined {
  const v = answer.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A request that got no answer (timeout, refused, reset): always worth retrying. */
export function networkFailure(prefix: string, e: unknown): SendResult {
  const name = (e as { name?: string }).name;
  const code = (e as { code?: string }).code;
  const timeout = name === 'TimeoutError' || name === 'AbortError' || String(code).includes('TIMEOUT');
  const what = timeout ? 'timed out' : `connection failed (${proxyRefusal(e) ?? code ?? name ?? 'error'})`;
  return { ok: false, retryable: true, statusCode: null, error: prefix ? `${prefix}: ${what}` : what };
}

export interface PacerOptions {
  /** Names the provider in the error of a message held back. */
  label: string;
  /** The least time between two requests to the endpoint. */
  minIntervalMs: number;
  /**
   * The longest a message waits in turn. When the provider said to wait longer (a 429, an
   * exhausted rate-limit bucket), the message is not sent now but handed back to the outbox
   * with that wait, so it holds no worker slot and costs the provider no refused request.
   */
  maxWaitMs?: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /**
   * True: messages do not wait for each other's turn, only for a time the endpoint named (a
   * 429's Retry-After). For a webhook, whose receiver takes requests in parallel.
   */
  concurrent?: boolean;
}

/** How long a message may wait in turn before it is handed back to the outbox instead. */
export const DEFAULT_MAX_WAIT_MS = 10_000;

/**
 * Messages to one endpoint, one at a time (unless `concurrent`), at least `minIntervalMs`
 * apart, and never before a time the provider named (a 429's Retry-After, rate-limit reset
 * headers).
 */
export class Pacer {
  private queue: Promise<unknown> = Promise.resolve();
  private nextSlot = 0;
  private readonly maxWaitMs: number;

  constructor(private readonly o: PacerOptions) {
    this.maxWaitMs = o.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  }

  /** No request before `at` (milliseconds since the epoch), at most MAX_SERVER_WAIT_MS from now. */
  holdUntil(at: number): void {
    this.nextSlot = Math.max(this.nextSlot, Math.min(at, this.o.now() + MAX_SERVER_WAIT_MS));
  }

  /**
   * Run `task` in turn; a message that would wait too long comes back `notSent` with the time
   * it may go (`notBefore`), and one the gate holds back once its turn came comes back
   * `notSent` (nothing was sent either way).
   */
  run(task: () => Promise<SendResult>, gate?: SendGate): Promise<SendResult> {
    const turn = this.o.concurrent ? Promise.resolve() : this.queue;
    const run = turn.then(async (): Promise<SendResult> => {
      const wait = this.nextSlot - this.o.now();
      if (wait > this.maxWaitMs) {
        // Nothing goes out: the message waits in the outbox, with no attempt counted against
        // its retries (a rate limit is no failure of this message).
        const until = new Date(this.nextSlot).toISOString();
        return { ok: false, retryable: true, statusCode: null, error: `${this.o.label}: held back until ${until} (the provider's rate limit)`, retryAfterMs: wait, notSent: true, notBefore: this.nextSlot };
      }
      // Asked when its turn comes, and again after a wait for the provider's pace.
      let held = gate?.() ?? null;
      if (held === null && wait > 0) {
        await this.o.sleep(wait);
        held = gate?.() ?? null;
      }
      if (held !== null) return notSent(held);
      const result = await task();
      const now = this.o.now();
      this.holdUntil(now + this.o.minIntervalMs);
      // A 429 holds every later message to this endpoint too: they wait, or go back to the outbox.
      if (!result.ok && result.statusCode === 429) this.holdUntil(now + (result.retryAfterMs ?? 1_000));
      return result;
    });
    if (!this.o.concurrent) this.queue = run.catch(() => undefined);
    return run;
  }
}

/** What makes a provider: its name, pacing, the request it builds and how it reads answers. */
export interface Provider {
  /** Names the provider in error texts ("Discord HTTP 404: Unknown Webhook"). */
  readonly label: string;
  readonly minIntervalMs: number;
  /**
   * True: one request carries a group of events (a chat message). False: one request per
   * event (a pager's trigger or resolve); `request` then always gets one event.
   */
  readonly groups: boolean;
  /** The request for the events of one message. */
  request(events: readonly HostwatchEvent[]): OutgoingRequest;
  /** What an answer to the request for `events` means. */
  judge(answer: HttpAnswer, now: number, events: readonly HostwatchEvent[]): Verdict;
  /** A time before which the next request must not go, when the answer says so (rate-limit headers). */
  holdUntil?(answer: HttpAnswer, now: number): number | null;
}

export interface HttpChannelOptions {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  maxWaitMs?: number;
  /**
   * Removes secrets from a provider's answer before it is read and cut: a provider that
   * echoes a token must not leave half of it behind a cut, where no scrubber finds it.
   */
  scrub?: (text: string) => string;
  /** Channels to the same endpoint share its pacing (see pacerOf). */
  shared?: SharedPacer;
}

/** One endpoint's pacer among the app's (`key` names the endpoint; see pacerOf). */
export interface SharedPacer {
  pacers: Map<string, Pacer>;
  key: string;
}

/**
 * The pacer of an endpoint: one per endpoint, so that two channels sending to one webhook
 * (two templates to one Discord channel) keep its pace and its rate limits together.
 */
export function pacerOf(shared: SharedPacer | undefined, make: () => Pacer): Pacer {
  if (!shared) return make();
  let p = shared.pacers.get(shared.key);
  if (!p) shared.pacers.set(shared.key, (p = make()));
  return p;
}

/** The most of an answer's body read: provider errors are short, and a huge body must not fill memory. */
const MAX_ANSWER_BYTES = 4096;

/** A channel that POSTs JSON to a provider, paced, with the provider's reading of every answer. */
export class HttpChannel implements Channel {
  private readonly agent = outboundAgent({ keepAliveTimeout: 10_000 });
  private readonly pacer: Pacer;
  private readonly now: () => number;
  private readonly scrub: (text: string) => string;

  constructor(
    readonly name: string,
    readonly type: string,
    private readonly provider: Provider,
    private readonly timeoutMs: number,
    opts: HttpChannelOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.scrub = opts.scrub ?? ((t) => t);
    this.pacer = pacerOf(
      opts.shared,
      () =>
        new Pacer({
          label: provider.label,
          minIntervalMs: provider.minIntervalMs,
          maxWaitMs: opts.maxWaitMs,
          now: this.now,
          sleep: opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))),
        }),
    );
    if (provider.groups) this.sendBatch = (events, gate) => this.pacer.run(() => this.post(events), gate);
  }

  /**
   * One request for a group of events, in turn with the other requests to this endpoint.
   * Only providers that group have it: the outbox then hands them a group's due events.
   */
  readonly sendBatch?: (events: readonly HostwatchEvent[], gate?: SendGate) => Promise<SendResult>;

  /** One event, one request, in turn with the other requests to this endpoint. */
  send(event: HostwatchEvent, _body?: string, gate?: SendGate): Promise<SendResult> {
    return this.pacer.run(() => this.post([event]), gate);
  }

  private async post(events: readonly HostwatchEvent[]): Promise<SendResult> {
    const req = this.provider.request(events);
    let answer: HttpAnswer;
    try {
      const res = await request(req.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: { 'user-agent': 'hostwatch', ...req.headers },
        body: req.body,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      answer = { status: res.statusCode, headers: res.headers, body: this.scrub(await readSome(res.body)) };
    } catch (e) {
      return networkFailure(this.provider.label, e);
    }
    const now = this.now();
    const hold = this.provider.holdUntil?.(answer, now) ?? null;
    if (hold !== null) this.pacer.holdUntil(hold);
    return resultOf(this.provider.label, answer.status, this.provider.judge(answer, now, events));
  }

  /** Close pooled connections. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}

/**
 * The first MAX_ANSWER_BYTES of a body as text. Without `graceMs`, the rest is drained and
 * dropped (the connection can be used again). With it, the answer's status already decides
 * the attempt and the body only explains a failure: reading stops at MAX_ANSWER_BYTES or
 * after `graceMs`, whichever comes first, the body is destroyed, and an error while reading
 * (the channel's timeout, a reset) ends it too. What arrived by then is the text.
 */
export async function readSome(body: Readable, graceMs?: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  const timer = graceMs === undefined ? null : setTimeout(() => body.destroy(), graceMs);
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      if (size < MAX_ANSWER_BYTES) chunks.push(chunk);
      size += chunk.length;
      // Leaving the loop destroys the body: a receiver streaming a huge answer is not read on.
      if (timer !== null && size >= MAX_ANSWER_BYTES) break;
    }
  } catch (e) {
    if (timer === null) throw e;
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
}
