import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { Store } from '../store/db.js';
import type { ChannelStateRow } from '../store/delivery-repo.js';
import type { DueDelivery } from '../store/events-repo.js';
import type { Unit } from '../store/commit-queue.js';
import { repos, type Repos } from '../store/repos.js';
import type { Channel, SendGate, SendResult } from './channel.js';
import { nextStep, type NextStep } from './retry.js';

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

/**
 * Which due rows this worker may send: alone, every due row (`localClaims`); in a cluster,
 * the rows it claimed in the database (cluster/delivery-claims.ts), each under a claim
 * token that its attempt is recorded under.
 */
export interface DeliveryClaims {
  /**
   * Due rows to send, oldest first, at most `limit`: `busy` rows are being sent by this
   * worker already, and the rows of the `full` channels (every lane taken) are left for
   * later. `perChannel`: a channel's lanes (more of one channel's rows could not be started).
   */
  due(now: number, limit: number, perChannel: number, busy: readonly number[], full: readonly string[]): Promise<DueDelivery[]>;
  /** The due rows of one group (one message carries them), as `due`. */
  group(channel: string, groupKey: string, now: number, limit: number, busy: readonly number[]): Promise<DueDelivery[]>;
  /** Rows claimed earlier may still be sent now (checked right before the send). */
  maySend(rows: readonly DueDelivery[]): boolean;
}

/** One instance alone: every due row is its own (reads; nothing to claim). */
export function localClaims(store: Store): DeliveryClaims {
  const r = repos(store);
  return {
    // At most `perChannel` rows of any one channel: a channel with a backlog (its receiver
    // hangs) does not crowd the others' rows out of the read.
    due: async (now, limit, perChannel, _busy, full) => (await r.events.due(now, limit, perChannel)).filter((row) => !full.includes(row.channel)),
    group: (channel, groupKey, now, limit) => r.delivery.groupRows(channel, groupKey, now, limit),
    maySend: () => true,
  };
}

/** Thrown inside a record's unit: a row is no longer under the claim it was sent under. */
class ClaimLost extends Error {
  override readonly name = 'ClaimLost';
}

export interface OutboxWorkerDeps {
  /** Reads due rows; each attempt's outcome is one unit of its commit queue. */
  store: Store;
  /** Which due rows are this worker's (default: every one, localClaims). */
  claims?: DeliveryClaims;
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

/** How long the worker waits before trying the store again after a failure: doubling from 1 s to a minute. */
export function storeBackoffMs(failures: number): number {
  return Math.min(60_000, 1_000 * 2 ** Math.max(0, Math.min(failures - 1, 6)));
}

/**
 * An attempt that was made (its message sent, or refused) but whose record could not be
 * written: the store was full, locked or gone. Its rows are held: not sent again until the
 * record is written, which is retried with a backoff.
 */
interface Unrecorded {
  ids: readonly number[];
  /** The record, as one transaction of the store (the same writes every try). */
  write: Unit<void>;
  /** What follows a written record: logs, metrics, the live feed, a disabled channel's event. */
  after: () => Promise<void>;
  /** Tries that failed so far. */
  failures: number;
}

/**
 * Delivers outbox rows: at least once, with the same event id every time (invariant 5).
 * A row is pending until a channel accepts it or it is dead-lettered; a crash in the middle
 * of a send leaves it pending, so it is sent again after a restart.
 */
export class OutboxWorker {
  private readonly inFlight = new Set<number>();
  /**
   * Sends in flight per channel. Each channel has its own `concurrency` lanes: a receiver
   * that hangs until its timeout, or a provider's wait (a 429's Retry-After, Slack's pace),
   * holds back only its own channel's rows.
   */
  private readonly lanes = new Map<string, number>();
  /** The attempts in flight (deliverDue and stop wait for them; the loop does not). */
  private readonly sending = new Set<Promise<void>>();
  /** Group claims under way (startDue reads nothing meanwhile). */
  private groupReads = 0;
  /** When the retries this worker recorded fall due (those not yet passed). */
  private retries: number[] = [];
  /** Groups (channel, group key) whose message is being made or sent. */
  private readonly groupsInFlight = new Set<string>();
  private running = false;
  /** Asked to stop: no new send starts (sends in flight finish). */
  private stopping = false;
  private timer: NodeJS.Timeout | null = null;
  /** Ends the worker's sleep (a kick does, except during a backoff; a stop always does). */
  private wake: (() => void) | null = null;
  /** A wake-up that came while the loop was not asleep: its next sleep is skipped. */
  private wakeRequested = false;
  private loop: Promise<void> | null = null;
  /** The repositories on the store (reads outside a transaction). */
  private readonly r: Repos;
  /** Rows whose last attempt is not yet recorded, by id: never sent again before it is. */
  private readonly unrecorded = new Map<number, Unrecorded>();
  /** Store failures in a row (a pass or a record): while any, no new send starts. */
  private storeFailures = 0;
  /**
   * The same, but cleared only by a store operation that worked (a pass that read the outbox,
   * a held record written): the backoff's count. `storeFailures` is cleared before the pass
   * that tests the store, so on its own the backoff would start again at 1 s after each
   * failed pass, and a database that stays out of reach would be tried (and logged) every
   * second instead of doubling up to a minute.
   */
  private failStreak = 0;
  private storeRetryAt = 0;

