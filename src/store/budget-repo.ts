import { sql } from 'kysely';
import { statement, type Executor } from './sql.js';

/** The database's clock in epoch milliseconds, with its fraction (the pace's turns may be under a millisecond apart). */
const CLOCK = sql`(SELECT (extract(epoch from clock_timestamp()) * 1000)::float8 AS now)`;

/** The NOTIFY channel of a new 429 pause: its payload is the pause left, in milliseconds. */
export const BUDGET_CHANNEL = 'hostwatch_budget';

const INIT = statement<{ name: string; rate: number }>(
  (_qb, p) => sql`INSERT INTO cluster_budget (name, rate) VALUES (${p.name}, ${p.rate}::float8) ON CONFLICT (name) DO NOTHING`,
);

type GrantParams = { name: string; n: number; max: number; successes: number; increase: number };
// The rate crept back by the requests the asking member saw accepted since it last asked
// (never above the configured pace); the turns start at the pace's next free one, never
// in the past, never inside a pause.
const newRate = (p: GrantParams) => sql`LEAST(${p.max}::float8, b.rate + ${p.successes}::float8 * ${p.max}::float8 * ${p.increase}::float8)`;
const GRANT = statement<GrantParams, { next_slot: number; rate: number; paused_until: number; now: number }>(
  (_qb, p) => sql`
    UPDATE cluster_budget b SET rate = ${newRate(p)},
      next_slot = GREATEST(b.next_slot, c.now, b.paused_until) + ${p.n}::int * 1000.0 / ${newRate(p)}
    FROM ${CLOCK} AS c WHERE b.name = ${p.name}
    RETURNING b.next_slot, b.rate, b.paused_until, c.now`,
);

type LimitedParams = { name: string; retry_ms: number; min: number; decrease: number };
// Replies to requests already in flight arrive together: one decrease per pace interval.
const decreasing = sql`c.now - b.last_decrease >= 1000.0 / b.rate`;
const LIMITED = statement<LimitedParams, { pause_ms: number; rate: number }>(
  (_qb, p) => sql`
    UPDATE cluster_budget b SET paused_until = GREATEST(b.paused_until, c.now + ${p.retry_ms}::float8),
      rate = CASE WHEN ${decreasing} THEN GREATEST(${p.min}::float8, b.rate * ${p.decrease}::float8) ELSE b.rate END,
      last_decrease = CASE WHEN ${decreasing} THEN c.now ELSE b.last_decrease END
    FROM ${CLOCK} AS c WHERE b.name = ${p.name}
    RETURNING b.paused_until - c.now AS pause_ms, b.rate`,
);
// Said at the commit of the pause, to every member listening.
const ANNOUNCE = statement<{ pause_ms: number }>((_qb, p) => sql`SELECT pg_notify(${BUDGET_CHANNEL}, ${p.pause_ms}::text)`);
const READ = statement<{ name: string }, { pause_ms: number; rate: number }>(
  (_qb, p) => sql`SELECT b.paused_until - c.now AS pause_ms, b.rate FROM cluster_budget b, ${CLOCK} AS c WHERE b.name = ${p.name}`,
);

/** Turns handed to one member: `count` of them, `interval` ms apart from `startIn` ms from now (the database's now). */
export interface Grant {
  startIn: number;
  interval: number;
  count: number;
  rate: number;
  /** The pause left (ms), or ≤ 0. */
  pauseMs: number;
}

/**
 * The request budget the members of a cluster share (migration 0006's cluster_budget):
 * one row per budget, updated atomically, so members asking at once get different turns.
 * PostgreSQL only (the statements read the database's clock).
 */
export class BudgetRepo {
  constructor(private readonly x: Executor) {}

  /** Create the budget's row at the configured pace, unless a member did already. */
  async init(name: string, rate: number): Promise<void> {
    await this.x.run(INIT, { name, rate });
  }

  /** Take the next `n` turns of the shared pace (one round trip), reporting `successes` accepted requests. */
  async grant(name: string, n: number, max: number, successes: number, increase: number): Promise<Grant> {
    const r = await this.x.get(GRANT, { name, n, max, successes, increase });
    if (!r) throw new Error(`the request budget "${name}" has no row (cluster_budget)`);
    const interval = 1000 / r.rate;
    return { startIn: r.next_slot - n * interval - r.now, interval, count: n, rate: r.rate, pauseMs: r.paused_until - r.now };
  }

  /** A 429: hold every member for `retryMs` (0: only slow down), and tell the others; resolves with the pause left. */
  async limited(name: string, retryMs: number, min: number, decrease: number): Promise<{ pauseMs: number; rate: number }> {
    const r = await this.x.get(LIMITED, { name, retry_ms: retryMs, min, decrease });
    if (!r) throw new Error(`the request budget "${name}" has no row (cluster_budget)`);
    if (retryMs > 0) await this.x.run(ANNOUNCE, { pause_ms: Math.ceil(r.pause_ms) });
    return { pauseMs: r.pause_ms, rate: r.rate };
  }

  /** The pause left (ms, ≤ 0 when none) and the rate now. */
  async read(name: string): Promise<{ pauseMs: number; rate: number }> {
    const r = await this.x.get(READ, { name });
    return { pauseMs: r?.pause_ms ?? 0, rate: r?.rate ?? 0 };
  }
}
