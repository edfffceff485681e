/**
 * The request budget: when each API request may go. One object decides it for the whole
 * client, so a 429 slows every caller at once and a critical poll never queues behind a
 * low one. A cluster's budget (cluster/shared-budget.ts: several instances, one API key)
 * keeps this queue and takes its turns from the database.
 */
import { ADAPTIVE_PACING, MAX_RETRY_AFTER_MS } from './assumptions.js';
import { ApiError } from './errors.js';

/** Priority levels, most important first; a request's `priority` is one of these indexes. */
export const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The rank of a priority level (0 = critical). */
export function priorityRank(p: Priority): number {
  return PRIORITIES.indexOf(p);
}

/**
 * What a request says about its urgency: its priority level (0 = critical), and the time by
 * which it should have gone (earliest first within a level, so nothing waits forever behind
 * a stream of work of its own level).
 */
export interface Ticket {
  priority: number;
  deadline: number;
  /** Aborting it gives up the wait (shutdown): the request fails with code `aborted`. */
  signal?: AbortSignal;
}

/** What the budget is doing now, for metrics and the dashboard. */
export interface BudgetState {
  /** Requests per second it paces to now (lower than `maxRate` after a 429). */
  rate: number;
  /** The configured pace (`api.max_requests_per_second`). */
  maxRate: number;
  /** Until when every request is held (a 429's Retry-After), or null. */
  pausedUntil: number | null;
  /** Requests waiting for their turn. */
  waiting: number;
  /** 429 answers seen since start. */
  rateLimited: number;
}

/** The port the API client asks before every request. */
export interface RequestBudget {
  /** Wait for this request's turn: never faster than the pace, never during a pause, most urgent first. */
  acquire(ticket?: Ticket): Promise<void>;
  /**
   * Called once the request holds a connection, right before it is sent: wait out a pause
   * that began after its turn was granted (a 429 answered to another request meanwhile).
   */
  holdWhilePaused(signal?: AbortSignal): Promise<void>;
  /** The server answered 429: slow down, and hold every request for `retryAfterMs` when it said. */
  rateLimited(retryAfterMs: number | null): void;
  /** The server took a request (not a 429): creep back towards the configured pace. */
  succeeded(): void;
  state(): BudgetState;
}

/**
 * The rank of a request that already holds a connection and needs a new turn (see
 * freshTurnMs): served before every level of PRIORITIES, so a turn goes to a request that
 * can use it at once.
 */
export const HOLDS_CONNECTION = -1;

/**
 * How long a granted turn stays good: one interval of the pace, at least 50 ms. A request
 * that could not go within it (it waited for a connection) takes a new turn: turns used late
 * go out together with the ones on time, faster than the pace.
 */
export function freshTurnMs(rate: number): number {
  return Math.max(1000 / rate, 50);
}

/** A ticket for requests that do not say (one-off reads, `poll --once`): normal, due now. */
export function defaultTicket(now: number): Ticket {
  return { priority: priorityRank('normal'), deadline: now };
}

interface Waiter {
  ticket: Ticket;
  seq: number;
  resolve: () => void;
  reject: (e: unknown) => void;
  onAbort?: () => void;
}

export interface LocalBudgetOptions {
  /** `api.max_requests_per_second`. */
  maxRate: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
}

/**
 * The budget of one process: a leaky bucket at an adaptive rate (halved on a 429, raised a
 * little with every accepted request, never above `maxRate`), one shared pause on
 * Retry-After, and a queue ordered by priority, then deadline, then arrival.
 *
 * Its waits trust `sleep`: after sleeping until a slot it does not read the clock again to
 * check, so tests can inject a sleep that only records.
 */
export class LocalBudget implements RequestBudget {
  protected rate: number;
  private nextSlot = 0;
  protected pausedUntil = 0;
  /** Moves on every new pause, so a wait started before it knows to wait again. */
  private pauseGen = 0;
  private lastDecrease = Number.NEGATIVE_INFINITY;
  private limited = 0;
  private seq = 0;
  private readonly queue: Waiter[] = [];
  private pumping = false;

  constructor(protected readonly opts: LocalBudgetOptions) {
    this.rate = opts.maxRate;
  }

