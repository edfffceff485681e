import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HostwatchEvent } from './events/types.js';
import type { PollOutcome } from './pipeline/poller.js';
import type { EventsRepo } from './store/events-repo.js';
import type { RequestBudget } from './api/budget.js';
import type { Scheduler } from './scheduler/scheduler.js';

/** prom-client's gauges whose names end in `_total` (a counter's suffix); their labelled twins stay. */
const GAUGES_NAMED_LIKE_COUNTERS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** What the metrics read of the database at scrape time. */
export interface MetricsSources {
  outbox: Pick<EventsRepo, 'count' | 'oldestPendingCreatedAt'>;
  /** The source-level poll state: when each source last had a successful cycle. */
  sources: () => Promise<ReadonlyArray<{ source: string; last_success_at: number | null }>>;
  /** The database could not be read for a scrape (told once per failing spell; the scrape goes on without it). */
  onReadError?: (e: unknown) => void;
}

/** How long a scrape waits for the database before it answers without its gauges (Prometheus gives up at 10 s by default). */
export const DATABASE_READ_TIMEOUT_MS = 3_000;

/** What a scrape read of the database, once, before the registry is collected. */
interface DatabaseReadings {
  pending: number;
  oldestPending: number | null;
  sources: ReadonlyArray<{ source: string; last_success_at: number | null }>;
}

