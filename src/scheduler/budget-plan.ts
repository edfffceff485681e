/**
 * The request budget as a plan: what the enabled sources cost per hour at their intervals
 * for the current number of sites, what `api.max_requests_per_second` allows, and, when it
 * cannot meet every interval, how far each source is stretched. Pure: the scheduler, the
 * start log, `hostwatch check`, the metrics and the dashboard all read the same plan.
 *
 * How intervals stretch when the budget is short (docs/architecture.md#the-request-budget):
 * only per-site sources stretch (an account-wide source costs one request per poll whatever
 * the number of sites: about 50 an hour for all of them together, so stretching them saves
 * nothing). The least important level stretches first, up to ×4 (low, then normal, then
 * high), each level by one common factor; if that is not enough, every non-critical
 * per-site source stretches by one common factor beyond ×4. Critical sources keep their
 * intervals while they fit in 95% of what is planned; past that they stretch too, and the
 * rest shares the last 5%.
 */
import { PRIORITIES, priorityRank, type Priority } from '../api/budget.js';
import type { CompiledRule } from '../rules/types.js';
import { ownerOf, sitesSource } from '../sources/registry.js';
import type { EnabledSource } from '../sources/select.js';
import type { SourceDef } from '../sources/types.js';
import type { Config } from '../config/types.js';
import { DEFAULT_PAGE_SIZE } from '../api/assumptions.js';
import { formatDuration } from '../config/duration.js';

/**
 * Share of the budget the plan fills: the rest is left for what it cannot foresee (retries,
 * detail reads, extra pages, jobs followed every 15 s while one runs).
 */
export const PLANNED_SHARE = 0.9;
/** How far one level stretches before the next more important one starts to. */
export const LEVEL_STRETCH = 4;
/** The most critical sources may take of the planned budget before they stretch too. */
export const CRITICAL_SHARE = 0.95;

/** One scheduled (top-level) source as the plan sees it. */
export interface PlanInput {
  name: string;
  per: 'account' | 'site';
  everyMs: number;
  priority: Priority;
  /** Requests one poll of one entity makes (pages, or one per watched path). */
  requestsPerPoll: number;
}

/** What the plan says about one source. */
export interface PlannedSource extends PlanInput {
  /** The interval it actually runs at (≥ everyMs). */
  effectiveEveryMs: number;
  /** effectiveEveryMs / everyMs. */
  stretch: number;
  /** Requests per hour at the configured interval, and at the effective one. */
  neededPerHour: number;
  plannedPerHour: number;
}

export interface BudgetPlan {
  sites: number;
  /** api.max_requests_per_second × 3600. */
  allowedPerHour: number;
  /** What the plan fills: allowedPerHour × PLANNED_SHARE. */
  plannedCapacityPerHour: number;
  /** Σ requests per hour at the configured intervals. */
  neededPerHour: number;
  /** Σ requests per hour at the effective intervals. */
  plannedPerHour: number;
  /** True when some interval is stretched. */
  short: boolean;
  sources: PlannedSource[];
}

/** Requests per hour of one source at an interval. */
function perHour(s: PlanInput, sites: number, everyMs: number): number {
  const entities = s.per === 'site' ? sites : 1;
  return (entities * s.requestsPerPoll * 3_600_000) / everyMs;
}

