import nodemailer, { type Transporter } from 'nodemailer';
import { isLoopback } from '../../config/schema.js';
import type { EmailChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { Semaphore } from '../../semaphore.js';
import { notSent, type Channel, type SendGate, type SendResult } from '../channel.js';
import { cut, oneLine, renderItem, subjectOf } from './render.js';

/** Escape text for HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** The text and HTML bodies of a message about `events`. Every API-supplied string is escaped in the HTML. */
export function emailBodies(events: readonly HostwatchEvent[]): { subject: string; text: string; html: string } {
  const items = events.map((e) => renderItem(e));
  const text = [
    events.length === 1 ? 'hostwatch event:' : `hostwatch: ${events.length} events`,
    '',
    ...items.flatMap((i) => [`${i.icon} ${i.title} — ${i.summary}`, `   ${i.where} · ${i.time} · id ${i.id}`]),
    '',
  ].join('\n');
  const rows = items
    .map(
      (i) =>
        `<tr><td>${i.icon}</td><td><b>${escapeHtml(i.title)}</b><br>${escapeHtml(i.summary)}</td>` +
        `<td>${escapeHtml(i.where)}</td><td>${escapeHtml(i.time)}</td><td><code>${escapeHtml(i.id)}</code></td></tr>`,
    )
    .join('\n');
  const html =
    `<!doctype html><html><body><p>${events.length === 1 ? 'hostwatch event' : `hostwatch: ${events.length} events`}</p>\n` +
    `<table cellpadding="4"><tr><th></th><th>event</th><th>where</th><th>time</th><th>id</th></tr>\n${rows}\n</table></body></html>`;
  return { subject: subjectOf(events), text, html };
}

/** SMTP answers that mean the channel itself is wrong (bad login), not this one message. */
const AUTH_FAILED = new Set([530, 534, 535]);

/**
 * Map a nodemailer error to a result: a 5xx answer is permanent (dead-lettered with the
 * server's words), a 4xx answer and a connection problem are retried, a refused login
 * disables the channel.
 */
export function resultFromSmtpError(e: unknown): SendResult {
  const err = e as { responseCode?: number; response?: string; code?: string; message?: string };
  const status = typeof err.responseCode === 'number' ? err.responseCode : null;
  // One line, as every channel's error is stored: a multi-line SMTP answer or TLS error text must not break a row.
  const answer = cut(oneLine(err.response ?? err.message ?? String(e)), 300);
  if (err.code === 'ETLS') {
    // smtp.require_tls and no encryption: nothing was sent. Tried again like a connection
    // that failed (STARTTLS stripped in the path is a passing fault; a server without it is
    // not, and the channel is disabled in the end).
    return {
      ok: false,
      retryable: true,
      statusCode: status,
      error: `SMTP connection not encrypted (STARTTLS failed: ${answer}); smtp.require_tls keeps the password and the message from going in clear text (set it to false for a server without TLS)`,
    };
  }
  if (status !== null && status >= 500) {
    return { ok: false, retryable: false, statusCode: status, error: `SMTP ${answer}`, disable: AUTH_FAILED.has(status) || err.code === 'EAUTH' };
  }
  if (status !== null) return { ok: false, retryable: true, statusCode: status, error: `SMTP ${answer}` };
  return { ok: false, retryable: true, statusCode: null, error: `SMTP connection failed (${err.code ?? 'error'}): ${answer}` };
}

/** E-mail over SMTP with one pooled nodemailer transport; a group of events is one message. */
export class EmailChannel implements Channel {
  readonly type = 'email';
  readonly name: string;
  private readonly transport: Transporter;
  /** The SMTP connections of the pool: messages beyond them wait here for one (see sendBatch). */
  static readonly CONNECTIONS = 2;
  private readonly connections = new Semaphore(EmailChannel.CONNECTIONS);

  constructor(private readonly cfg: EmailChannelConfig) {
    this.name = cfg.name;
    this.transport = nodemailer.createTransport({
      pool: true,
      maxConnections: EmailChannel.CONNECTIONS,
      host: cfg.smtp.host,
      port: cfg.smtp.port,
      secure: cfg.smtp.secure,
      // STARTTLS or nothing: without it the message (and the password) is not sent.
      requireTLS: cfg.smtp.require_tls && !cfg.smtp.secure,
      auth: cfg.smtp.user && cfg.smtp.pass ? { user: cfg.smtp.user, pass: cfg.smtp.pass } : undefined,
      // A relay on this machine (loopback) with require_tls off: traffic that never leaves the
      // machine, where a stock relay's certificate is self-signed (Postfix's "snakeoil").
      // STARTTLS is still used when offered, without checking that certificate.
      ...(isLoopback(cfg.smtp.host) && !cfg.smtp.require_tls ? { tls: { rejectUnauthorized: false } } : {}),
      connectionTimeout: cfg.timeout_ms,
      greetingTimeout: cfg.timeout_ms,
      socketTimeout: cfg.timeout_ms,
    });
  }

  /** One event, one message. */
  send(event: HostwatchEvent, _body?: string, gate?: SendGate): Promise<SendResult> {
    return this.sendBatch([event], gate);
  }

  /** One message listing every event of the group. */
  async sendBatch(events: readonly HostwatchEvent[], gate?: SendGate): Promise<SendResult> {
    // A message waits here for one of the pool's connections, and is asked once it has one.
    const release = await this.connections.acquire();
    try {
      const held = gate?.() ?? null;
      return held === null ? await this.sendNow(events) : notSent(held);
    } finally {
      release();
    }
  }

  private async sendNow(events: readonly HostwatchEvent[]): Promise<SendResult> {
    const { subject, text, html } = emailBodies(events);
    try {
      const info = await this.transport.sendMail({
        from: this.cfg.from,
        to: this.cfg.to,
        subject,
        text,
        html,
        headers: { 'X-Hostwatch-Event-Ids': events.map((e) => e.id).join(' ') },
      });
      if ((info.rejected?.length ?? 0) > 0 && (info.accepted?.length ?? 0) === 0) {
        return { ok: false, retryable: false, statusCode: null, error: `SMTP rejected every recipient: ${String(info.response)}` };
      }
      return { ok: true, statusCode: Number(String(info.response).slice(0, 3)) || 250 };
    } catch (e) {
      return resultFromSmtpError(e);
    }
  }

  /** Close the pooled connections. */
  async close(): Promise<void> {
    this.transport.close();
  }
}
