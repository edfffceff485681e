import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HostwatchEvent } from './events/types.js';
import type { PollOutcome } from './pipeline/poller.js';
import type { EventsRepo } from './store/events-repo.js';
import type { RequestBudget } from './api/budget.js';
import type { Scheduler } from './scheduler/scheduler.js';

/**
 * Prometheus metrics, one registry per app (tests run several apps in one process).
 * Label values are bounded sets only (source names, status classes, channel names,
 * event types): never a site id or a URL.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly polls: Counter<'source' | 'outcome'>;
  private readonly pollErrors: Counter<'source' | 'code'>;
  private readonly pollDuration: Histogram<'source'>;
  private readonly apiRequests: Counter<'status'>;
  private readonly events: Counter<'type'>;
  private readonly deliveries: Counter<'channel' | 'outcome'>;

  constructor(outbox: Pick<EventsRepo, 'count' | 'oldestPendingCreatedAt'>, private readonly now: () => number) {
    collectDefaultMetrics({ register: this.registry, prefix: 'hostwatch_' });
    const registers = [this.registry];
    this.polls = new Counter({ name: 'hostwatch_polls_total', help: 'Polls of an entity, by source and outcome (baseline, changed, unchanged, failed).', labelNames: ['source', 'outcome'], registers });
    this.pollErrors = new Counter({ name: 'hostwatch_poll_errors_total', help: 'Failed polls, by source and error code.', labelNames: ['source', 'code'], registers });
    this.pollDuration = new Histogram({
      name: 'hostwatch_poll_duration_seconds',
      help: 'Time of one poll of an entity (fetch, diff, rules, commit), by source.',
      labelNames: ['source'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.apiRequests = new Counter({ name: 'hostwatch_api_requests_total', help: 'HTTP requests to the Hosting Control API, by status (or error code without one).', labelNames: ['status'], registers });
    this.events = new Counter({ name: 'hostwatch_events_total', help: 'Events stored, by CloudEvents type.', labelNames: ['type'], registers });
    this.deliveries = new Counter({ name: 'hostwatch_deliveries_total', help: 'Delivery attempts, by channel and outcome (delivered, retry, dead).', labelNames: ['channel', 'outcome'], registers });
    new Gauge({
      name: 'hostwatch_outbox_depth',
      help: 'Outbox rows waiting to be delivered.',
      registers,
      collect() {
        this.set(outbox.count('pending'));
      },
    });
    new Gauge({
      name: 'hostwatch_outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest pending outbox row (0 when none).',
      registers,
      collect() {
        const oldest = outbox.oldestPendingCreatedAt();
        this.set(oldest === null ? 0 : Math.max(0, (now() - oldest) / 1000));
      },
    });
  }

  /**
   * Per-source scheduling gauges (effective interval, last success, lag behind schedule,
   * the current cycle's progress) and the request budget (needed vs allowed per hour, the
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
    perSource('hostwatch_source_last_success_timestamp_seconds', 'When the last cycle of a source with a successful poll ended (since start).', (p) => (p.lastSuccessAt === null ? null : p.lastSuccessAt / 1000));
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
    this.polls.inc({ source, outcome: o.status });
    this.pollDuration.observe({ source }, durationMs / 1000);
    if (o.error) this.pollErrors.inc({ source, code: o.error.code });
  }

  /** Count one API exchange. */
  apiResponse(status: number | null, code: string | null): void {
    this.apiRequests.inc({ status: status === null ? (code ?? 'error') : String(status) });
  }

  /** Count stored events. */
  stored(events: readonly HostwatchEvent[]): void {
    for (const e of events) this.events.inc({ type: e.type });
  }

  /** Count one delivery attempt. */
  delivery(channel: string, outcome: string): void {
    this.deliveries.inc({ channel, outcome: outcome === 'pending' ? 'retry' : outcome });
  }

  /** The Prometheus text exposition. */
  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