/**
 * Prometheus metrics, one registry per app (tests run several apps in one process), named
 * by Prometheus conventions: the process metrics keep their standard names (no prefix), no
 * gauge ends in `_total`, counters of attempts say so, and `status` is always an HTTP
 * status. Label values are bounded sets only (source names, status codes, channel names,
 * event types): never a site id or a URL.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly polls: TalliedCounter;
  private readonly pollErrors: TalliedCounter;
  private readonly pollDuration: TalliedHistogram;
  private readonly apiRequests: TalliedCounter;
  private readonly events: Counter<'type'>;
  private readonly deliveries: Counter<'channel' | 'outcome'>;
  /** This scrape's reading of the database; null when it could not be read (the gauges that need it are left out). */
  private readings: DatabaseReadings | null = null;
  /** The last scrape could read the database (a failing spell is told to onReadError once). */
  private databaseUp = true;

  constructor(
    private readonly db: MetricsSources,
    private readonly now: () => number,
    build: { version: string },
  ) {
    const readings = (): DatabaseReadings | null => this.readings;
    collectDefaultMetrics({ register: this.registry });
    for (const name of GAUGES_NAMED_LIKE_COUNTERS) this.registry.removeSingleMetric(name);
    const registers = [this.registry];
    new Gauge({ name: 'hostwatch_build_info', help: 'Always 1; the labels say which hostwatch and Node.js run.', labelNames: ['version', 'node_version'], registers }).set(
      { version: build.version, node_version: process.version },
      1,
    );
    new DatabaseGauge(this.registry, readings, {
      name: 'hostwatch_source_last_success_timestamp_seconds',
      help: 'When each source last completed a cycle with at least one successful poll (Unix time): alert on time() minus this.',
      values: (r) => r.sources.flatMap((s) => (s.last_success_at === null ? [] : [{ labels: { source: s.source }, value: s.last_success_at / 1000 }])),
    });
    new Gauge({
      name: 'hostwatch_storage_up',
      help: 'Whether this scrape could read the database (1) or not (0: down, unreachable, or slower than 3 s); while 0, the gauges read from it (outbox, source last success) are left out.',
      registers,
      collect() {
        this.set(readings() === null ? 0 : 1);
      },
    });
    this.polls = new TalliedCounter({ ...TALLIED.polls, registers });
    this.pollErrors = new TalliedCounter({ ...TALLIED.pollErrors, registers });
    this.pollDuration = new TalliedHistogram(TALLIED.pollDuration, this.registry);
    this.apiRequests = new TalliedCounter({ ...TALLIED.apiRequests, registers });
    this.events = new Counter({ name: 'hostwatch_events_total', help: 'Events stored, by CloudEvents type.', labelNames: ['type'], registers });
    this.deliveries = new Counter({ name: 'hostwatch_delivery_attempts_total', help: 'Delivery attempts, by channel and outcome (delivered, retry, dead).', labelNames: ['channel', 'outcome'], registers });
    new DatabaseGauge(this.registry, readings, {
      name: 'hostwatch_outbox_depth',
      help: 'Outbox rows waiting to be delivered.',
      values: (r) => [{ labels: {}, value: r.pending }],
    });
    new DatabaseGauge(this.registry, readings, {
      name: 'hostwatch_outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest pending outbox row (0 when none).',
      values: (r) => [{ labels: {}, value: r.oldestPending === null ? 0 : Math.max(0, (now() - r.oldestPending) / 1000) }],
    });
  }

  /**
   * Per-source scheduling gauges (effective interval, lag behind schedule, the current
   * cycle's progress; the last success is read from the database above) and the request budget (needed vs allowed per hour, the
   * adaptive pace, a 429 pause), read from the scheduler and the budget at each scrape.
   */
  watchScheduling(scheduler: Pick<Scheduler, 'progress' | 'budgetPlan'>, budget: Pick<RequestBudget, 'state'>): void {
    const registers = [this.registry];
    const now = this.now;
    const perSource = (name: string, help: string, value: (p: ReturnType<Scheduler['progress']>[number]) => number | null): void => {
      new Gauge({
        name,
        help,
        labelNames: ['source'],
        registers,
        collect() {
          this.reset();
          for (const p of scheduler.progress()) {
            const v = value(p);
            if (v !== null) this.set({ source: p.name }, v);
          }
        },
      });
    };
    perSource('hostwatch_source_effective_interval_seconds', 'The interval a source runs at: its configured one, stretched when the request budget is short.', (p) => p.effectiveEveryMs / 1000);
    perSource('hostwatch_source_lag_seconds', 'How far a source is behind its schedule (0 when on time).', (p) => p.lagMs / 1000);
    perSource('hostwatch_source_cycle_remaining', 'Entities of the current cycle not polled yet (0 between cycles).', (p) => (p.cycle ? p.cycle.total - p.cycle.done : 0));
    new Gauge({
      name: 'hostwatch_request_budget_per_hour',
      help: 'API requests per hour: needed at the configured intervals, allowed by api.max_requests_per_second, planned at the effective intervals.',
      labelNames: ['kind'],
      registers,
      collect() {
        const plan = scheduler.budgetPlan();
        if (!plan) return;
        this.set({ kind: 'needed' }, Math.round(plan.neededPerHour));
        this.set({ kind: 'allowed' }, plan.allowedPerHour);
        this.set({ kind: 'planned' }, Math.round(plan.plannedPerHour));
      },
    });
    new Gauge({
      name: 'hostwatch_api_pace_requests_per_second',
      help: 'The pace requests go at now: api.max_requests_per_second, lower for a while after a 429.',
      registers,
      collect() {
        this.set(budget.state().rate);
      },
    });
    new Gauge({
      name: 'hostwatch_api_paused_seconds',
      help: 'Seconds left of a pause the API asked for (429 Retry-After); 0 when none.',
      registers,
      collect() {
        const until = budget.state().pausedUntil;
        this.set(until === null ? 0 : Math.max(0, (until - now()) / 1000));
      },
    });
  }

  /** Count one poll outcome. */
  poll(source: string, o: PollOutcome, durationMs: number): void {
    this.polls.inc(source, o.status);
    this.pollDuration.observe(source, durationMs / 1000);
    if (o.error) this.pollErrors.inc(source, o.error.code);
  }

  /** Count one API exchange. */
  apiResponse(status: number | null, code: string | null): void {
    this.apiRequests.inc(status === null ? 'none' : String(status), code ?? 'none');
  }

  /** Count stored events. */
  stored(events: readonly HostwatchEvent[]): void {
    for (const e of events) this.events.inc({ type: e.type });
  }

  /**
   * Start at 0 the counters the documented alerts watch (docs/operations.md), for every label
   * value known at start: each channel's delivery outcomes, each event type, each source's
   * `scope_missing`. A series that first shows up at 1 has no `increase()` in Prometheus, so
   * the first dead letter after a start (often the only one) would alert nobody.
   */
  known(k: { channels: readonly string[]; eventTypes: readonly string[]; sources: readonly string[] }): void {
    for (const channel of k.channels) for (const outcome of DELIVERY_OUTCOMES) this.deliveries.inc({ channel, outcome }, 0);
    for (const type of k.eventTypes) this.events.inc({ type }, 0);
    for (const source of k.sources) this.pollErrors.zero(source, 'scope_missing');
  }

  /** Count one delivery attempt. */
  delivery(channel: string, outcome: string): void {
    this.deliveries.inc({ channel, outcome: outcome === 'pending' ? 'retry' : outcome });
  }

  /**
   * The Prometheus text exposition. The database is read first, once, within
   * DATABASE_READ_TIMEOUT_MS: a database that is down or slow leaves its gauges out and
   * `hostwatch_storage_up` at 0, and the rest of the scrape still answers.
   */
  async text(): Promise<string> {
    this.readings = await this.readDatabase();
    return this.registry.metrics();
  }

  private async readDatabase(): Promise<DatabaseReadings | null> {
    const { outbox, sources } = this.db;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`the database did not answer within ${DATABASE_READ_TIMEOUT_MS} ms`)), DATABASE_READ_TIMEOUT_MS);
    });
    const reading = Promise.all([outbox.count('pending'), outbox.oldestPendingCreatedAt(), sources()]);
    // A read that fails after the time ran out is not an unhandled rejection.
    reading.catch(() => undefined);
    try {
      const [pending, oldestPending, states] = await Promise.race([reading, late]);
      this.databaseUp = true;
      return { pending, oldestPending, sources: states };
    } catch (e) {
      if (this.databaseUp) this.db.onReadError?.(e);
      this.databaseUp = false;
      return null;
    } finally {
      clearTimeout(timer);
    }
  }
  /**
   * In a cluster: every metric carries the instance's name (label `hostwatch_instance`), and
   * two gauges say whether it is a live member and whether it owns the timers.
   */
  clusterMember(instance: string, state: () => { member: boolean; timers: boolean }): void {
    this.registry.setDefaultLabels({ hostwatch_instance: instance });
    const registers = [this.registry];
    new Gauge({
      name: 'hostwatch_cluster_member',
      help: 'In a cluster: 1 while this instance is a live member (its lease renewed in time), else 0.',
      registers,
      collect() {
        this.set(state().member ? 1 : 0);
      },
    });
    new Gauge({
      name: 'hostwatch_cluster_timers_owner',
      help: 'In a cluster: 1 while this instance owns the timers (the Timekeeper, retention), else 0.',
      registers,
      collect() {
        this.set(state().timers ? 1 : 0);
      },
    });
  }
}

