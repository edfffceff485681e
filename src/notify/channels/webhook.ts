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
 * An HTTP webhook in CloudEvents structured mode, signed per Standard Webhooks.
 * Only 2xx counts; redirects are not followed (a redirect could leak the event elsewhere).
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
    try {
      const res = await request(this.cfg.url, {
        method: 'POST',
        dispatcher: this.agent,
        headers: {
          'content-type': 'application/cloudevents+json; charset=utf-8',
          'user-agent': 'hostwatch',
          'webhook-id': event.id,
          'webhook-timestamp': String(ts),
          'webhook-signature': signWebhook(this.cfg.secret, event.id, ts, body),
        },
        body,
        headersTimeout: this.cfg.timeout_ms,
        bodyTimeout: this.cfg.timeout_ms,
        signal: AbortSignal.timeout(this.cfg.timeout_ms),
      });
      const answer = (await res.body.text()).slice(0, 200);
      return resultFromStatus(res.statusCode, answer, parseRetryAfter(res.headers['retry-after'], this.now()));
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
