import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { IncidentTracker } from '../notify/incidents.js';
import type { Reevaluator, ReevaluationPass } from '../pipeline/reevaluate.js';
import type { Watchdog } from '../selfwatch/watchdog.js';

export interface TimekeeperDeps {
  reevaluator: Reevaluator;
  incidents?: Pick<IncidentTracker, 'settle'>;
  watchdog?: Pick<Watchdog, 'tick'>;
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
 * The one entry point of the work that time alone causes, as opposed to a poll: clock
 * rules evaluated again on stored snapshots, open platform incidents announced or ended,
 * the watchdog re-sent. The scheduler ticks it every second (`poll --once` once, forced,
 * after its cycle). In a cluster exactly one instance must own it: wrap `tick` there.
 */
export class Timekeeper {
  constructor(private readonly deps: TimekeeperDeps) {}

  /** Do what is due (`force`: every clock rule now, whatever its `every`). Never throws. */
  tick(opts: { force?: boolean } = {}): TickResult {
    const d = this.deps;
    const events: HostwatchEvent[] = [];
    let pass: ReevaluationPass = { rules: [], entities: 0, events: 0, sources: new Set() };
    try {
      pass = d.reevaluator.run(opts.force ?? false);
      // A pass is a batch boundary for the incidents its rules may have opened.
      events.push(...(d.incidents?.settle(pass.sources) ?? []));
      const w = d.watchdog?.tick();
      if (w) events.push(w);
    } catch (e) {
      d.log.error({ err: String(e) }, 'timekeeper tick failed');
    }
    if (events.length) d.onEvents?.(events);
    return { pass, events };
  }
}
