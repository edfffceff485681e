import { IncomingWebhook, IncomingWebhookHTTPError, type FetchFunction } from '@slack/webhook';
import { fetch as undiciFetch } from 'undici';
import { parseRetryAfter } from '../../api/client.js';
import { proxyDispatcher } from '../../outbound.js';
import type { SlackChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import type { Channel, SendGate, SendResult } from '../channel.js';
import { Pacer, pacerOf, type SharedPacer } from './http.js';
import { cut, escapedCut, moreLine, oneLine, renderItem, subjectOf, summaryText, type ItemText } from './render.js';

/** Slack's limits: characters in one section's text, and blocks in one message. */
export const SLACK_SECTION_MAX = 3000;
export const SLACK_MAX_BLOCKS = 50;
/** Slack allows about one message a second per incoming webhook. */
export const SLACK_MIN_INTERVAL_MS = 1000;

/**
 * Answers of Slack's incoming webhooks that no retry fixes: the webhook or its channel is
 * gone or refuses us. The channel is marked misconfigured (disabled, with an operator
 * event), as issue 5 asks, `invalid_payload` included: the messages are built within
 * Slack's limits, so a refused payload means a broken setup, not one odd event.
 */
export const SLACK_PERMANENT_ERRORS = new Set([
  'invalid_payload',
  'invalid_token',
  'no_service',
  'no_service_id',
  'no_team',
  'team_disabled',
  'channel_not_found',
  'channel_is_archived',
  'action_prohibited',
  'posting_to_general_channel_denied',
  'user_not_found',
  'no_active_hooks',
]);

/**
 * Escape untrusted text for Slack mrkdwn: `&`, `<` and `>` are the control characters, so
 * `<!channel>` and `<http://x|y>` show literally and ping or link nobody.
 */
export function escapeMrkdwn(text: string): string {
  return text.replace(/[&<>]/g, mrkdwnChar);
}

function mrkdwnChar(char: string): string {
  return char === '&' ? '&amp;' : char === '<' ? '&lt;' : char === '>' ? '&gt;' : char;
}

/** Escaped text cut to `max` characters without splitting an entity or a surrogate pair. */
function escapedText(text: string, max: number): string {
  return escapedCut(text, max, mrkdwnChar);
}

/** The most characters of an event's title and of its place (a domain or subject) in a section. */
const TITLE_MAX = 200;
const WHERE_MAX = 300;

type Block = { type: 'section'; text: { type: 'mrkdwn'; text: string } } | { type: 'context'; elements: Array<{ type: 'mrkdwn'; text: string }> };

/**
 * The Block Kit message for a group of events, with a plain-text fallback: a heading
 * section, one section per event (each within 3000 characters), and when there are more
 * events than 50 blocks hold, a last line saying how many were left out.
 */
export function slackMessage(
  events: readonly HostwatchEvent[],
  say: ItemText = summaryText,
): { text: string; blocks: Block[]; unfurl_links: false; unfurl_media: false } {
  const heading = subjectOf(events, say).replace(/^\[hostwatch\] /, '');
  const items = events.map((e) => renderItem(e, say));
  const room = SLACK_MAX_BLOCKS - 2; // the heading, and a possible "more" line
  const shown = items.length <= SLACK_MAX_BLOCKS - 1 ? items : items.slice(0, room);
  const blocks: Block[] = [{ type: 'section', text: { type: 'mrkdwn', text: `*hostwatch*: ${escapedText(heading, SLACK_SECTION_MAX - 20)}` } }];
  for (const i of shown) {
    const head = `${i.icon} *${escapedText(i.title, TITLE_MAX)}*  ·  ${escapedText(i.where, WHERE_MAX)}\n`;
    const tail = `\n_${escapeMrkdwn(i.time)}_`;
    blocks.push({ type: 'section', text: { type: 'mrkdwn', text: head + escapedText(i.summary, SLACK_SECTION_MAX - head.length - tail.length) + tail } });
  }
  if (shown.length < items.length) {
    blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: moreLine(items.length - shown.length) }] });
  }
  const text = escapedText(`hostwatch: ${heading}`, SLACK_SECTION_MAX);
  return { text, blocks, unfurl_links: false, unfurl_media: false };
}

