import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import { parseRetryAfter } from '../../api/client.js';
import type { WebhookChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { resultFromStatus, type Channel, type SendResult } from '../channel.js';

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
 * An HTTP webhook carrying CloudEvents (structured or binary mode), signed per Standard
 * Webhooks. Only 2xx counts; redirects are not followed (a redirect could leak the event
 * elsewhere). A 410 Gone disables the channel: the receiver says it will never take more.
 * Webhooks are not grouped: each event is one request with its own id (docs/routing.md).
 */
export class WebhookChannel implements Channel {
  readonly type = 'webhook';
  readonly name: string;
  private readonly agent = new Agent({ keepAliveTimeout: 10_000 });

  constructor(
    private readonly cfg: WebhookChannelConfig,
    private readonly now: () => number = Date.now,
  ) {
    this.name = cfg.name;
  }

  /** POST the event; the webhook-id is the event id, so receivers can deduplicate retries. */
  async send(event: HostwatchEvent, body: string): Promise<SendResult> {
    const ts = Math.floor(this.now() / 1000);
    const req = cloudEventRequest(event, body, this.cfg.mode ?? 'structured');
    try {
      const res = await request(this.cfg.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          ...req.headers,
          'user-agent': 'hostwatch',
          'webhook-id': event.id,
          'webhook-timestamp': String(ts),
          'webhook-signature': signatureHeader(this.cfg.secrets, event.id, ts, req.body),
        },
        body: req.body,
        headersTimeout: this.cfg.timeout_ms,
        bodyTimeout: this.cfg.timeout_ms,
        signal: AbortSignal.timeout(this.cfg.timeout_ms),
      });
      const answer = (await res.body.text()).slice(0, 200);
      const result = resultFromStatus(res.statusCode, answer, parseRetryAfter(res.headers['retry-after'], this.now()));
      return res.statusCode === 410 && !result.ok ? { ...result, disable: true } : result;
    } catch (e) {
      const name = (e as { name?: string }).name;
      const code = (e as { code?: string }).code;
      const timeout = name === 'TimeoutError' || String(code).includes('TIMEOUT');
      return { ok: false, retryable: true, statusCode: null, error: timeout ? 'timed out' : `connection failed (${code ?? name})` };
    }
  }

  /** Close pooled connections. */
  async close(): Promise<void> {
    await this.agent.close();
  }
}
