import { celInt, compileCel, type CelProgram } from '../cel.js';
import type { ChannelConfig, RouteConfig } from '../config/types.js';
import type { HostwatchEvent } from '../events/types.js';
import { isRecord } from '../is-record.js';
import { DEFAULTS } from '../config/parse.js';

/** A routing decision function: the channel names an event goes to. Pure. */
export type Router = (event: HostwatchEvent) => string[];

/** One channel an event is routed to, with the grouping options of the route that chose it. */
export interface RouteTarget {
  channel: string;
  /** Index of the route in `routes` (-1 without routes); part of the group key. */
  route: number;
  group_by: readonly string[];
  group_wait_ms: number;
  group_interval_ms: number;
}

/** Raised when a route's `match` is not valid CEL. */
export class RouteError extends Error {
  override readonly name = 'RouteError';
  readonly code = 'route_invalid';
}

/** What a route's `match` expression can see of an event. */
export function routeBindings(e: HostwatchEvent): Record<string, unknown> {
  return {
    type: e.type,
    name: e.data.name,
    severity: e.data.severity,
    status: e.data.status ?? null,
    subject: e.subject,
    // A CEL int, so `site_id % 2 == 0` works as written (a JSON number is a double in CEL).
    site_id: celInt(e.data.site_id ?? null),
    domain: e.data.domain ?? null,
    rule: e.data.rule,
    // Rules may give their events labels (data.labels); events without any have none.
    labels: isRecord(e.data['labels']) ? e.data['labels'] : {},
  };
}

/** Route options used when there are no routes (every event to every channel). */
export const NO_ROUTE_DEFAULTS = { group_by: [] as string[], ...DEFAULTS.route };

/** Compile a CEL match; a syntax error is a RouteError naming `where`. */
export function compileMatch(where: string, match: string | null): CelProgram | null {
  if (!match) return null;
  try {
    return compileCel(match);
  } catch (e) {
    throw new RouteError(`${where}: CEL error: ${(e as Error).message}`);
  }
}

/** True when a compiled match (or its absence) accepts the bindings; an evaluation error is no match. */
export function matches(test: CelProgram | null, bindings: Record<string, unknown>): boolean {
  return test === null || test(bindings) === true;
}

/**
 * Compile routes once. Without routes every event goes to every channel. With routes they
 * are tried in order: the first that matches decides, unless it says `continue`, in which
 * case the following routes are tried too. A route with `send_resolved: false` does not
 * take resolutions (they fall through to later routes). A channel reached by two routes
 * gets the event once, with the first route's grouping. Pure.
 */
export function compileRoutes(routes: readonly RouteConfig[], channels: readonly ChannelConfig[]): (e: HostwatchEvent) => RouteTarget[] {
  if (routes.length === 0) {
    const all = channels.map((c) => ({ channel: c.name, route: -1, ...NO_ROUTE_DEFAULTS }));
    return () => all;
  }
  const compiled = routes.map((r, i) => ({ r, i, test: compileMatch(`routes[${i}].match`, r.match) }));
  return (event) => {
    const bindings = routeBindings(event);
    const out: RouteTarget[] = [];
    const seen = new Set<string>();
    for (const { r, i, test } of compiled) {
      if (!matches(test, bindings)) continue;
      if (event.data.status === 'resolved' && !r.send_resolved) continue;
      for (const channel of r.channels) {
        if (seen.has(channel)) continue;
        seen.add(channel);
        out.push({ channel, route: i, group_by: r.group_by, group_wait_ms: r.group_wait_ms, group_interval_ms: r.group_interval_ms });
      }
      if (!r.continue) break;
    }
    return out;
  };
}

/**
 * Why the routes send an event to no channel, for `explain` (null when they send it to
 * one): no channel at all, routes that matched but take no resolutions (`send_resolved:
 * false`), a matching route that names no channel, or no route matching. Judged by the
 * routes given (the config's now, which may differ from when the event was stored).
 */
export function unroutedBecause(routes: readonly RouteConfig[], channels: readonly ChannelConfig[], event: HostwatchEvent): string | null {
  if (channels.length === 0) return 'the config has no channels';
  if (compileRoutes(routes, channels)(event).length > 0) return null;
  const bindings = routeBindings(event);
  const noResolutions: string[] = [];
  for (const [i, r] of routes.entries()) {
    if (!matches(compileMatch(`routes[${i}].match`, r.match), bindings)) continue;
    if (event.data.status === 'resolved' && !r.send_resolved) {
      noResolutions.push(`routes[${i}]`);
      continue;
    }
    if (r.channels.length === 0 && !r.continue) return `routes[${i}] matched it, and names no channel`;
  }
  if (noResolutions.length > 0) return `${noResolutions.join(' and ')} matched it but ${noResolutions.length === 1 ? 'has' : 'have'} send_resolved: false, and no route after took this resolution`;
  return `no route matched it (${routes.length} route${routes.length === 1 ? '' : 's'})`;
}

/** The channel names an event is routed to (see compileRoutes). */
export function compileRouter(routes: readonly RouteConfig[], channels: readonly ChannelConfig[]): Router {
  const route = compileRoutes(routes, channels);
  return (event) => route(event).map((t) => t.channel);
}
