import type { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { BudgetState } from '../api/budget.js';
import type { Config } from '../config/types.js';
import type { HostwatchEvent } from '../events/types.js';
import type { Metrics } from '../metrics.js';
import type { Scheduler, ScheduledSource } from '../scheduler/scheduler.js';
import type { AlertsRepo } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import type { EventsRepo } from '../store/events-repo.js';
import type { SnapshotsRepo } from '../store/snapshots-repo.js';

/** Events the app emits for live consumers (SSE, the dashboard). */
export interface AppBusEvents {
  /** Events just committed (after the transaction). */
  events: [HostwatchEvent[]];
  /** A delivery attempt finished. */
  delivery: [{ eventId: string; channel: string; attempt: number; state: string; statusCode: number | null; error: string | null }];
}

/** Everything the HTTP routes may read; built by main.ts. */
export interface ServerContext {
  config: Config;
  store: Store;
  events: EventsRepo;
  alerts: AlertsRepo;
  snapshots: SnapshotsRepo;
  scheduler: Scheduler;
  sources: readonly ScheduledSource[];
  metrics: Metrics;
  bus: EventEmitter<AppBusEvents>;
  now: () => number;
  log: Logger;
  /** Every event name this daemon can raise (knownEventNames): what a `type` filter is resolved against. */
  eventNames: readonly string[];
  /** The API client's request budget now (pace, pause), when the app has one. */
  pace?: () => BudgetState;
}