/** Plan the budget: effective intervals so that the planned requests fit. */
export function planBudget(inputs: readonly PlanInput[], sites: number, maxRequestsPerSecond: number): BudgetPlan {
  const allowed = maxRequestsPerSecond * 3600;
  const capacity = allowed * PLANNED_SHARE;
  const need = inputs.map((s) => perHour(s, sites, s.everyMs));
  const neededPerHour = need.reduce((a, b) => a + b, 0);
  const stretch = inputs.map(() => 1);
  const rank = inputs.map((s) => priorityRank(s.priority));
  const total = (): number => need.reduce((sum, d, i) => sum + d / stretch[i]!, 0);
  const sum = (pick: (i: number) => boolean): number => need.reduce((acc, d, i) => acc + (pick(i) ? d : 0), 0);
  const stretchable = (i: number): boolean => inputs[i]!.per === 'site';
  const critical = (i: number): boolean => stretchable(i) && rank[i] === 0;
  const rest = (i: number): boolean => stretchable(i) && rank[i]! > 0;
  // What neither stretches nor may be stretched: the account-wide sources.
  const fixed = sum((i) => !stretchable(i));

  if (neededPerHour > capacity) {
    // 1. Least important first: low, then normal, then high, each up to ×LEVEL_STRETCH.
    for (let level = PRIORITIES.length - 1; level >= 1 && total() > capacity; level--) {
      const members = inputs.map((_, i) => i).filter((i) => stretchable(i) && rank[i] === level);
      const levelNeed = members.reduce((acc, i) => acc + need[i]!, 0);
      if (levelNeed === 0) continue;
      const others = total() - members.reduce((acc, i) => acc + need[i]! / stretch[i]!, 0);
      const factor = Math.min(LEVEL_STRETCH, Math.max(1, levelNeed / Math.max(capacity - others, 1e-9)));
      for (const i of members) stretch[i] = factor;
    }
    // 2. Still short: every non-critical per-site source by one common factor, into what the
    // account-wide and critical sources leave.
    const critNeed = sum(critical);
    const restNeed = sum(rest);
    const room = Math.max(capacity - fixed, 1e-9);
    const critShare = restNeed > 0 ? CRITICAL_SHARE : 1;
    if (total() > capacity && restNeed > 0) {
      const factor = Math.max(LEVEL_STRETCH, restNeed / Math.max(room - Math.min(critNeed, room * critShare), 1e-9));
      inputs.forEach((_, i) => {
        if (rest(i)) stretch[i] = factor;
      });
    }
    // 3. Critical alone over its share: it stretches too.
    if (critNeed > room * critShare) {
      const factor = critNeed / (room * critShare);
      inputs.forEach((_, i) => {
        if (critical(i)) stretch[i] = factor;
      });
    }
  }

  const sources = inputs.map((s, i) => {
    const effectiveEveryMs = Math.round(s.everyMs * stretch[i]!);
    return { ...s, effectiveEveryMs, stretch: stretch[i]!, neededPerHour: need[i]!, plannedPerHour: perHour(s, sites, effectiveEveryMs) };
  });
  return {
    sites,
    allowedPerHour: allowed,
    plannedCapacityPerHour: capacity,
    neededPerHour,
    plannedPerHour: sources.reduce((sum, s) => sum + s.plannedPerHour, 0),
    short: sources.some((s) => s.stretch > 1),
    sources,
  };
}

/**
 * The priority of every enabled top-level source: the config's `priority`, else derived
 * from the rules it feeds (its own, its views' and its details'): critical for a source
 * that feeds a critical rule, high for warning, normal for info, low for none. The site
 * list is always critical: every per-site source depends on it.
 */
export function sourcePriorities(sources: readonly EnabledSource[], rules: readonly CompiledRule[], config: Config): Map<string, Priority> {
  const fromRules = new Map<string, Priority>();
  const bySeverity: Record<string, Priority> = { critical: 'critical', warning: 'high', info: 'normal' };
  const defs = new Map(sources.map((s) => [s.def.name, s.def]));
  for (const rule of rules) {
    if (!rule.enabled) continue;
    const def = defs.get(rule.source);
    if (!def) continue;
    const owner = ownerOf(def).name;
    const p = bySeverity[rule.severity] ?? 'normal';
    const cur = fromRules.get(owner);
    if (cur === undefined || priorityRank(p) < priorityRank(cur)) fromRules.set(owner, p);
  }
  const out = new Map<string, Priority>();
  for (const { def } of sources) {
    if (ownerOf(def) !== def) continue;
    const configured = config.sources[def.name]?.priority ?? null;
    out.set(def.name, def.name === sitesSource.name ? 'critical' : (configured ?? fromRules.get(def.name) ?? 'low'));
  }
  return out;
}

/** The plan inputs of the enabled top-level sources. */
export function planInputs(sources: readonly EnabledSource[], priorities: ReadonlyMap<string, Priority>, config: Config, sites: number): PlanInput[] {
  const out: PlanInput[] = [];
  for (const { def, everyMs } of sources) {
    const priority = priorities.get(def.name);
    if (priority === undefined || def.per === 'record') continue;
    out.push({ name: def.name, per: def.per, everyMs, priority, requestsPerPoll: requestsPerPoll(def, config, sites) });
  }
  return out;
}