export interface SlackOptions {
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  minIntervalMs?: number;
  /** What each event says (a channel template); its summary by default. */
  text?: ItemText;
  /** Removes secrets from Slack's answer before it is cut (see HttpChannelOptions.scrub). */
  scrub?: (text: string) => string;
  /** Channels to the same webhook share its pacing (see pacerOf). */
  shared?: SharedPacer;
}

/**
 * A Slack incoming webhook through @slack/webhook (with a timeout, and without its own
 * retries: the outbox retries). Messages to one webhook are sent one at a time, at most
 * one a second (the Pacer every chat channel uses); a 429's Retry-After is honoured.
 */
export class SlackChannel implements Channel {
  readonly type = 'slack';
  readonly name: string;
  private readonly hook: IncomingWebhook;
  private readonly now: () => number;
  private readonly pacer: Pacer;
  private readonly say: ItemText;
  private readonly scrub: (text: string) => string;
  private lastRetryAfter: string | null = null;

  constructor(cfg: SlackChannelConfig, opts: SlackOptions = {}) {
    this.name = cfg.name;
    this.now = opts.now ?? Date.now;
    this.say = opts.text ?? summaryText;
    this.scrub = opts.scrub ?? ((t) => t);
    this.pacer = pacerOf(
      opts.shared,
      () =>
        new Pacer({
          label: 'Slack',
          minIntervalMs: opts.minIntervalMs ?? SLACK_MIN_INTERVAL_MS,
          now: this.now,
          sleep: opts.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms))),
        }),
    );
    // The library's HTTPError has no headers; this fetch keeps Retry-After for us.
    // Through the environment's proxy when it names one (undici's fetch takes its pool).
    const proxy = proxyDispatcher();
    const fetchKeepingRetryAfter: FetchFunction = async (url, init) => {
      const res = proxy ? ((await undiciFetch(url, { ...(init as object), dispatcher: proxy })) as unknown as Response) : await fetch(url, init as RequestInit);
      this.lastRetryAfter = res.headers.get('retry-after');
      return res;
    };
    this.hook = new IncomingWebhook(cfg.url, { timeout: cfg.timeout_ms, fetch: fetchKeepingRetryAfter, retryConfig: { retries: 0 } });
  }

  /** One event, one message. */
  send(event: HostwatchEvent, _body?: string, gate?: SendGate): Promise<SendResult> {
    return this.sendBatch([event], gate);
  }

  /** One message for the group, in turn with the other messages to this webhook. */
  sendBatch(events: readonly HostwatchEvent[], gate?: SendGate): Promise<SendResult> {
    return this.pacer.run(() => this.post(events), gate);
  }

  private async post(events: readonly HostwatchEvent[]): Promise<SendResult> {
    const message = slackMessage(events, this.say);
    this.lastRetryAfter = null;
    try {
      // No previews of links an event carries (a domain, a URL from the API).
      await this.hook.send(message);
      return { ok: true, statusCode: 200 };
    } catch (e) {
      if (e instanceof IncomingWebhookHTTPError) {
        const answer = cut(oneLine(this.scrub(e.body)), 200);
        const status = e.statusCode;
        const retryAfterMs = parseRetryAfter(this.lastRetryAfter ?? undefined, this.now());
        if (SLACK_PERMANENT_ERRORS.has(answer)) {
          return { ok: false, retryable: false, statusCode: status, error: `Slack: ${answer} (the webhook or its channel is misconfigured)`, disable: true };
        }
        const retryable = status === 408 || status === 429 || status >= 500;
        return { ok: false, retryable, statusCode: status, error: `Slack HTTP ${status}${answer ? `: ${answer}` : ''}`, retryAfterMs };
      }
      const cause = (e as { original?: { name?: string; cause?: { code?: string } } }).original;
      const timeout = cause?.name === 'TimeoutError' || cause?.name === 'AbortError';
      return { ok: false, retryable: true, statusCode: null, error: timeout ? 'Slack: timed out' : `Slack: connection failed (${cause?.cause?.code ?? cause?.name ?? 'error'})` };
    }
  }
}
