import type { Logger } from 'pino';
import type { CompiledRule } from '../rules/types.js';
import type { SourceDef } from '../sources/types.js';
import { clockRules, hasClockRules, sourceRules, type SourceRules } from './plan.js';
import { mapLimit } from '../semaphore.js';
import type { Poller } from './poller.js';

/** Entities evaluated at once in a pass (their commits are grouped). */
const PARALLEL = 16;

/** What one re-evaluation pass did. */
export interface ReevaluationPass {
  /** Clock rules that were due and ran. */
  rules: string[];
  /** Stored entities evaluated. */
  entities: number;
  /** Events stored. */
  events: number;
  /** Sources whose entities were evaluated (a batch boundary for platform incidents). */
  sources: Set<string>;
}

export interface ReevaluatorDeps {
  poller: Pick<Poller, 'reevaluate' | 'storedEntities' | 'failingEntities'>;
  rules: readonly CompiledRule[];
  /** The enabled sources (a clock rule of a disabled source has nothing to read). */
  sources: readonly SourceDef[];
  now: () => number;
  log: Logger;
}

/**
 * Rules that read the clock (`now`, absence rules) change their answer as time passes
 * while the data stands still. This evaluates them again on the stored snapshots, each at
 * most every `every` (default 1 minute): they fire and resolve without a poll and without
 * an API request. Alerts with `for`/`keep_firing_for`/`repeat` timers stay the poller's.
 */
export class Reevaluator {
  private readonly plans: Array<{ source: SourceDef; rules: SourceRules }>;
  private readonly nextDue = new Map<string, number>();

  constructor(private readonly deps: ReevaluatorDeps) {
    this.plans = deps.sources
      .map((source) => ({ source, rules: sourceRules(deps.rules, source.name) }))
      .filter((p) => hasClockRules(p.rules));
  }

  /** Whether any enabled source has a clock rule. */
  get idle(): boolean {
    return this.plans.length === 0;
  }

  /**
   * One pass: every clock rule that is due (or all of them, `force`) runs on every stored
   * entity of its source. Entities whose last poll failed are skipped (Poller.reevaluate).
   * Several entities are evaluated at once, so their commits share transactions.
   */
  async run(force = false): Promise<ReevaluationPass> {
    const now = this.deps.now();
    const pass: ReevaluationPass = { rules: [], entities: 0, events: 0, sources: new Set() };
    for (const { source, rules } of this.plans) {
      const due = clockRules(rules, (r) => force || (this.nextDue.get(r.name) ?? 0) <= now);
      const picked = [...due.alert, ...due.entity];
      if (picked.length === 0) continue;
      for (const r of picked) this.nextDue.set(r.name, now + r.everyMs);
      pass.rules.push(...picked.map((r) => r.name));
      pass.sources.add(source.name);
      const stored = await this.deps.poller.storedEntities(source);
      // A failed fetch is not a change: whoever polled it (a cluster member), skip it.
      const failing = await this.deps.poller.failingEntities(source);
      pass.entities += stored.length;
      await mapLimit(stored, PARALLEL, async ({ entity, site_id }) => {
        if (failing.has(entity)) return;
        try {
          pass.events += await this.deps.poller.reevaluate(source, entity, site_id, due);
        } catch (e) {
          // One bad snapshot must not stop the rest of the pass.
          this.deps.log.error({ source: source.name, entity, err: String(e) }, 're-evaluation failed');
        }
      });
    }
    if (pass.events > 0) this.deps.log.debug({ rules: pass.rules, entities: pass.entities, events: pass.events }, 'clock rules re-evaluated');
    return pass;
  }
}
