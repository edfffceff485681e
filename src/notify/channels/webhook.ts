import { createHmac } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import { outboundAgent } from '../../outbound.js';
import { parseRetryAfter } from '../../api/client.js';
import type { Template } from 'liquidjs';
import type { WebhookChannelConfig, WebhookTemplateConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import type { Channel, SendGate, SendResult } from '../channel.js';
import { compileTemplate, renderTemplate } from '../templates.js';
import { detailOf, networkFailure, Pacer, readSome, resultOf, standardVerdict } from './http.js';
import { oneLine } from './render.js';

/**
 * Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 over `id.timestamp.body`, keyed
 * with the base64-decoded part of the `whsec_` secret.
 */
export function signWebhook(secret: string, id: string, timestampSec: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSec}.${body}`).digest('base64')}`;
}

/**
 * The webhook-signature header: one `v1,<sig>` per secret, space-separated. While a secret
 * is rotated both sign, and a receiver verifies if any one matches (Standard Webhooks).
 */
export function signatureHeader(secrets: readonly string[], id: string, timestampSec: number, body: string): string {
  return secrets.map((s) => signWebhook(s, id, timestampSec, body)).join(' ');
}

/**
 * The HTTP body and CloudEvents headers of an event. Structured mode (the default) sends
 * the stored event as it is; binary mode sends `data` as the body and the other
 * attributes as ce-* headers.
 */
export function cloudEventRequest(event: HostwatchEvent, stored: string, mode: 'structured' | 'binary'): { body: string; headers: Record<string, string> } {
  if (mode === 'structured') return { body: stored, headers: { 'content-type': 'application/cloudevents+json; charset=utf-8' } };
  return {
    body: JSON.stringify(event.data),
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'ce-specversion': ceHeader(event.specversion),
      'ce-id': ceHeader(event.id),
      'ce-source': ceHeader(event.source),
      'ce-type': ceHeader(event.type),
      'ce-subject': ceHeader(event.subject),
      'ce-time': ceHeader(event.time),
    },
  };
}

/**
 * A ce-* header value as the CloudEvents HTTP binding (3.1.3.2) wants it: space, `"`, `%`
 * and everything outside printable ASCII percent-encoded as UTF-8. A subject can hold an
 * API-supplied key (a file path, a review url); raw, a non-Latin-1 character or a line
 * break makes the request impossible to send, and it would be retried for days.
 */
export function ceHeader(value: string): string {
  return value.replace(/[^\u0021-\u007E]|["%]/gu, (c) => encodeURIComponent(c).replace(/"/g, '%22'));
}

/**
 * How long the body of an answer is read once its status arrived: enough for a receiver's
 * error text, never a wait for a slow or endless body (the status alone decides the attempt).
 */
const ANSWER_GRACE_MS = 1_000;

/** A webhook template, parsed once: the body, the headers and the content type. */
export interface CompiledWebhookTemplate {
  body: Template[];
  headers: Array<[string, Template[]]>;
  contentType: string;
}

/** Parse a webhook's template (validated by the config check already). */
export function compileWebhookTemplate(t: WebhookTemplateConfig): CompiledWebhookTemplate {
  return {
    body: compileTemplate(t.body),
    headers: Object.entries(t.headers).map(([name, value]) => [name, compileTemplate(value)]),
    contentType: t.content_type,
  };
}

/**
 * A header value from a template: line breaks and control characters become spaces (an
 * API text cannot add a header), and characters outside printable ASCII are
 * percent-encoded as UTF-8 (HTTP cannot carry them raw).
 */
export function headerValue(text: string): string {
  return oneLine(text).replace(/[^\u0020-\u007E]/gu, (c) => encodeURIComponent(c));
}

/** The body and headers a webhook template renders for an event; throws when the event cannot fill it. */
export function templateRequest(t: CompiledWebhookTemplate, event: HostwatchEvent): { body: string; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  for (const [name, value] of t.headers) headers[name.toLowerCase()] = headerValue(renderTemplate(value, event));
  headers['content-type'] = t.contentType;
  return { body: renderTemplate(t.body, event), headers };
}

/**
 * An HTTP webhook carrying CloudEvents (structured or binary mode), signed per Standard
 * Webhooks, or, with a `template`, the body and headers the user wrote (signed too when a
 * secret is set). Only 2xx counts; redirects are not followed (a redirect could leak the
 * event elsewhere). A 410 Gone disables the channel: the receiver says it will never take
 * more. Sends go in parallel, except after a 429: later ones wait for its Retry-After (up
 * to 10 s) or go back to the outbox with it. Webhooks are not grouped: each event is one request with its own id (docs/routing.md).
 */
export class WebhookChannel implements Channel {
  readonly type = 'webhook';
  readonly name: string;
  private readonly agent = outboundAgent({ keepAliveTimeout: 10_000 });
  private readonly template: CompiledWebhookTemplate | null;
  /** Sends stay parallel; only a 429 holds the later ones (they wait, or go back to the outbox). */
  private readonly pacer: Pacer;

  constructor(
    private readonly cfg: WebhookChannelConfig,
    private readonly now: () => number = Date.now,
    /** Removes secrets from a receiver's answer before it is cut (see HttpChannelOptions.scrub). */
    private readonly scrub: (text: string) => string = (t) => t,
    sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {
    this.name = cfg.name;
    this.template = cfg.template ? compileWebhookTemplate(cfg.template) : null;
    this.pacer = new Pacer({ label: 'webhook', minIntervalMs: 0, now, sleep, concurrent: true });
  }

  /** POST the event; the webhook-id is the event id, so receivers can deduplicate retries. */
  send(event: HostwatchEvent, body: string, gate?: SendGate): Promise<SendResult> {
    return this.pacer.run(() => this.post(event, body), gate);
  }

  private async post(event: HostwatchEvent, body: string): Promise<SendResult> {
    const ts = Math.floor(this.now() / 1000);
    let req: { body: string; headers: Record<string, string> };
    try {
      req = this.template ? templateRequest(this.template, event) : cloudEventRequest(event, body, this.cfg.mode ?? 'structured');
    } catch (e) {
      // Only an event can show this (a label the template names and it lacks): no retry fixes it.
      return { ok: false, retryable: false, statusCode: null, error: `template: ${(e as Error).message}` };
    }
    try {
      const res = await request(this.cfg.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          ...req.headers,
          'user-agent': 'hostwatch',
          'webhook-id': event.id,
          'webhook-timestamp': String(ts),
          ...(this.cfg.secrets.length > 0 ? { 'webhook-signature': signatureHeader(this.cfg.secrets, event.id, ts, req.body) } : {}),
        },
        body: req.body,
        headersTimeout: this.cfg.timeout_ms,
        bodyTimeout: this.cfg.timeout_ms,
        signal: AbortSignal.timeout(this.cfg.timeout_ms),
      });
      // The status decides: a 2xx is delivered however slow or large its body. The body is
      // read only to explain a failure: its first 4 KB, for a moment at most, stored on one
      // line (no line break or terminal escape can forge a row of `hostwatch deliveries`).
      const answer = detailOf(this.scrub(await readSome(res.body, ANSWER_GRACE_MS)), () => null);
      const result = resultOf('', res.statusCode, standardVerdict(res.statusCode, answer, parseRetryAfter(res.headers['retry-after'], this.now()), []));
      // 410 Gone: the receiver will never take more (its reason is stored as it answered, on one line).
      return res.statusCode === 410 && !result.ok ? { ...result, disable: true } : result;
    } catch (e) {
      return networkFailure('', e);
    }
  }

  /** Close pooled connections. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}
