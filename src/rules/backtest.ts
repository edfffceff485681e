import type { HostwatchEvent } from '../events/types.js';
import type { Router } from '../notify/routing.js';
import { sourceByName } from '../sources/registry.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { ChangeLogRow } from '../store/history-repo.js';
import { eventLine, Replay } from './replay.js';
import type { CompiledRule } from './types.js';
import type { SiteLabeler } from '../labels.js';
import type { IncidentsConfig } from '../config/types.js';
import type { Severity } from '../events/types.js';
import { alertSeverities, coveredAlerts, incidentEvent, incidentHeldChannels, incidentThreshold, stepIncident, type FiringSite } from '../notify/incidents.js';

/** Where shadow events are counted in the per-channel table: they go nowhere. */
export const SHADOW_CHANNEL = '(shadow: not delivered)';
/** Where events no route matches are counted. */
export const NO_CHANNEL = '(no channel)';

/** What a backtest replays through and how. */
export interface BacktestOptions {
  rules: readonly CompiledRule[];
  router: Router;
  /** Start of the window (epoch ms): state before it is the starting point, events before it are not reported. */
  since: number;
  /** End of the window (epoch ms): timers run on until then. */
  now: number;
  /** The poll interval of a source (unchanged polls between changes, for `for`/`keep_firing_for`/`repeat`). */
  everyMs: (source: SourceDef) => number;
  /** Sites known beforehand (domains in summaries). */
  sites?: readonly SiteInfo[];
  /** Site labels of the config (routes may match on them). */
  labeler?: SiteLabeler;
  /**
   * Platform incidents of the config: while one is open, the per-site alerts it covers are
   * held from the human channels the incident reaches (`held` names them). `watched`: how many sites the
   * percentage of `min_sites` is taken of.
   */
  incidents?: { config: IncidentsConfig; isHuman: (channel: string) => boolean; watched: number };
}

/** One event the current rules would have made, and where it would have gone. */
export interface BacktestEvent {
  event: HostwatchEvent;
  channels: string[];
  /** Human channels a platform incident would have held it from (it went to `channels` only). */
  held?: string[];
}

/** Counts of one rule's events. */
export interface RuleCount {
  events: number;
  firing: number;
  resolved: number;
  repeats: number;
  changes: number;
}

export interface BacktestResult {
  events: BacktestEvent[];
  perRule: Map<string, RuleCount>;
  perChannel: Map<string, number>;
  snapshots: number;
  entities: number;
}

interface Tracked {
  source: SourceDef;
  entity: string;
  siteId: number | null;
  /** The next poll of its source (the last change, then every interval). */
  pollAt: number;
  /** The next visit: pollAt while an alert timer runs, or a clock rule coming due, whichever is first. */
  nextTick: number;
}

/**
 * Replay stored history (change-log rows in time order) through the rules, as the daemon
 * would between changes: each entity with a running alert timer is polled again at its
 * source's interval, and rules that read the clock (`now`, absence) are evaluated again on
 * the last value at their `every`. Pure apart from iterating `rows` (the change log, read in pages).
 */
