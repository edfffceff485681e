import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { Store } from '../store/db.js';
import type { ChannelStateRow } from '../store/delivery-repo.js';
import type { DueDelivery } from '../store/events-repo.js';
import { repos, type Repos } from '../store/repos.js';
import type { Channel, SendResult } from './channel.js';
import { nextStep } from './retry.js';
import { mapLimit } from '../semaphore.js';

/** The most events one grouped message carries; the rest go in the next one. */
export const MAX_GROUP = 500;

/**
 * A channel's health after an attempt. Pure. A success clears its failure streak; a
 * retryable failure starts or continues one, and a streak of `disableAfterMs` disables the
 * channel; a result that says the endpoint is gone or misconfigured disables it at once.
 * Returns the row to write (null: nothing changes) and the reason when it was disabled now.
 */
export function channelHealth(
  channel: string,
  prev: ChannelStateRow | undefined,
  result: SendResult,
  now: number,
  disableAfterMs: number,
): { row: ChannelStateRow | null; disabled: string | null } {
  const base: ChannelStateRow = prev ?? { channel, failing_since: null, disabled_at: null, disabled_reason: null, disabled_count: 0 };
  if (result.ok) return { row: base.failing_since === null ? null : { ...base, failing_since: null }, disabled: null };
  const disable = (reason: string) => ({
    row: { ...base, disabled_at: now, disabled_reason: reason, disabled_count: base.disabled_count + 1 },
    disabled: reason,
  });
  if (result.disable) return disable(result.error);
  if (!result.retryable) return { row: null, disabled: null };
  const since = base.failing_since ?? now;
  if (now - since >= disableAfterMs) {
    return disable(`failing without a success since ${new Date(since).toISOString()}; last error: ${result.error}`);
  }
  return { row: base.failing_since === null ? { ...base, failing_since: since } : null, disabled: null };
}

export interface OutboxWorkerDeps {
  /** Reads due rows; each attempt's outcome is one unit of its commit queue. */
  store: Store;
  /** A channel failing this long without a success is disabled. */
  disableAfterMs: number;
  /** A channel was disabled (the app stores an operator event; the attempt waits for it). */
  onChannelDisabled?: (info: { channel: string; reason: string; count: number }) => Promise<void>;
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
  /** Groups (channel, group key) whose message is being made or sent. */
  private readonly groupsInFlight = new Set<string>();
  private running = false;
  /** Asked to stop: no new send starts (sends in flight finish). */
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  /** The repositories on the store (reads outside a transaction). */
  private readonly r: Repos;

  constructor(private readonly deps: OutboxWorkerDeps) {
    this.r = repos(deps.store);
  }

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

