import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { Store } from '../store/db.js';
import type { DueDelivery, EventsRepo } from '../store/events-repo.js';
import type { Channel, SendResult } from './channel.js';
import { nextStep } from './retry.js';

export interface OutboxWorkerDeps {
  store: Store;
  events: EventsRepo;
  channels: ReadonlyMap<string, Channel>;
  retryScheduleMs: readonly number[];
  concurrency: number;
  now: () => number;
  random: () => number;
  log: Logger;
  scrub: (text: string) => string;
  /** Called after each attempt (demo output, metrics, tests). */
  onAttempt?: (info: { event: HostwatchEvent; channel: string; attempt: number; result: SendResult; state: string; durationMs: number }) => void;
}

/** The longest the worker sleeps before looking at the outbox again, even with nothing due. */
const IDLE_POLL_MS = 1_000;

/**
 * Delivers outbox rows: at least once, with the same event id every time (invariant 5).
 * A row is pending until a channel accepts it or it is dead-lettered; a crash in the middle
 * of a send leaves it pending, so it is sent again after a restart.
 */
export class OutboxWorker {
  private readonly inFlight = new Set<number>();
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  constructor(private readonly deps: OutboxWorkerDeps) {}

  /** Start the background loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Look at the outbox now (new events were committed). */
  kick(): void {
    this.wake?.();
  }

  /** Stop taking new rows and wait for the attempts in flight to finish. */
  async stop(): Promise<void> {
    this.running = false;
    this.kick();
    await this.loop;
  }

  /**
   * Deliver until nothing is pending or `timeoutMs` has passed (for `poll --once`).
   * Returns how many rows are still pending.
   */
  async drain(timeoutMs: number, sleep: (ms: number) => Promise<void> = delay): Promise<number> {
    const deadline = this.deps.now() + timeoutMs;
    for (;;) {
      await this.deliverDue();
      const next = this.deps.events.nextDue();
      if (next === null) return 0;
      const now = this.deps.now();
      if (next > deadline || now >= deadline) return this.deps.events.count('pending');
      await sleep(Math.max(0, Math.min(next - now, deadline - now)));
    }
  }

  /** One pass: send every row that is due now (bounded concurrency). Returns rows attempted. */
  async deliverDue(): Promise<number> {
    let attempted = 0;
    for (;;) {
      const rows = this.deps.events
        .due(this.deps.now(), this.deps.concurrency * 4)
        .filter((r) => !this.inFlight.has(r.id));
      if (rows.length === 0) return attempted;
      await mapLimit(rows, this.deps.concurrency, (r) => this.attempt(r));
      attempted += rows.length;
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.deliverDue();
      } catch (e) {
        this.deps.log.error({ err: this.deps.scrub(String(e)) }, 'outbox worker pass failed');
      }
      if (!this.running) break;
      const next = this.deps.events.nextDue();
      const wait = next === null ? IDLE_POLL_MS : Math.min(IDLE_POLL_MS, Math.max(0, next - this.deps.now()));
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, wait);
      });
      if (this.timer) clearTimeout(this.timer);
      this.wake = null;
    }
  }

  private async attempt(row: DueDelivery): Promise<void> {
    this.inFlight.add(row.id);
    try {
      const event = JSON.parse(row.body) as HostwatchEvent;
      const channel = this.deps.channels.get(row.channel);
      const started = this.deps.now();
      const result: SendResult = channel
        ? await channel.send(event, row.body)
        : { ok: false, retryable: false, statusCode: null, error: `channel "${row.channel}" is no longer configured` };
      const now = this.deps.now();
      const attempts = row.attempts + 1;
      const step = nextStep(result, attempts, this.deps.retryScheduleMs, now, this.deps.random);
      const error = result.ok ? null : this.deps.scrub(result.error);
      const lastError = step.state === 'dead' ? this.deps.scrub(step.reason) : error;
      this.deps.store.sqlite.transaction(() => {
        this.deps.events.recordAttempt(
          {
            id: row.id,
            state: step.state,
            attempts,
            next_attempt_at: step.state === 'pending' ? step.nextAttemptAt : row.next_attempt_at,
            last_error: lastError,
            updated_at: now,
          },
          {
            outbox_id: row.id,
            attempt: attempts,
            at: now,
            outcome: step.state === 'pending' ? 'retry' : step.state,
            status_code: result.statusCode,
            error,
            duration_ms: now - started,
          },
        );
      })();
      const logLine = { channel: row.channel, event_id: event.id, attempt: attempts, status: result.statusCode };
      if (step.state === 'dead') this.deps.log.error({ ...logLine, reason: lastError }, 'delivery dead-lettered');
      else if (step.state === 'pending') this.deps.log.warn({ ...logLine, error }, 'delivery failed; will retry');
      else this.deps.log.debug(logLine, 'delivered');
      this.deps.onAttempt?.({ event, channel: row.channel, attempt: attempts, result, state: step.state, durationMs: now - started });
    } finally {
      this.inFlight.delete(row.id);
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Run `fn` over `items` with at most `limit` at once. */
async function mapLimit<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>): Promise<void> {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  });
  await Promise.all(workers);
}