  private readonly claims: DeliveryClaims;
  /** Attempts whose record found the row claimed by another member (not recorded; theirs now). */
  claimsLost = 0;

  constructor(private readonly deps: OutboxWorkerDeps) {
    this.r = repos(deps.store);
    this.claims = deps.claims ?? localClaims(deps.store);
  }

  /** Rows this worker is sending or holds unrecorded (never claimed again meanwhile). */
  private busy(except?: number): number[] {
    const out = new Set([...this.inFlight, ...this.unrecorded.keys()]);
    if (except !== undefined) out.delete(except);
    return [...out];
  }

  /** Start the background loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /**
   * Look at the outbox now (new events were committed). During a backoff only when no
   * record is held: the commit just made shows the store answers again (a database back
   * after an outage), and a pass is only a read, so what is due goes out now rather than
   * after the rest of a backoff of up to a minute. With records held, the backoff stands: a
   * store that refuses them is not asked again sooner because more work arrived.
   */
  kick(): void {
    if (this.storeFailures > 0) {
      if (this.unrecorded.size > 0) return;
      this.storeRetryAt = Math.min(this.storeRetryAt, this.deps.now());
    }
    this.wakeUp();
  }

  /** Look again now: ends the loop's sleep, or skips its next one when it is not asleep (in a pass). */
  private wakeUp(): void {
    if (this.wake) this.wake();
    else this.wakeRequested = true;
  }

  /**
   * Stop starting sends at once and wait for the attempts in flight to finish. Rows not
   * sent stay pending (they go out after the next start), so a stop takes one send at most,
   * not a whole backlog to a slow receiver.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.running = false;
    this.wake?.();
    await this.loop;
    await Promise.allSettled([...this.sending]);
  }

  /**
   * Deliver until nothing is pending or `timeoutMs` has passed (for `poll --once`).
   * Returns how many rows are still pending. `flushGroups` runs before the first round and
   * after each round's sends: `poll --once` sends the groups waiting for group_wait there, so
   * that events raised while it drains (a channel.disabled) go out too instead of waiting for
   * the next run.
   */
  async drain(timeoutMs: number, sleep: (ms: number) => Promise<void> = delay, flushGroups?: () => Promise<unknown>): Promise<number> {
    const deadline = this.deps.now() + timeoutMs;
    // A store that fails is waited out below (storeFailures), not thrown out of the drain; a
    // flush it refused is made again after the next round's sends.
    const flush = async (): Promise<void> => void (await flushGroups?.().catch(() => undefined));
    await flush();
    for (;;) {
      await this.recordHeld();
      if (this.storeFailures > 0) {
        // The store fails: wait for the backoff (or give up at the deadline), never spin.
        if (this.deps.now() >= deadline) return this.unrecorded.size + (await this.r.events.count('pending').catch(() => 0));
        await sleep(Math.max(0, Math.min(this.storeRetryAt, deadline) - this.deps.now()));
        continue;
      }
      await this.deliverDue();
      // Again after the sends: what they raised (a channel.disabled) is flushed before the wait.
      await flush();
      const next = await this.r.events.nextDue();
      this.failStreak = 0;
      if (next === null) return 0;
      const now = this.deps.now();
      if (next > deadline || now >= deadline) return this.r.events.count('pending');
      await sleep(Math.max(0, Math.min(next - now, deadline - now)));
    }
  }