  acquire(ticket?: Ticket): Promise<void> {
    const t = ticket ?? defaultTicket(this.opts.now());
    const early = this.refusal(t.signal);
    if (early) return Promise.reject(early);
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { ticket: t, seq: this.seq++, resolve, reject };
      if (t.signal) {
        w.onAbort = () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) this.queue.splice(i, 1);
          reject(aborted());
        };
        t.signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.queue.splice(insertAt(this.queue, w), 0, w);
      if (!this.pumping) void this.pump();
    });
  }

  async holdWhilePaused(signal?: AbortSignal): Promise<void> {
    const wait = this.pausedUntil - this.opts.now();
    if (wait <= 0) return;
    const early = this.refusal(signal);
    if (early) throw early;
    const gen = this.pauseGen;
    await this.opts.sleep(wait);
    if (gen === this.pauseGen) this.pausedUntil = 0;
    if (signal?.aborted) throw aborted();
  }

  rateLimited(retryAfterMs: number | null): void {
    const now = this.opts.now();
    this.limited++;
    // Replies to requests already in flight arrive together: one decrease per pace interval.
    if (now - this.lastDecrease >= 1000 / this.rate) {
      this.rate = Math.max(this.opts.maxRate * ADAPTIVE_PACING.minFraction, this.rate * ADAPTIVE_PACING.decrease);
      this.lastDecrease = now;
    }
    if (retryAfterMs !== null && retryAfterMs > 0) this.pauseUntil(now + retryAfterMs);
  }

  /** Hold every request until `at` (unless a longer pause already does). */
  protected pauseUntil(at: number): void {
    if (at <= this.pausedUntil) return;
    this.pausedUntil = at;
    this.pauseGen++;
    this.paused();
  }

  /** Requests waiting for their turn. */
  protected waiting(): number {
    return this.queue.length;
  }

  /** A new pause began (a shared pace drops the turns it was given before it). */
  protected paused(): void {}

  /** The next turn's time by the pace (a shared pace may have to ask the database for it). */
  protected nextTurn(): number | Promise<number> {
    return this.nextSlot;
  }

  /** A turn due at `at` was handed out: the pace moves on. */
  protected spent(at: number): void {
    // The slot time, not "now": late timers must not lower the pace; but never ahead of
    // the clock, so a sleep that only records does not push later slots into the future.
    this.nextSlot = Math.min(at, this.opts.now()) + 1000 / this.rate;
  }

  succeeded(): void {
    if (this.rate < this.opts.maxRate) this.rate = Math.min(this.opts.maxRate, this.rate + this.opts.maxRate * ADAPTIVE_PACING.increase);
  }

  state(): BudgetState {
    const paused = this.pausedUntil > this.opts.now() ? this.pausedUntil : null;
    return { rate: this.rate, maxRate: this.opts.maxRate, pausedUntil: paused, waiting: this.waiting(), rateLimited: this.limited };
  }

  /** Why a request must not wait at all: it was aborted, or the pause is longer than a poll may wait. */
  private refusal(signal: AbortSignal | undefined): ApiError | null {
    if (signal?.aborted) return aborted();
    const wait = this.pausedUntil - this.opts.now();
    if (wait > MAX_RETRY_AFTER_MS) {
      return new ApiError({
        code: 'rate_limited',
        endpoint: '(every endpoint)',
        message: `the API asked for a pause of ${Math.ceil(wait / 1000)} s (Retry-After); requests wait at most ${MAX_RETRY_AFTER_MS / 1000} s`,
        retryAfterMs: wait,
      });
    }
    return null;
  }

  /** Hands out turns one at a time, to the most urgent waiter when its slot comes. */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.queue.length > 0) {
        const gen = this.pauseGen;
        // Asked without a wait when the pace knows: the first request goes at once, before
        // the others of its burst are even queued.
        const next = this.nextTurn();
        const turn = typeof next === 'number' ? next : await next;
        // A pause that began while asking: start over with it.
        if (gen !== this.pauseGen) continue;
        const now = this.opts.now();
        const at = Math.max(now, turn, this.pausedUntil);
        // Under a millisecond is no wait (timers cannot do less): at a high pace many turns share one.
        if (at - now >= 1) {
          await this.opts.sleep(at - now);
          // A pause that began while sleeping: start over with it.
          if (gen !== this.pauseGen) continue;
          if (this.pausedUntil !== 0 && at >= this.pausedUntil) this.pausedUntil = 0;
        }
        const w = this.queue.shift();
        if (!w) break;
        if (w.onAbort) w.ticket.signal?.removeEventListener('abort', w.onAbort);
        this.spent(at);
        const refused = this.refusal(w.ticket.signal);
        if (refused) w.reject(refused);
        else w.resolve();
      }
    } finally {
      this.pumping = false;
    }
  }
}

/** Where a waiter goes in the queue: by priority, then deadline, then arrival. */
function insertAt(queue: readonly Waiter[], w: Waiter): number {
  let lo = 0;
  let hi = queue.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(queue[mid]!, w)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function before(a: Waiter, b: Waiter): boolean {
  if (a.ticket.priority !== b.ticket.priority) return a.ticket.priority < b.ticket.priority;
  if (a.ticket.deadline !== b.ticket.deadline) return a.ticket.deadline < b.ticket.deadline;
  return a.seq < b.seq;
}

function aborted(): ApiError {
  return new ApiError({ code: 'aborted', endpoint: '(every endpoint)', message: 'the request was given up (shutting down)' });
}
