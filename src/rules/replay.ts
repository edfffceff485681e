import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import type { HostwatchEvent } from '../events/types.js';
import { listOf, planEvents, siteInfoFromRecord, sourceRules, type PlanOutput, type SourceRules } from '../pipeline/plan.js';
import { recordVolatile } from '../pipeline/poller.js';
import { sitesSource } from '../sources/registry.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { CompiledRule } from './types.js';

interface Prepared {
  rules: SourceRules;
  whole: CompiledDiffOptions;
  record: CompiledDiffOptions;
}

interface Head {
  hash: string;
  value: unknown;
  version: number;
  /** Every version seen, for rules with a `window`. */
  past: Array<{ at: number; value: unknown }>;
}

/**
 * The poller's decisions without IO: observations of entities at given times go through
 * the same pure planner (planEvents) with alert state kept in memory. `hostwatch rules
 * test` and `hostwatch rules backtest` both run on this, so they judge the real engine.
 */
export class Replay {
  private readonly prepared = new Map<string, Prepared>();
  private readonly alerts = new Map<string, AlertRow>();
  private readonly heads = new Map<string, Head>();
  private readonly timedSet = new Set<string>();
  private readonly ruleByName: Map<string, CompiledRule>;
  private directory = new Map<number, SiteInfo>();
  /** The longest `window` of any rule: older versions are dropped (a long backtest stays small). */
  private readonly maxWindow: number;

  constructor(
    private readonly rules: readonly CompiledRule[],
    private readonly instance = 'replay',
  ) {
    this.ruleByName = new Map(rules.map((r) => [r.name, r]));
    this.maxWindow = Math.max(-1, ...rules.map((r) => r.windowMs ?? -1));
  }

  /** Seed the site directory (domains in summaries) without running rules. */
  knowSites(sites: readonly SiteInfo[]): void {
    for (const s of sites) this.directory.set(s.id, s);
  }

  /** One successful poll of an entity at `at`: a new value, or the same one again. */
  observe(source: SourceDef, entity: string, siteId: number | null, at: number, value: unknown): PlanOutput {
    const p = this.prepare(source);
    const key = `${source.name}\u0000${entity}`;
    const head = this.heads.get(key);
    const hash = contentHash(value, p.whole);
    const unchanged = head !== undefined && head.hash === hash;
    const version = unchanged ? head.version : (head?.version ?? 0) + 1;
    const past = head?.past ?? [];
    if (!unchanged && this.maxWindow >= 0) {
      past.push({ at, value });
      // Keep what a window can still reach: the versions inside it and the last one before.
      while (past.length > 1 && past[1]!.at <= at - this.maxWindow) past.shift();
    }
    const plan = planEvents({
      instance: this.instance,
      source,
      entity,
      entitySite: siteId === null ? null : (this.directory.get(siteId) ?? { id: siteId, domain: `site-${siteId}` }),
      siteLookup: (id) => this.directory.get(id) ?? null,
      before: head === undefined ? null : unchanged ? value : head.value,
      after: value,
      baseline: head === undefined,
      alertsOnly: unchanged,
      version,
      rules: p.rules,
      recordDiff: p.record,
      alertState: (rule, subject) => this.alerts.get(`${rule}\u0000${subject}`),
      firingForSite: (id) => [...this.alerts.values()].filter((a) => a.site_id === id && a.status === 'firing'),
      ruleByName: (name) => this.ruleByName.get(name),
      pastValue: (t) => {
        let found: unknown;
        for (const v of past) if (v.at <= t) found = v.value;
        return found;
      },
      now: new Date(at),
    });
    for (const a of plan.alerts) this.alerts.set(`${a.rule}\u0000${a.subject}`, a);
    this.heads.set(key, { hash, value, version, past });
    if (plan.timed) this.timedSet.add(key);
    else this.timedSet.delete(key);
    if (source.name === sitesSource.name && !unchanged) {
      this.directory = new Map(listOf(sitesSource, value).filter((r) => typeof r['id'] === 'number').map((r) => [r['id'] as number, siteInfoFromRecord(r)]));
    }
    return plan;
  }

  /**
   * An unchanged poll at `at` (time passing): planned only when a timer runs for the
   * entity, as the poller does; null when the poller would not have planned at all.
   */
  tick(source: SourceDef, entity: string, siteId: number | null, at: number): PlanOutput | null {
    const key = `${source.name}\u0000${entity}`;
    const head = this.heads.get(key);
    if (!head || !this.timedSet.has(key)) return null;
    return this.observe(source, entity, siteId, at, head.value);
  }

  /** Whether an entity has an alert timer running. */
  timed(source: SourceDef, entity: string): boolean {
    return this.timedSet.has(`${source.name}\u0000${entity}`);
  }

  /** The current value of an entity, if it was observed. */
  value(source: SourceDef, entity: string): unknown {
    return this.heads.get(`${source.name}\u0000${entity}`)?.value;
  }

  private prepare(def: SourceDef): Prepared {
    let p = this.prepared.get(def.name);
    if (!p) {
      p = {
        rules: sourceRules(this.rules, def.name),
        whole: compileDiffOptions({ key: def.key ?? 'id', volatile: def.volatile }),
        record: compileDiffOptions({ key: 'id', volatile: recordVolatile(def) }),
      };
      this.prepared.set(def.name, p);
    }
    return p;
  }
}

/** An event as one readable line: `site.offline:firing sites/1/health "a.example is offline"`. */
export function eventLine(e: HostwatchEvent): string {
  const name = e.data.status ? `${e.data.name}:${e.data.status}` : e.data.name;
  const extra = [e.data['repeat'] !== undefined ? `repeat ${String(e.data['repeat'])}` : '', e.data['shadow'] ? 'shadow' : ''].filter(Boolean);
  return `${name} ${e.subject} ${JSON.stringify(e.data.summary)}${extra.length ? ` (${extra.join(', ')})` : ''}`;
}
