import type { Logger } from 'pino';
import { ADAPTIVE_PACING } from '../api/assumptions.js';
import { freshTurnMs, LocalBudget, type LocalBudgetOptions } from '../api/budget.js';
import type { BudgetRepo } from '../store/budget-repo.js';

export interface SharedBudgetOptions extends LocalBudgetOptions {
  repo: BudgetRepo;
  /** The budget's row (one per API the members share). */
  name: string;
  log: Logger;
  scrub: (text: string) => string;
  /**
   * How far ahead one round trip may take turns, in ms of the pace: at 1,000 requests a
   * second a member asks for up to 100 turns at once, at 10 for one. Fewer queries, at the
   * price of a turn taken and not used now and then (never one too many).
   */
  batchMs?: number;
  /** How long to wait before asking again when the database did not answer. */
  retryMs?: number;
}

/**
 * The request budget of a cluster: the members share one pace (`api.max_requests_per_second`
 * for all of them together, not each) and one 429 pause, through a row of the database
 * (BudgetRepo). The queue stays in each member (priority, deadline, arrival: LocalBudget's
 * order); only the turns come from the database, a few at a time, converted from the
 * database's clock to this process's (differences only, so the clocks need not agree).
 *
 * A 429 pauses this member at once and the others when the database tells them (NOTIFY,
 * `heard`); every grant also carries the pause, so a member that missed the notice waits
 * at its next turn. A turn taken before a pause is dropped (the next grant lies after it).
 */
export class SharedBudget extends LocalBudget {
  /** Turns this member holds, in its own clock, earliest first. */
  private turns: number[] = [];
  /** Requests accepted since the last grant (the shared rate creeps back by them). */
  private successes = 0;
  private failing = false;

  constructor(private readonly shared: SharedBudgetOptions) {
    super(shared);
  }

  /** A member said a 429 paused the API for `payload` ms (NOTIFY), or the connection came back (no payload: read it). */
  heard(payload?: string): void {
    const ms = payload === undefined || payload === '' ? NaN : Number(payload);
    if (Number.isFinite(ms)) {
      if (ms > 0) this.pauseUntil(this.opts.now() + ms);
      return;
    }
    void this.shared.repo.read(this.shared.name).then(
      (r) => r.pauseMs > 0 && this.pauseUntil(this.opts.now() + r.pauseMs),
      (e: unknown) => this.shared.log.warn({ err: this.shared.scrub(String(e)) }, 'could not read the shared request budget'),
    );
  }

  override rateLimited(retryAfterMs: number | null): void {
    // This member holds its requests at once; the others once the database tells them.
    super.rateLimited(retryAfterMs);
    void this.shared.repo.limited(this.shared.name, retryAfterMs ?? 0, this.shared.maxRate * ADAPTIVE_PACING.minFraction, ADAPTIVE_PACING.decrease).then(
      (r) => {
        this.rate = r.rate;
        if (r.pauseMs > 0) this.pauseUntil(this.opts.now() + r.pauseMs);
      },
      (e: unknown) => this.shared.log.warn({ err: this.shared.scrub(String(e)) }, 'could not share a 429 with the cluster'),
    );
  }

  override succeeded(): void {
    this.successes++;
  }

  protected override paused(): void {
    this.turns = [];
  }

  protected override nextTurn(): number | Promise<number> {
    // A turn long past is not used late: a burst of old turns would outrun the pace.
    const stale = this.opts.now() - freshTurnMs(this.rate);
    while (this.turns.length > 0 && this.turns[0]! < stale) this.turns.shift();
    if (this.turns.length > 0) return this.turns[0]!;
    return this.ask().then(() => this.turns[0] ?? this.opts.now());
  }

  protected override spent(): void {
    this.turns.shift();
  }

  /** Take the next turns from the database, as many as are waiting (up to a batch); retried while requests wait. */
  private async ask(): Promise<void> {
    for (;;) {
      const n = Math.max(1, Math.min(this.waiting(), Math.floor((this.rate * (this.shared.batchMs ?? 100)) / 1000)));
      const successes = this.successes;
      try {
        const g = await this.shared.repo.grant(this.shared.name, n, this.shared.maxRate, successes, ADAPTIVE_PACING.increase);
        this.successes -= successes;
        this.rate = g.rate;
        const now = this.opts.now();
        if (g.pauseMs > 0) this.pauseUntil(now + g.pauseMs);
        this.turns = Array.from({ length: g.count }, (_, i) => now + g.startIn + i * g.interval);
        if (this.failing) this.shared.log.info('the shared request budget answers again');
        this.failing = false;
        return;
      } catch (e) {
        if (!this.failing) this.shared.log.warn({ err: this.shared.scrub(String(e)) }, 'could not take turns from the shared request budget; requests wait');
        this.failing = true;
        await this.opts.sleep(this.shared.retryMs ?? 1000);
        if (this.waiting() === 0) return;
      }
    }
  }
}
