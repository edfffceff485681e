import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { IncidentTracker } from '../notify/incident-tracker.js';
import type { Reevaluator, ReevaluationPass } from '../pipeline/reevaluate.js';
import type { StorageWatch } from '../selfwatch/storage-watch.js';
import type { Watchdog } from '../selfwatch/watchdog.js';
import { RepeatedFailure } from '../repeated-failure.js';

export interface TimekeeperDeps {
  reevaluator: Reevaluator;
  incidents?: Pick<IncidentTracker, 'settle'>;
  watchdog?: Pick<Watchdog, 'tick'>;
  /** `storage.failing`: looked at every tick. */
  storage?: Pick<StorageWatch, 'tick'>;
  /** Events stored by settled incidents and the watchdog (the poller announces its own). */
  onEvents?: (events: HostwatchEvent[]) => void;
  log: Logger;
}

/** What one tick did. */
export interface TickResult {
  pass: ReevaluationPass;
  events: HostwatchEvent[];
}

/**
 * The one entry point of the work that time alone causes, as opposed to a poll: the store
 * watched (storage.failing), clock rules evaluated again on stored snapshots, open platform
 * incidents announced or ended, the watchdog re-sent. The scheduler ticks it every second (`poll --once` once, forced,
 * after its cycle). In a cluster exactly one instance must own it: wrap `tick` there.
 */
export class Timekeeper {
  /** The tick in progress: a tick never overlaps the one before (a pass commits as it goes). */
  private running: Promise<TickResult> | null = null;
  /** Failing ticks, every second while the database is down: said once, not every second. */
  private readonly failure: RepeatedFailure;

  constructor(private readonly deps: TimekeeperDeps) {
    this.failure = new RepeatedFailure(deps.log, 'timekeeper tick failed; said once until a tick works again', 'timekeeper ticks work again');
  }

  /**
   * Do what is due (`force`: every clock rule now, whatever its `every`). Never throws. A
   * tick asked for while one runs waits for it; an unforced one is then skipped.
   */
  async tick(opts: { force?: boolean } = {}): Promise<TickResult> {
    while (this.running) {
      const last = await this.running;
      if (!opts.force) return last;
    }
    this.running = this.run(opts.force ?? false);
    try {
      return await this.running;
    } finally {
      this.running = null;
    }
  }

  private async run(force: boolean): Promise<TickResult> {
    const d = this.deps;
    const events: HostwatchEvent[] = [];
    let pass: ReevaluationPass = { rules: [], entities: 0, events: 0, sources: new Set() };
    // First, and on its own: a store that fails must be noticed even when the rest fails with it.
    events.push(...((await d.storage?.tick().catch((e: unknown) => (d.log.error({ err: String(e) }, 'storage watch failed'), []))) ?? []));
    try {
      pass = await d.reevaluator.run(force);
      // A pass is a batch boundary for the incidents its rules may have opened.
      events.push(...((await d.incidents?.settle(pass.sources)) ?? []));
      const w = await d.watchdog?.tick();
      if (w) events.push(w);
      this.failure.worked();
    } catch (e) {
      this.failure.failed(String(e));
    }
    if (events.length) d.onEvents?.(events);
    return { pass, events };
  }
}
