import type { SendResult } from './channel.js';

/** Standard Webhooks' schedule after the first (immediate) attempt: 5s, 5m, 30m, 2h, 5h, 10h, 14h, 20h, 24h. */
export const DEFAULT_RETRY_SCHEDULE_MS = [5e3, 5 * 60e3, 30 * 60e3, 2 * 3600e3, 5 * 3600e3, 10 * 3600e3, 14 * 3600e3, 20 * 3600e3, 24 * 3600e3];

/**
 * The longest wait a server may ask for one retry (a Retry-After, a provider's own wait): the
 * default schedule's longest step. A longer wait counts as this long, so every row still ends
 * delivered or dead-lettered within days (a 503 asking for ten years parked its row for good).
 */
export const MAX_SERVER_WAIT_MS = 24 * 3600e3;

export type NextStep =
  | { state: 'delivered' }
  | { state: 'pending'; nextAttemptAt: number }
  | { state: 'dead'; reason: string };

/**
 * What happens to an outbox row after attempt number `attempts` (1-based) gave `result`.
 * Pure. Jitter of ±20% keeps a receiver that comes back from being hit by every row at once;
 * a server's Retry-After is honoured when it is longer than the scheduled delay, up to
 * MAX_SERVER_WAIT_MS.
 */
export function nextStep(
  result: SendResult,
  attempts: number,
  schedule: readonly number[],
  now: number,
  random: () => number,
): NextStep {
  if (result.ok) return { state: 'delivered' };
  if (!result.retryable) return { state: 'dead', reason: `permanent failure: ${result.error}` };
  const delay = schedule[attempts - 1];
  if (delay === undefined) return { state: 'dead', reason: `gave up after ${attempts} attempts: ${result.error}` };
  // Whole milliseconds: a time column is BIGINT on PostgreSQL (a fraction is refused there).
  const jittered = Math.round(delay * (0.8 + 0.4 * random()));
  const serverWait = Math.min(result.retryAfterMs ?? 0, MAX_SERVER_WAIT_MS);
  return { state: 'pending', nextAttemptAt: now + Math.max(jittered, serverWait) };
}