/**
 * A gauge read from the database at each scrape (Metrics.text reads it first). While the
 * database cannot be read it has no sample at all: prom-client's own gauge without labels
 * always shows one (0 after a reset), and a 0 outbox depth would say "nothing pending".
 */
class DatabaseGauge {
  readonly type = 'gauge';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly values: (r: DatabaseReadings) => Array<{ labels: Record<string, string>; value: number }>;

  constructor(
    registry: Registry,
    private readonly readings: () => DatabaseReadings | null,
    cfg: { name: string; help: string; values: (r: DatabaseReadings) => Array<{ labels: Record<string, string>; value: number }> },
  ) {
    this.name = cfg.name;
    this.help = cfg.help;
    this.values = cfg.values;
    registry.registerMetric(this as unknown as Gauge);
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string>; value: number }> }> {
    const r = this.readings();
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: r === null ? [] : this.values(r) });
  }

  reset(): void {}
}

/** One line of a histogram as prom-client's registry formats it (`le` first, then the shared labels). */
interface HistogramValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
}

/** The outcomes of hostwatch_delivery_attempts_total (a `pending` step is counted as `retry`). */
const DELIVERY_OUTCOMES = ['delivered', 'retry', 'dead'] as const;

/** The metrics counted on every poll and every API request (tallied, see below): name, help, labels. */
export const TALLIED = {
  polls: { name: 'hostwatch_polls_total', help: 'Polls of an entity, by source and outcome (baseline, changed, unchanged, failed).', labelNames: ['source', 'outcome'] },
  pollErrors: { name: 'hostwatch_poll_errors_total', help: 'Failed polls, by source and error code.', labelNames: ['source', 'code'] },
  pollDuration: {
    name: 'hostwatch_poll_duration_seconds',
    help: 'Time of one poll of an entity (fetch, diff, rules, commit), by source.',
    labelName: 'source',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  },
  apiRequests: {
    name: 'hostwatch_api_requests_total',
    help: 'HTTP requests to the Hosting Control API (retries included), by HTTP status ("none": no reply) and error code ("none": it succeeded).',
    labelNames: ['status', 'error'],
  },
} as const;

