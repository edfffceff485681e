import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HostwatchEvent } from './events/types.js';
import type { PollOutcome } from './pipeline/poller.js';
import type { EventsRepo } from './store/events-repo.js';

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

  constructor(outbox: Pick<EventsRepo, 'count' | 'oldestPendingCreatedAt'>, now: () => number) {
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
      async collect() {
        this.set(await outbox.count('pending'));
      },
    });
    new Gauge({
      name: 'hostwatch_outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest pending outbox row (0 when none).',
      registers,
      async collect() {
        const oldest = await outbox.oldestPendingCreatedAt();
        this.set(oldest === null ? 0 : Math.max(0, (now() - oldest) / 1000));
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