  /**
   * Stop starting sends at once and wait for the attempts in flight to finish. Rows not
   * sent stay pending (they go out after the next start), so a stop takes one send at most,
   * not a whole backlog to a slow receiver.
   */
  async stop(): Promise<void> {
    this.stopping = true;
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
      const next = await this.r.events.nextDue();
      if (next === null) return 0;
      const now = this.deps.now();
      if (next > deadline || now >= deadline) return this.r.events.count('pending');
      await sleep(Math.max(0, Math.min(next - now, deadline - now)));
    }
  }

  /** One pass: send every row that is due now (bounded concurrency). Returns rows attempted. */
  async deliverDue(): Promise<number> {
    let attempted = 0;
    for (;;) {
      if (this.stopping) return attempted;
      const rows = (await this.r.events.due(this.deps.now(), this.deps.concurrency * 4)).filter((r) => !this.inFlight.has(r.id));
      if (rows.length === 0) return attempted;
      attempted += await mapLimit(rows, this.deps.concurrency, (r) => this.attempt(r), () => this.stopping);
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      // A database error (the file gone, a closed connection) is logged and retried after a
      // pause; it must not end the loop with an unhandled rejection.
      let wait = IDLE_POLL_MS;
      try {
        await this.deliverDue();
        if (!this.running) break;
        const next = await this.r.events.nextDue();
        if (next !== null) wait = Math.min(IDLE_POLL_MS, Math.max(0, next - this.deps.now()));
      } catch (e) {
        this.deps.log.error({ err: this.deps.scrub(String(e)) }, 'outbox worker pass failed');
      }
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, wait);
      });
      if (this.timer) clearTimeout(this.timer);
      this.wake = null;
    }
  }

  /**
   * Send one due row, or, for a channel that sends groups, every due row of its group as
   * one message. Every row gets its own attempt record with the shared result.
   */
  private async attempt(first: DueDelivery): Promise<void> {
    const channel = this.deps.channels.get(first.channel);
    const grouped = first.group_key !== null && channel?.sendBatch !== undefined;
    const group = grouped ? `${first.channel}\u0000${first.group_key}` : null;
    // Taken by its group's message already, or that message is being made: it picks this row up.
    if (this.inFlight.has(first.id) || (group !== null && this.groupsInFlight.has(group))) return;
    // Claimed before the first await, so a concurrent attempt cannot take the row or its group.
    this.inFlight.add(first.id);
    if (group !== null) this.groupsInFlight.add(group);
    let rows: DueDelivery[] = [first];
    try {
      if (grouped) {
        const due = await this.r.delivery.groupRows(first.channel, first.group_key!, this.deps.now(), MAX_GROUP);
        // Read again: since `first` was read, its group's message may have taken it already.
        const current = due.find((r) => r.id === first.id);
        if (!current) return;
        rows = [current, ...due.filter((r) => r.id !== first.id && !this.inFlight.has(r.id))];
        for (const r of rows) this.inFlight.add(r.id);
      }
      const events = rows.map((r) => JSON.parse(r.body) as HostwatchEvent);
      const health = await this.r.delivery.channelState(first.channel);
      const started = this.deps.now();
      const result: SendResult = !channel
        ? { ok: false, retryable: false, statusCode: null, error: `channel "${first.channel}" is no longer configured` }
        : health?.disabled_at != null
          ? { ok: false, retryable: false, statusCode: null, error: `channel disabled: ${health.disabled_reason}` }
          : grouped
            ? await channel.sendBatch!(events)
            : await channel.send(events[0]!, first.body);
      const now = this.deps.now();
      const error = result.ok ? null : this.deps.scrub(result.error);
      const checked = channel && health?.disabled_at == null ? channelHealth(first.channel, health, result, now, this.deps.disableAfterMs) : null;
      // The attempt that disables a channel ends its rows too: no retry will be made.
      const steps = rows.map((r) =>
        checked?.disabled
          ? ({ state: 'dead', reason: `channel disabled: ${checked.disabled}` } as const)
          : nextStep(result, r.attempts + 1, this.deps.retryScheduleMs, now, this.deps.random),
      );
      // After the send (network IO), in a transaction of its own (a unit of group commit).
      await this.deps.store.transaction(async (tx) => {
        const r = repos(tx);
        for (const [i, row] of rows.entries()) {
          const step = steps[i]!;
          await r.events.recordAttempt(
            {
              id: row.id,
              state: step.state,
              attempts: row.attempts + 1,
              next_attempt_at: step.state === 'pending' ? step.nextAttemptAt : row.next_attempt_at,
              last_error: step.state === 'dead' ? this.deps.scrub(step.reason) : error,
              updated_at: now,
            },
            {
              outbox_id: row.id,
              attempt: row.attempts + 1,
              at: now,
              outcome: step.state === 'pending' ? 'retry' : step.state,
              status_code: result.statusCode,
              error,
              duration_ms: now - started,
            },
          );
        }
        if (result.ok && grouped) await r.delivery.groupSent(first.channel, first.group_key!, now);
        if (checked?.row) await r.delivery.putChannelState({ ...checked.row, disabled_reason: checked.row.disabled_reason && this.deps.scrub(checked.row.disabled_reason) });
      });
      rows.forEach((row, i) => {
        const step = steps[i]!;
        const event = events[i]!;
        const logLine = { channel: row.channel, event_id: event.id, attempt: row.attempts + 1, status: result.statusCode, group: row.group_key, size: rows.length };
        if (step.state === 'dead') this.deps.log.error({ ...logLine, reason: this.deps.scrub(step.reason) }, 'delivery dead-lettered');
        else if (step.state === 'pending') this.deps.log.warn({ ...logLine, error }, 'delivery failed; will retry');
        else this.deps.log.debug(logLine, 'delivered');
        this.deps.onAttempt?.({ event, channel: row.channel, attempt: row.attempts + 1, result, state: step.state, durationMs: now - started });
      });
      if (checked?.disabled) {
        const reason = this.deps.scrub(checked.disabled);
        this.deps.log.error({ channel: first.channel, reason }, 'channel disabled');
        await this.deps.onChannelDisabled?.({ channel: first.channel, reason, count: checked.row!.disabled_count });
      }
    } finally {
      for (const r of rows) this.inFlight.delete(r.id);
      if (group !== null) this.groupsInFlight.delete(group);
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