/*
 * Metrics counted on every poll and every API request are tallied in plain maps and numbers,
 * and read into the Prometheus text at each scrape. prom-client's inc() and observe() build
 * and check a key from their label object on every call: 2.1 µs of every poll and 0.7 µs of
 * every request, against 0.5 and 0.15 µs tallied here (docs/benchmarks.md, run 18). The
 * text a scrape gets is the same (test/metrics.test.ts compares it with prom-client's own
 * counter and histogram).
 */

/** A counter with two labels, tallied by their values (see above); prom-client reads it at each scrape. */
export class TalliedCounter {
  /** The two label values (joined by a NUL) → their labels and count, in the order first seen (as prom-client keeps them). */
  private readonly tally = new Map<string, { labels: Record<string, string>; n: number }>();
  private readonly names: readonly [string, string];

  constructor(cfg: { name: string; help: string; labelNames: readonly [string, string]; registers: Registry[] }) {
    const tally = this.tally;
    this.names = cfg.labelNames;
    new Counter({
      ...cfg,
      collect() {
        this.reset();
        for (const t of tally.values()) this.inc(t.labels, t.n);
      },
    });
  }

  inc(a: string, b: string): void {
    const key = `${a}\u0000${b}`;
    const t = this.tally.get(key);
    if (t !== undefined) t.n++;
    else this.tally.set(key, { labels: { [this.names[0]]: a, [this.names[1]]: b }, n: 1 });
  }

  /** Show this pair at 0 until it is counted (see Metrics.known). */
  zero(a: string, b: string): void {
    const key = `${a}\u0000${b}`;
    if (!this.tally.has(key)) this.tally.set(key, { labels: { [this.names[0]]: a, [this.names[1]]: b }, n: 0 });
  }
}

/**
 * A histogram with one label, tallied per label value (see above). Registered as a metric of
 * its own: prom-client's registry formats what `get()` returns, as it does for its histograms.
 */
export class TalliedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelName: string;
  private readonly bounds: readonly number[];
  /** Label value → observations per bucket (not cumulative; the last one is above every bound), their sum and count. */
  private readonly tally = new Map<string, { buckets: number[]; sum: number; count: number }>();

  constructor(cfg: { name: string; help: string; labelName: string; buckets: readonly number[] }, registry: Registry) {
    this.name = cfg.name;
    this.help = cfg.help;
    this.labelName = cfg.labelName;
    this.bounds = cfg.buckets;
    registry.registerMetric(this as unknown as Histogram);
  }

  observe(label: string, value: number): void {
    // prom-client throws on these; a poll's metric must not fail the poll.
    if (!Number.isFinite(value)) return;
    let t = this.tally.get(label);
    if (t === undefined) this.tally.set(label, (t = { buckets: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 }));
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    t.buckets[i]!++;
    t.sum += value;
    t.count++;
  }

  /** The values as prom-client's histograms give them: cumulative buckets, +Inf, sum, count. */
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: HistogramValue[] }> {
    const values: HistogramValue[] = [];
    for (const [label, t] of this.tally) {
      const shared = { [this.labelName]: label };
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += t.buckets[i]!;
        values.push({ labels: { le: this.bounds[i]! }, sharedLabels: shared, value: acc, metricName: `${this.name}_bucket` });
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels: shared, value: t.count, metricName: `${this.name}_bucket` });
      values.push({ labels: {}, sharedLabels: shared, value: t.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: shared, value: t.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  reset(): void {
    this.tally.clear();
  }
}
