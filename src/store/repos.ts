import { AlertsRepo } from './alerts-repo.js';
import { DaemonRepo } from './daemon-repo.js';
import { DeliveryRepo } from './delivery-repo.js';
import { EventsRepo } from './events-repo.js';
import { HistoryRepo } from './history-repo.js';
import { SilencesRepo } from './silences-repo.js';
import { SnapshotsRepo } from './snapshots-repo.js';
import type { Executor } from './sql.js';

/** Every repository over one executor: the store (each statement on its own) or a transaction. */
export interface Repos {
  snapshots: SnapshotsRepo;
  alerts: AlertsRepo;
  events: EventsRepo;
  history: HistoryRepo;
  delivery: DeliveryRepo;
  silences: SilencesRepo;
  daemon: DaemonRepo;
  /** The batch transaction's memo of reads (Executor.memo); null outside a batch. */
  memo: Map<string, unknown> | null;
  /** Run `fn` once this unit's writes are committed (Executor.afterCommit); at once outside a batch. */
  afterCommit(fn: () => void): void;
}

/**
 * The repositories over `x`. Cheap (statements are compiled once per process, not per
 * repository), so a transaction body makes its own: `repos(tx).events.addEvent(…)`.
 */
export function repos(x: Executor): Repos {
  return {
    snapshots: new SnapshotsRepo(x),
    alerts: new AlertsRepo(x),
    events: new EventsRepo(x),
    history: new HistoryRepo(x),
    delivery: new DeliveryRepo(x),
    silences: new SilencesRepo(x),
    daemon: new DaemonRepo(x),
    memo: x.memo ?? null,
    afterCommit: (fn) => (x.afterCommit ? x.afterCommit(fn) : fn()),
  };
}
