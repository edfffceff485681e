import type { Config } from '../config/types.js';
import { SOURCES, sitesSource } from './registry.js';
import type { SourceDef } from './types.js';

/** A source the config turns on, with its effective interval. */
export interface EnabledSource {
  def: SourceDef;
  everyMs: number;
}

/**
 * The sources a config turns on. Every source is on unless the config says
 * `enabled: false`; opt-in sources (`defaultEnabled: false`) only when the config names
 * them; `files` only with `paths`. A detail source or view needs its parent too. The site
 * list is always read: everything per-site depends on it.
 */
export function enabledSources(config: Config): EnabledSource[] {
  const on = new Map<string, boolean>();
  for (const def of SOURCES) {
    const o = config.sources[def.name];
    let enabled = o ? o.enabled : (def.defaultEnabled ?? true);
    if (def.each && (o?.paths ?? []).length === 0 && Object.keys(o?.site_paths ?? {}).length === 0) enabled = false;
    const upstream = def.from ?? def.parent;
    if (upstream !== undefined && on.get(upstream) !== true) enabled = false;
    if (def.name === sitesSource.name) enabled = true;
    on.set(def.name, enabled);
  }
  return SOURCES.filter((def) => on.get(def.name)).map((def) => ({
    def,
    everyMs: config.sources[def.name]?.every_ms ?? def.defaultEveryMs,
  }));
}

/** The `files` paths of a site: those for every site, then the site's own (no repeats). */
export function pathsFor(config: Config, source: string, siteId: number | null): string[] {
  const o = config.sources[source];
  const own = siteId === null ? [] : (o?.site_paths?.[siteId] ?? []);
  return [...new Set([...(o?.paths ?? []), ...own])];
}

/** The scopes a read-only key needs for these sources, each with the sources that need it, sorted. */
export function scopesFor(sources: readonly EnabledSource[]): { scope: string; sources: string[] }[] {
  const by = new Map<string, string[]>();
  for (const { def } of sources) by.set(def.scope, [...(by.get(def.scope) ?? []), def.name]);
  return [...by.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([scope, names]) => ({ scope, sources: names }));
}
