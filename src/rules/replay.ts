import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import type { HostwatchEvent } from '../events/types.js';
import type { SiteLabeler } from '../labels.js';
import { clockRules, hasClockRules, planEvents, sourceRules, type PlanCall, type PlanOutput, type SourceRules } from '../pipeline/plan.js';
import { recordVolatile } from '../pipeline/poller.js';
import { SiteDirectory } from '../pipeline/site-directory.js';
import { reportClientsSource } from '../sources/families/visibility.js';
import { sitesSource } from '../sources/registry.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { CompiledRule } from './types.js';

interface Prepared {
  rules: SourceRules;
  whole: CompiledDiffOptions;
  record: CompiledDiffOptions;
  /** The source has rules that read the clock. */
  clock: boolean;
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
 * Between observations, `tick` does what the daemon does as time passes: alerts with a
 * running timer are planned again (the poller's unchanged polls), and rules that read the
 * clock are evaluated again on the stored value at their `every` (the re-evaluator).
 */
export class Replay {
  private readonly prepared = new Map<string, Prepared>();
  private readonly alerts = new Map<string, AlertRow>();
  private readonly heads = new Map<string, Head>();
  private readonly timedSet = new Set<string>();
  /** When each clock rule is next due for each entity (`entity\0rule` → ms). */
  private readonly clockNext = new Map<string, number>();
  private readonly ruleByName: Map<string, CompiledRule>;
  private readonly directory: SiteDirectory;
  /** Sites given by knowSites (rule tests): they stand even without a site list. */
  private readonly known = new Map<number, SiteInfo>();
  /**
   * The ids of the events made so far: an event whose id was made before is not made again,
   * as the daemon stores each id once (a `dedup_key` event's id is its rule, subject and key).
   */
  private readonly made = new Set<string>();
  /** The longest `window` of any rule: older versions are dropped (a long backtest stays small). */
  private readonly maxWindow: number;

  constructor(
    private readonly rules: readonly CompiledRule[],
    private readonly instance = 'replay',
    labeler?: SiteLabeler,
  ) {
    this.ruleByName = new Map(rules.map((r) => [r.name, r]));
    this.maxWindow = Math.max(-1, ...rules.map((r) => r.windowMs ?? -1));
    this.directory = new SiteDirectory(labeler);
  }

  /** Seed the site directory (domains and labels in events) without running rules. */
  knowSites(sites: readonly SiteInfo[]): void {
    for (const s of sites) this.known.set(s.id, s);
  }

  /** A site as the replay knows it (from the site list it saw, or knowSites), or null. */
  site(id: number): SiteInfo | null {
    return this.directory.get(id) ?? this.known.get(id) ?? null;
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
    const before = head === undefined ? null : unchanged ? value : head.value;
    const plan = this.plan({ source, entity, siteId, before, after: value, baseline: head === undefined, alertsOnly: unchanged, version, rules: p.rules }, at, past);
    this.heads.set(key, { hash, value, version, past });
    if (plan.timed) this.timedSet.add(key);
    else this.timedSet.delete(key);
    if (p.clock) this.scheduleClock(key, p.rules, at);
    if (source.name === sitesSource.name && !unchanged) this.directory.setSites(value);
    if (source.name === reportClientsSource.name && !unchanged) this.directory.setClients(value);
    return plan;
  }

  /**
   * Time passing at `at` without a new value: planned as the poller would on an unchanged
   * poll when a timer runs, else the clock rules that are due are evaluated as the
   * re-evaluator would. Null when the daemon would do nothing. `poll: false`: no poll
   * happens at `at`, only the re-evaluator's turn (a clock rule's `every`).
   */
  tick(source: SourceDef, entity: string, siteId: number | null, at: number, opts: { poll?: boolean } = {}): PlanOutput | null {
    const key = `${source.name}\u0000${entity}`;
    const head = this.heads.get(key);
    if (!head) return null;
    if (opts.poll !== false && this.timedSet.has(key)) return this.observe(source, entity, siteId, at, head.value);
    const p = this.prepare(source);
    if (!p.clock) return null;
    const due = clockRules(p.rules, (r) => (this.clockNext.get(`${key}\u0000${r.name}`) ?? 0) <= at);
    if (due.alert.length === 0 && due.entity.length === 0) return null;
    const call = { source, entity, siteId, before: head.value, after: head.value, baseline: false, alertsOnly: true, reevaluation: true, version: head.version, rules: due };
    const plan = this.plan(call, at, head.past);
    if (plan.timed) this.timedSet.add(key);
    this.scheduleClock(key, due, at);
    return plan;
  }

  /** Whether an entity has an alert timer running. */
  timed(source: SourceDef, entity: string): boolean {
    return this.timedSet.has(`${source.name}\u0000${entity}`);
  }

  /** When a clock rule is next due for an entity (null: its source has none, or it was never observed). */
  nextClock(source: SourceDef, entity: string): number | null {
    const key = `${source.name}\u0000${entity}`;
    const p = this.prepare(source);
    if (!p.clock || !this.heads.has(key)) return null;
    let next = Infinity;
    for (const r of [...p.rules.alert, ...p.rules.entity]) {
      if (r.clock) next = Math.min(next, this.clockNext.get(`${key}\u0000${r.name}`) ?? 0);
    }
    return next === Infinity ? null : next;
  }

  /** The current value of an entity, if it was observed. */
  value(source: SourceDef, entity: string): unknown {
    return this.heads.get(`${source.name}\u0000${entity}`)?.value;
  }

  private scheduleClock(key: string, rules: SourceRules, at: number): void {
    for (const r of [...rules.alert, ...rules.entity]) if (r.clock) this.clockNext.set(`${key}\u0000${r.name}`, at + r.everyMs);
  }

  /** The planner over one snapshot pair at `at`, with alert state and the past in memory. */
  private plan(call: PlanCall, at: number, past: Head['past']): PlanOutput {
    const { siteId, ...rest } = call;
    const plan = planEvents({
      ...rest,
      instance: this.instance,
      entitySite: siteId === null ? null : (this.site(siteId) ?? { id: siteId, domain: `site-${siteId}` }),
      siteLookup: (id) => this.site(id),
      recordDiff: this.prepare(call.source).record,
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
    if (plan.events.some((e) => this.made.has(e.id))) {
      plan.events = plan.events.filter((e) => !this.made.has(e.id));
      const kept = new Set(plan.events.map((e) => e.id));
      plan.evidence = plan.evidence.filter((x) => kept.has(x.event_id));
    }
    for (const e of plan.events) this.made.add(e.id);
    return plan;
  }

  private prepare(def: SourceDef): Prepared {
    let p = this.prepared.get(def.name);
    if (!p) {
      const rules = sourceRules(this.rules, def.name);
      p = {
        rules,
        whole: compileDiffOptions({ key: def.key ?? 'id', volatile: def.volatile }),
        record: compileDiffOptions({ key: 'id', volatile: recordVolatile(def) }),
        clock: hasClockRules(rules),
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
