import { compileCel, type CelProgram } from '../cel.js';
import type { ChannelConfig, RouteConfig } from '../config/types.js';
import type { HostwatchEvent } from '../events/types.js';

/** A routing decision function: the channel names an event goes to. Pure. */
export type Router = (event: HostwatchEvent) => string[];

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
    site_id: e.data.site_id ?? null,
    domain: e.data.domain ?? null,
    rule: e.data.rule,
    // A rule's `labels` (docs/rules.md): free key/values for routes to match on.
    labels: (e.data['labels'] as Record<string, string> | undefined) ?? {},
  };
}

/**
 * Compile routes once. Without routes every event goes to every channel; with routes the
 * first route whose `match` is true (or that has none) decides. A match that errors on an
 * event (a missing field, say) counts as no match.
 */
export function compileRouter(routes: readonly RouteConfig[], channels: readonly ChannelConfig[]): Router {
  const all = channels.map((c) => c.name);
  if (routes.length === 0) return () => all;
  const compiled = routes.map((r, i) => {
    let test: CelProgram | null = null;
    if (r.match) {
      try {
        test = compileCel(r.match);
      } catch (e) {
        throw new RouteError(`routes[${i}].match: CEL error: ${(e as Error).message}`);
      }
    }
    return { test, channels: [...r.channels] };
  });
  return (event) => {
    const bindings = routeBindings(event);
    for (const r of compiled) {
      if (!r.test) return r.channels;
      // An evaluation error is a CelError, never `true`: no match.
      if (r.test(bindings) === true) return r.channels;
    }
    return [];
  };
}
