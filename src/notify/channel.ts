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
      /** Nothing was sent: the gate said no once the message's turn came (nothing to record). */
      notSent?: boolean;
      /**
       * With `notSent`: not before this time (epoch ms; a provider's rate limit holds every
       * message to it). The rows wait in the outbox until then, with no attempt counted.
       */
      notBefore?: number;
    };

/**
 * Asked right before a message goes on the wire, after any wait for its turn (a provider's
 * pace, a free SMTP connection): a reason not to send it now (the worker is stopping, or this
 * cluster member's lease may have run out), or null to send it. A message held back this way
 * comes back `notSent` and its rows stay as they were.
 */
export type SendGate = () => string | null;

/** The result of a message the gate held back. */
export function notSent(reason: string): SendResult {
  return { ok: false, retryable: true, statusCode: null, error: `not sent: ${reason}`, notSent: true };
}

/** The port every channel implements: send one event, report the outcome, never throw. */
export interface Channel {
  readonly name: string;
  readonly type: string;
  /** `body` is the exact stored JSON of `event` (what is signed and sent); `gate`: see SendGate. */
  send(event: HostwatchEvent, body: string, gate?: SendGate): Promise<SendResult>;
  /**
   * Channels that write for people (e-mail, Slack, Teams, Discord, Telegram, ntfy) send a
   * group of events as one message; the worker then hands them every due event of the
   * group at once.
   */
  sendBatch?(events: readonly HostwatchEvent[], gate?: SendGate): Promise<SendResult>;
  close?(): Promise<void>;
}
