import type { HostwatchEvent } from '../events/types.js';

/**
 * The outcome of one delivery attempt. Each channel says whether a failure is worth
 * retrying (the Alertmanager model); the outbox worker decides when.
 */
export type SendResult =
  | { ok: true; statusCode: number | null }
  | {
      ok: false;
      retryable: boolean;
      statusCode: number | null;
      error: string;
      retryAfterMs?: number | null;
      /** The endpoint is gone or misconfigured (webhook 410, Slack's named errors): disable the channel. */
      disable?: boolean;
    };

/** The port every channel implements: send one event, report the outcome, never throw. */
export interface Channel {
  readonly name: string;
  readonly type: string;
  /** `body` is the exact stored JSON of `event` (what is signed and sent). */
  send(event: HostwatchEvent, body: string): Promise<SendResult>;
  /**
   * Channels that write for people (e-mail, Slack, Teams, Discord, Telegram, ntfy) send a
   * group of events as one message; the worker then hands them every due event of the
   * group at once.
   */
  sendBatch?(events: readonly HostwatchEvent[]): Promise<SendResult>;
  close?(): Promise<void>;
}
