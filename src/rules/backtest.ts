import type { HostwatchEvent } from '../events/types.js';
import type { Router } from '../notify/routing.js';
import { sourceByName } from '../sources/registry.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { ChangeLogRow } from '../store/history-repo.js';
import { eventLine, Replay } from './replay.js';
import type { CompiledRule } from './types.js';

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
}

/** One event the current rules would have made, and where it would have gone. */
export interface BacktestEvent {
  event: HostwatchEvent;
  channels: string[];
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
  nextTick: number;
}

/**
 * Replay stored history (change-log rows in time order) through the rules, polling each
 * entity with a running alert timer at its source's interval between its changes, as the
 * daemon would. Pure apart from iterating `rows` (the change log, read in pages).
 */
export async function backtest(rows: Iterable<ChangeLogRow> | AsyncIterable<ChangeLogRow>, opts: BacktestOptions): Promise<BacktestResult> {
  const replay = new Replay(opts.rules, 'backtest');
  replay.knowSites(opts.sites ?? []);
  const result: BacktestResult = { events: [], perRule: new Map(), perChannel: new Map(), snapshots: 0, entities: 0 };
  const tracked = new Map<string, Tracked>();
  // Only entities with a running timer are polled between changes; scanning just these
  // keeps a long history over many entities linear in its length.
  const timed = new Set<Tracked>();
  const mark = (t: Tracked): void => {
    if (replay.timed(t.source, t.entity)) timed.add(t);
    else timed.delete(t);
  };
  const record = (events: HostwatchEvent[]): void => {
    for (const event of events) {
      const shadow = event.data['shadow'] === true;
      const routed = shadow ? [] : opts.router(event);
      result.events.push({ event, channels: routed });
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
  };
  // Unchanged polls of timed entities, in time order, up to (not including) `until`.
  const tickUntil = (until: number): void => {
    for (;;) {
      let next: Tracked | null = null;
      for (const t of timed) if (t.nextTick < until && (next === null || t.nextTick < next.nextTick)) next = t;
      if (next === null) return;
      record(replay.tick(next.source, next.entity, next.siteId, next.nextTick)?.events ?? []);
      next.nextTick += opts.everyMs(next.source);
      mark(next);
    }
  };
  for await (const row of rows) {
    const source = sourceByName(row.source);
    if (!source) continue;
    // State from before the window is where the replay starts, as of the window's start.
    const at = Math.max(row.at, opts.since);
    tickUntil(at);
    record(replay.observe(source, row.entity, row.site_id, at, JSON.parse(row.body)).events);
    result.snapshots++;
    const key = `${row.source}\u0000${row.entity}`;
    let t = tracked.get(key);
    if (!t) {
      result.entities++;
      t = { source, entity: row.entity, siteId: row.site_id, nextTick: 0 };
      tracked.set(key, t);
    }
    t.nextTick = at + opts.everyMs(source);
    mark(t);
  }
  tickUntil(opts.now + 1);
  return result;
}

/** The backtest as text: one line per event, then counts per rule and per channel. */
export function formatBacktest(r: BacktestResult, header: string): string[] {
  const lines = [header, ''];
  for (const e of r.events) lines.push(`${e.event.time}  ${eventLine(e.event)}  -> ${e.channels.join(', ') || (e.event.data['shadow'] ? 'shadow' : 'none')}`);
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