  /**
   * Send every row that is due now, and wait until those sends (and the rows that fall due
   * while they run) are done. Returns rows attempted. Nothing is sent while the store fails
   * (a record could not be written): a message sent then could not be recorded either, and
   * would only be sent again. The daemon's loop starts sends without waiting (startDue).
   */
  async deliverDue(): Promise<number> {
    let attempted = 0;
    for (;;) {
      const pass = await this.startDue();
      attempted += pass.started;
      if (this.sending.size === 0 && (!pass.full || pass.started === 0)) return attempted;
      if (this.sending.size > 0) await Promise.race(this.sending);
    }
  }

  /** Channels whose every lane is taken. */
  private fullChannels(): string[] {
    return [...this.lanes].filter(([, n]) => n >= this.deps.concurrency).map(([channel]) => channel);
  }

  /**
   * Start a send for each row due now on a channel with a free lane, without waiting for
   * it; each one, once done, wakes the loop to look again. Returns how many were started,
   * whether the read was full (more rows may be due than it returned), and the time the read
   * took as now (null when nothing was read).
   */
  private async startDue(): Promise<{ started: number; full: boolean; readAt: number | null }> {
    const halted = (): boolean => this.stopping || this.storeFailures > 0;
    // While a group's rows are being claimed, a read could claim them again (a cluster bumps
    // their claim token, and the group's record would then fail): read once it is done.
    if (halted() || this.groupReads > 0) return { started: 0, full: false, readAt: null };
    // Enough for every channel's lanes: a read holds at most `concurrency` rows of a channel.
    const limit = this.deps.concurrency * Math.max(4, this.deps.channels.size + 1);
    const readAt = this.deps.now();
    const rows = await this.claims.due(readAt, limit, this.deps.concurrency, this.busy(), this.fullChannels());
    let started = 0;
    for (const row of rows) {
      if (halted()) break;
      const lanes = this.lanes.get(row.channel) ?? 0;
      // Taken already, or its group's message is being made or sent (it takes this row too),
      // or its channel has no lane free.
      const group = this.groupOf(row);
      if (this.inFlight.has(row.id) || this.unrecorded.has(row.id) || (group !== null && this.groupsInFlight.has(group)) || lanes >= this.deps.concurrency) continue;
      this.lanes.set(row.channel, lanes + 1);
      const send: Promise<void> = this.attempt(row)
        .catch((e: unknown) => {
          // A read of the store failed (the record's own failures are held, record()).
          this.storeFailed();
          this.deps.log.error({ err: this.deps.scrub(String(e)), retry_in_ms: this.storeRetryAt - this.deps.now() }, 'outbox worker pass failed');
        })
        .finally(() => {
          const left = (this.lanes.get(row.channel) ?? 1) - 1;
          if (left > 0) this.lanes.set(row.channel, left);
          else this.lanes.delete(row.channel);
          this.sending.delete(send);
          // A lane is free: rows waiting for it may go now.
          if (this.storeFailures === 0) this.wakeUp();
        });
      this.sending.add(send);
      started++;
    }
    return { started, full: rows.length >= limit, readAt };
  }