export async function backtest(rows: Iterable<ChangeLogRow> | AsyncIterable<ChangeLogRow>, opts: BacktestOptions): Promise<BacktestResult> {
  const replay = new Replay(opts.rules, 'backtest', opts.labeler);
  replay.knowSites(opts.sites ?? []);
  const result: BacktestResult = { events: [], perRule: new Map(), perChannel: new Map(), snapshots: 0, entities: 0 };
  const tracked = new Map<string, Tracked>();
  // Only entities with a running timer or a clock rule are visited between changes;
  // scanning just these keeps a long history over many entities linear in its length.
  const timed = new Set<Tracked>();
  /**
   * Plan the next visit after `at`: a timer's unchanged poll (the first poll after `at`) or a
   * clock rule coming due, whichever is first.
   */
  const mark = (t: Tracked, at: number): void => {
    const every = opts.everyMs(t.source);
    if (t.pollAt <= at) t.pollAt += Math.floor((at - t.pollAt) / every + 1) * every;
    const timer = replay.timed(t.source, t.entity) ? t.pollAt : Infinity;
    t.nextTick = Math.min(timer, replay.nextClock(t.source, t.entity) ?? Infinity);
    if (t.nextTick !== Infinity) timed.add(t);
    else timed.delete(t);
  };
  const incidents = opts.incidents?.config.enabled ? new IncidentReplay(opts.incidents, opts.rules, opts.router, (id) => replay.site(id)?.domain ?? null) : null;
  const record = (events: HostwatchEvent[], at?: number): void => {
    for (const event of events) {
      const shadow = event.data['shadow'] === true;
      let routed = shadow ? [] : opts.router(event);
      const held = incidents && !shadow ? incidents.held(event, routed) : [];
      if (held.length) routed = routed.filter((c) => !held.includes(c));
      result.events.push(held.length ? { event, channels: routed, held } : { event, channels: routed });
      const c = result.perRule.get(event.data.rule) ?? { events: 0, firing: 0, resolved: 0, repeats: 0, changes: 0 };
      c.events++;
      if (event.data['repeat'] !== undefined) c.repeats++;
      else if (event.data.status === 'firing') c.firing++;
      else if (event.data.status === 'resolved') c.resolved++;
      else c.changes++;
      result.perRule.set(event.data.rule, c);
      for (const ch of shadow ? [SHADOW_CHANNEL] : routed.length ? routed : [NO_CHANNEL]) {
        result.perChannel.set(ch, (result.perChannel.get(ch) ?? 0) + 1);
      }
    }
    // The batch may open or end an incident (its own event is routed like any other).
    if (incidents && at !== undefined) {
      const made = incidents.after(events, at);
      if (made.length) record(made);
    }
  };
  // Unchanged polls of timed entities, in time order, up to (not including) `until`.
  const tickUntil = (until: number): void => {
    for (;;) {
      let next: Tracked | null = null;
      for (const t of timed) if (t.nextTick < until && (next === null || t.nextTick < next.nextTick)) next = t;
      if (next === null) return;
      const at = next.nextTick;
      // A clock rule's turn between two polls is not a poll: timers are judged at polls only.
      record(replay.tick(next.source, next.entity, next.siteId, at, { poll: at === next.pollAt })?.events ?? [], at);
      mark(next, at);
    }
  };
  for await (const row of rows) {
    const source = sourceByName(row.source);
    if (!source) continue;
    // State from before the window is where the replay starts, as of the window's start.
    const at = Math.max(row.at, opts.since);
    tickUntil(at);
    record(replay.observe(source, row.entity, row.site_id, at, JSON.parse(row.body)).events, at);
    result.snapshots++;
    const key = `${row.source}\u0000${row.entity}`;
    let t = tracked.get(key);
    if (!t) {
      result.entities++;
      t = { source, entity: row.entity, siteId: row.site_id, pollAt: 0, nextTick: 0 };
      tracked.set(key, t);
    }
    // A change is a poll: the next one is an interval later.
    t.pollAt = at + opts.everyMs(source);
    mark(t, at);
  }
  tickUntil(opts.now + 1);
  return result;
}

/**
 * Platform incidents in a backtest. The replay has no cycles, so an incident is announced
 * when it opens and ends as soon as fewer than N sites fire (the daemon waits for the end of
 * the cycle, at most `wait`); held events are not released into the output at the end.
 */
class IncidentReplay {
  private readonly firing = new Map<string, Map<number, number>>();
  private readonly fired = new Map<string, number>();
  private readonly covered: ReadonlySet<string>;
  private readonly severities: Map<string, Severity>;