/**
 * Requests one poll of a source makes: the pages of the site list, one per watched path
 * (`files`), else one (a newest-first list reads one page once it knows its records).
 */
function requestsPerPoll(def: SourceDef, config: Config, sites: number): number {
  if (def.name === sitesSource.name) return Math.max(1, Math.ceil(sites / (def.pageSize ?? DEFAULT_PAGE_SIZE)));
  if (def.each) {
    const o = config.sources[def.name];
    const own = Object.values(o?.site_paths ?? {}).reduce((n, list) => n + list.length, 0);
    return (o?.paths?.length ?? 0) + (sites > 0 ? own / sites : 0);
  }
  return 1;
}

const n = (x: number): string => Math.round(x).toLocaleString('en-US');
/** An interval as people read it: to the second under an hour, to the minute above. */
const every = (ms: number): string => formatDuration(ms >= 3_600_000 ? Math.round(ms / 60_000) * 60_000 : Math.round(ms / 1000) * 1000);
const times = (x: number): string => `×${x < 2 ? x.toFixed(2) : x.toFixed(1)}`;

/**
 * The plan in words, for the start log and `hostwatch check`: needed vs allowed requests per
 * hour, and every interval that stretches, by how much. `sitesNote` says where the site
 * count came from.
 */
export function describePlan(plan: BudgetPlan, maxRequestsPerSecond: number, sitesNote = ''): string[] {
  const head =
    `request budget: ${n(plan.sites)} site${plan.sites === 1 ? '' : 's'}${sitesNote} × the enabled sources need ${n(plan.neededPerHour)} requests/hour at their intervals; ` +
    `api.max_requests_per_second ${maxRequestsPerSecond} allows ${n(plan.allowedPerHour)} (${Math.round(PLANNED_SHARE * 100)}% planned: ${n(plan.plannedCapacityPerHour)}, the rest for retries and details)`;
  if (!plan.short) return [head, `  every interval is met (${Math.round((plan.neededPerHour / plan.allowedPerHour) * 100)}% of the budget)`];
  const stretched = plan.sources.filter((s) => s.stretch > 1).sort((a, b) => b.stretch - a.stretch || a.name.localeCompare(b.name));
  const kept = plan.sources.filter((s) => s.stretch <= 1 && s.priority === 'critical').map((s) => s.name);
  const width = Math.max(...stretched.map((s) => s.name.length));
  return [
    head,
    `  short by ${n(plan.neededPerHour - plan.plannedCapacityPerHour)} requests/hour: ${stretched.length} source${stretched.length === 1 ? '' : 's'} will be polled less often than configured`,
    ...stretched.map((s) => `    ${s.name.padEnd(width)}  ${s.priority.padEnd(8)}  every ${every(s.everyMs)} → ${every(s.effectiveEveryMs)} (${times(s.stretch)})`),
    kept.length > 0 ? `  keep their intervals: ${kept.join(', ')} (critical)` : '  no critical source keeps its interval: raise api.max_requests_per_second or lengthen intervals',
  ];
}

/** The plan of a config's enabled sources for a number of sites. */
export function configPlan(config: Config, sources: readonly EnabledSource[], priorities: ReadonlyMap<string, Priority>, sites: number): BudgetPlan {
  return planBudget(planInputs(sources, priorities, config, sites), sites, config.api.max_requests_per_second);
}

/**
 * The most sites at which every configured interval fits the planned budget (null: the
 * per-site sources cost nothing, any number fits), for `check` when it cannot know the count.
 */
export function sitesThatFit(config: Config, sources: readonly EnabledSource[], priorities: ReadonlyMap<string, Priority>): number | null {
  const at = (sites: number): number => configPlan(config, sources, priorities, sites).neededPerHour;
  const account = at(0);
  const perSite = at(1000) / 1000 - account / 1000;
  if (perSite <= 0) return null;
  return Math.max(0, Math.floor((config.api.max_requests_per_second * 3600 * PLANNED_SHARE - account) / perSite));
}