  /** Rows sent whose attempt is not yet recorded (held back from sending). */
  get unrecordedRows(): number {
    return this.unrecorded.size;
  }

  private async run(): Promise<void> {
    while (this.running) {
      // A database error (the disk full, the file locked or gone, a closed connection) is
      // logged and tried again after a pause that doubles up to a minute; it must neither
      // end the loop nor turn it into a storm of retries (and of sends).
      let wait = IDLE_POLL_MS;
      try {
        await this.recordHeld();
        if (this.storeFailures === 0) {
          const pass = await this.startDue();
          if (!this.running) break;
          const next = await this.r.events.nextDue();
          // The store answered the whole pass: the next failure starts the backoff afresh.
          this.failStreak = 0;
          const now = this.deps.now();
          // The retries recorded here that the read above did not cover: those due after the
          // time it read at. One that fell due while the pass ran (after the read, before now)
          // is read again at once; dropping it would leave it to the idle poll, a second later,
          // as the in-flight rows hide its due time from nextDue. Without a read (a group's
          // claim under way, whose end wakes the loop), the ones due by now are dropped.
          const covered = pass.readAt ?? now;
          this.retries = this.retries.filter((t) => t > covered);
          const retry = this.retries.reduce((a, b) => Math.min(a, b), Infinity);
          // A row due later: wake for it. Due now: the read was full (read again at once), or
          // the rest are being sent or wait for a lane (a send that ends wakes the loop), and
          // a retry recorded meanwhile wakes it when it falls due.
          if (next !== null) wait = next > now ? Math.min(IDLE_POLL_MS, next - now) : pass.full && pass.started > 0 ? 0 : Math.max(0, Math.min(IDLE_POLL_MS, retry - now));
        }
      } catch (e) {
        this.storeFailed();
        this.deps.log.error({ err: this.deps.scrub(String(e)), retry_in_ms: this.storeRetryAt - this.deps.now() }, 'outbox worker pass failed');
      }
      if (!this.running) break;
      if (this.storeFailures > 0) wait = Math.max(0, this.storeRetryAt - this.deps.now());
      else if (this.wakeRequested) wait = 0;
      this.wakeRequested = false;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, wait);
      });
      if (this.timer) clearTimeout(this.timer);
      this.wake = null;
    }
  }

  private storeFailed(): void {
    this.storeFailures++;
    this.failStreak++;
    this.storeRetryAt = this.deps.now() + storeBackoffMs(this.failStreak);
  }

  /**
   * Once the backoff has passed, try again to write the records held back, oldest first,
   * stopping at the first that fails. When none is left the store counts as working again
   * (the next pass, which reads the outbox, is the test of that).
   */
  private async recordHeld(): Promise<void> {
    if (this.storeFailures > 0 && this.deps.now() < this.storeRetryAt) return;
    for (const u of [...new Set(this.unrecorded.values())]) if (!(await this.record(u))) return;
    this.storeFailures = 0;
  }

  /**
   * Write an attempt's record; true when it is written. When it cannot be, its rows are
   * held (never sent again until it is), the store counts as failing, and it is tried again
   * after a backoff: a failure to record must never make the worker send again at once.
   */
  private async record(u: Unrecorded): Promise<boolean> {
    try {
      await this.deps.store.transaction(u.write);
    } catch (e) {
      if (e instanceof ClaimLost) {
        // Another member took these rows over (this one was paused or cut off past its
        // lease), or `hostwatch redeliver` queued them again meanwhile: the row is theirs
        // now, so this attempt is not recorded over it; holding it back would block nothing.
        this.claimsLost++;
        for (const id of u.ids) this.unrecorded.delete(id);
        this.deps.log.warn({ outbox_ids: u.ids }, 'a delivery was sent again (hostwatch redeliver) or claimed by another cluster member before its attempt was recorded; not recorded here');
        return true;
      }
      u.failures++;
      for (const id of u.ids) this.unrecorded.set(id, u);
      this.storeFailed();
      // Once per attempt, then at debug: the record is tried again with every backoff.
      this.deps.log[u.failures === 1 ? 'error' : 'debug'](
        { err: this.deps.scrub(String(e)), outbox_ids: u.ids, tries: u.failures, retry_in_ms: this.storeRetryAt - this.deps.now() },
        'could not record a delivery attempt; its rows are not sent again until it is recorded',
      );
      return false;
    }
    for (const id of u.ids) this.unrecorded.delete(id);
    this.failStreak = 0;
    if (u.failures > 0) this.deps.log.info({ outbox_ids: u.ids, tries: u.failures + 1 }, 'delivery attempt recorded after the store recovered');
    await u.after();
    return true;
  }

  /**
   * Send one due row, or, for a channel that sends groups, every due row of its group as
   * one message. Every row gets its own attempt record with the shared result.
   */
  /** The group whose one message carries this row (channel and key), or null when it goes alone. */
  private groupOf(row: DueDelivery): string | null {
    return row.group_key !== null && this.deps.channels.get(row.channel)?.sendBatch !== undefined ? `${row.channel}\u0000${row.group_key}` : null;
  }

  private async attempt(first: DueDelivery): Promise<void> {
    const channel = this.deps.channels.get(first.channel);
    const group = this.groupOf(first);
    const grouped = group !== null;
    // Taken by its group's message already, or that message is being made: it picks this row up.
    if (this.inFlight.has(first.id) || (group !== null && this.groupsInFlight.has(group))) return;
    // Claimed before the first await, so a concurrent attempt cannot take the row or its group.
    this.inFlight.add(first.id);
    if (group !== null) this.groupsInFlight.add(group);
    let rows: DueDelivery[] = [first];
    try {
      if (grouped) {
        this.groupReads++;
        let due: DueDelivery[];
        try {
          due = await this.claims.group(first.channel, first.group_key!, this.deps.now(), MAX_GROUP, this.busy(first.id));
        } finally {
          // Reads held back meanwhile may go now (this runs before the rows below are marked
          // in flight, but the loop it wakes reads only after them: same turn).
          if (--this.groupReads === 0 && this.storeFailures === 0) this.wakeUp();
        }
        // Read again: since `first` was read, its group's message may have taken it already.
        const current = due.find((r) => r.id === first.id);
        if (!current) return;
        rows = [current, ...due.filter((r) => r.id !== first.id && !this.inFlight.has(r.id) && !this.unrecorded.has(r.id))];
        for (const r of rows) this.inFlight.add(r.id);
      }
      // In a cluster: not after this member's lease may have run out (another may send them).
      if (!this.claims.maySend(rows)) {
        this.deps.log.debug({ outbox_ids: rows.map((r) => r.id) }, 'not sending: the cluster lease is not surely held');
        return;
      }
      const events = rows.map((r) => JSON.parse(r.body) as HostwatchEvent);
      const health = await this.r.delivery.channelState(first.channel);
      const started = this.deps.now();
      // Asked again right before the message goes on the wire: a channel may hold it back for
      // its turn (a provider's pace, a free SMTP connection) for seconds after the check above.
      const gate: SendGate = () => (this.stopping ? 'the outbox worker is stopping' : this.claims.maySend(rows) ? null : 'the cluster lease is not surely held');
      const result: SendResult = !channel
        ? { ok: false, retryable: false, statusCode: null, error: `channel "${first.channel}" is no longer configured` }
        : health?.disabled_at != null
          ? { ok: false, retryable: false, statusCode: null, error: `channel disabled: ${health.disabled_reason}` }
          : grouped
            ? await channel.sendBatch!(events, gate)
            : await channel.send(events[0]!, first.body, gate);
      if (!result.ok && result.notSent) {
        // Nothing went out: no attempt to record. Held back by a provider's rate limit, the rows
        // wait until it ends (their claim ended, no attempt counted); held back by the gate,
        // they stay as they were (pending; sent after the next start, or by the member that
        // holds them now).
        const notBefore = result.notBefore;
        if (notBefore !== undefined) {
          const postpone: Unit<void> = async (tx) => {
            const r = repos(tx);
            for (const row of rows) await r.events.postpone({ id: row.id, claim_token: row.claim_token, next_attempt_at: Math.max(row.next_attempt_at, notBefore), updated_at: this.deps.now() });
          };
          await this.record({ ids: rows.map((r) => r.id), write: postpone, after: async () => void this.retries.push(notBefore), failures: 0 });
        }
        this.deps.log.debug({ channel: first.channel, outbox_ids: rows.map((r) => r.id), reason: result.error }, 'not sent');
        return;
      }
      const now = this.deps.now();
      const error = result.ok ? null : this.deps.scrub(result.error);
      const checked = channel && health?.disabled_at == null ? channelHealth(first.channel, health, result, now, this.deps.disableAfterMs) : null;
      // The attempt that disables a channel ends its rows too: no retry will be made.
      const steps = together(
        rows.map((r) =>
          checked?.disabled
            ? ({ state: 'dead', reason: `channel disabled: ${checked.disabled}` } as const)
            : nextStep(result, r.attempts + 1, this.deps.retryScheduleMs, now, this.deps.random),
        ),
      );
      const lost = new Set<number>();
      // After the send (network IO), in a transaction of its own (a unit of group commit).
      const write: Unit<void> = async (tx) => {
        const r = repos(tx);
        // Rows taken from under this attempt (redelivered, or claimed by another member): not
        // recorded; the others of the message are. Lost whole: nothing is written.
        lost.clear();
        for (const [i, row] of rows.entries()) {
          const step = steps[i]!;
          const recorded = await r.events.recordAttempt(
            {
              id: row.id,
              claim_token: row.claim_token,
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
          if (!recorded) lost.add(row.id);
        }
        if (lost.size === rows.length) throw new ClaimLost(`outbox rows ${rows.map((x) => x.id).join(', ')} are no longer under the claims they were sent under`);

        if (result.ok && grouped) await r.delivery.groupSent(first.channel, first.group_key!, now);
        if (checked?.row) await r.delivery.putChannelState({ ...checked.row, disabled_reason: checked.row.disabled_reason && this.deps.scrub(checked.row.disabled_reason) });
      };
      // Announced only once recorded (logs, metrics, the live feed).
      const after = async (): Promise<void> => {
        if (lost.size > 0) this.deps.log.warn({ outbox_ids: [...lost] }, 'some rows of a message were sent again (hostwatch redeliver) or claimed by another cluster member before its attempt was recorded; recorded for the others');
        // The loop wakes for these retries (the outbox's earliest due time counts rows in flight).
        for (const step of steps) if (step.state === 'pending') this.retries.push(step.nextAttemptAt);
        rows.forEach((row, i) => {
          if (lost.has(row.id)) return;
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
      };
      await this.record({ ids: rows.map((r) => r.id), write, after, failures: 0 });
    } finally {
      for (const r of rows) this.inFlight.delete(r.id);
      if (group !== null) this.groupsInFlight.delete(group);
    }
  }
}

/**
 * The rows of one message are tried again together: each pending one at the latest of their
 * retry times (each row's own schedule and jitter, and a Retry-After), so a grouped message
 * that failed goes out again as one message, not one per event, and no row sooner than its
 * own schedule allows. A row whose schedule has ended is dead-lettered on its own.
 */
export function together(steps: readonly NextStep[]): NextStep[] {
  let at = -Infinity;
  for (const s of steps) if (s.state === 'pending') at = Math.max(at, s.nextAttemptAt);
  return steps.map((s) => (s.state === 'pending' ? { state: 'pending', nextAttemptAt: at } : s));
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