  constructor(
    private readonly opts: NonNullable<BacktestOptions['incidents']>,
    rules: readonly CompiledRule[],
    private readonly router: Router,
    private readonly domainOf: (siteId: number) => string | null,
  ) {
    this.severities = alertSeverities(rules);
    this.covered = coveredAlerts(rules, opts.config.alerts);
  }

  /** The channels an incident open now holds this event from ([] when none does): the human ones the incident reaches. */
  held(e: HostwatchEvent, channels: readonly string[]): string[] {
    if (e.data.status === undefined || e.data.site_id === null || !this.fired.has(e.data.name)) return [];
    const name = e.data.name;
    const reached = incidentHeldChannels(name, this.severities.get(name) ?? 'warning', this.router, this.opts.isHuman);
    return channels.filter((c) => reached.includes(c));
  }

  /** Take a batch's alerts at `now`; the incident events it causes. */
  after(events: readonly HostwatchEvent[], now: number): HostwatchEvent[] {
    const touched = new Set<string>();
    for (const e of events) {
      const name = e.data.name;
      if (!this.covered.has(name) || e.data.site_id === null || e.data.status === undefined || e.data['repeat'] !== undefined) continue;
      const sites = this.firing.get(name) ?? new Map<number, number>();
      if (e.data.status === 'firing') sites.set(e.data.site_id, Date.parse(e.time));
      else sites.delete(e.data.site_id);
      this.firing.set(name, sites);
      touched.add(name);
    }
    const out: HostwatchEvent[] = [];
    const threshold = incidentThreshold(this.opts.config, this.opts.watched);
    for (const name of touched) {
      const sites: FiringSite[] = [...this.firing.get(name)!].map(([site_id, since]) => ({ site_id, since, event_id: null })).sort((a, b) => a.site_id - b.site_id);
      const seq = this.fired.get(name);
      const base = { instance: 'backtest', alert: name, sites, threshold, now, severity: this.severities.get(name) ?? 'warning', domainOf: this.domainOf } as const;
      if (seq !== undefined) {
        if (sites.length >= threshold) continue;
        this.fired.delete(name);
        out.push(incidentEvent({ ...base, seq, status: 'resolved' }));
      } else if (stepIncident(undefined, sites, now, threshold, this.opts.config, false) === 'open') {
        const next = (this.seqs.get(name) ?? 0) + 1;
        this.seqs.set(name, next);
        this.fired.set(name, next);
        out.push(incidentEvent({ ...base, seq: next, status: 'firing' }));
      }
    }
    return out;
  }

  private readonly seqs = new Map<string, number>();
}

/** The backtest as text: one line per event, then counts per rule and per channel. */
export function formatBacktest(r: BacktestResult, header: string): string[] {
  const lines = [header, ''];
  for (const e of r.events) {
    const to = e.channels.join(', ') || (e.event.data['shadow'] ? 'shadow' : 'none');
    lines.push(`${e.event.time}  ${eventLine(e.event)}  -> ${to}${e.held ? `  (held from ${e.held.join(', ')} by the platform incident)` : ''}`);
  }
  if (r.events.length === 0) lines.push('(no events)');
  lines.push('', 'per rule:');
  const rules = [...r.perRule.entries()].sort(([a], [b]) => a.localeCompare(b));
  const w = Math.max(4, ...rules.map(([n]) => n.length));
  for (const [name, c] of rules) {
    lines.push(`  ${name.padEnd(w)}  ${c.events} events (${c.firing} firing, ${c.resolved} resolved, ${c.repeats} repeats, ${c.changes} changes)`);
  }
  if (rules.length === 0) lines.push('  (none)');
  lines.push('per channel:');
  const chans = [...r.perChannel.entries()].sort(([a], [b]) => a.localeCompare(b));
  const cw = Math.max(4, ...chans.map(([n]) => n.length));
  for (const [name, n] of chans) lines.push(`  ${name.padEnd(cw)}  ${n}`);
  if (chans.length === 0) lines.push('  (none)');
  return lines;
}
