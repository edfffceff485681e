import type { Config } from '../config/types.js';
import { closest } from '../closest.js';
import { knownEventNames } from '../events/catalog.js';
import { TYPE_PREFIX } from '../events/envelope.js';
import { matchValueMessage, unknownMatchValues } from './match-variables.js';
import { INCIDENT_EVENT } from './incidents.js';
import type { CompiledRule } from '../rules/types.js';

/** A config key (its path, as `['inhibit', 0, 'source']`) that names an event no rule sends. */
export interface UnknownEventName {
  path: Array<string | number>;
  message: string;
}

/**
 * What is wrong with the event names and types an event match compares with (`name ==
 * 'site.ofline'`, `type == 'site.offline'`), given the names of the events that can exist
 * (knownEventNames): one message per value no event has, with the near miss. A route's,
 * maintenance window's or inhibit target's match (below) and a silence's. [] on a syntax
 * error, which is the caller's to report.
 */
export function eventMatchProblems(match: string, known: readonly string[]): string[] {
  // A match comparing `name` or `type` with an event no rule sends takes no event.
  const values = { name: known, type: known.map((n) => TYPE_PREFIX + n) };
  try {
    return unknownMatchValues(match, values).map((u) => {
      // `type` is the name with its prefix: `type == 'site.offline'` meant hostwatch.site.offline.
      const prefixed = u.variable === 'type' && known.includes(u.value) ? TYPE_PREFIX + u.value : undefined;
      return matchValueMessage(u, 'the events are those of docs/events.md and the event: of your rules', prefixed);
    });
  } catch {
    return [];
  }
}

/**
 * Event names in the config that no rule sends: an inhibit rule's `source`, the names in
 * `incidents.alerts`, and the names and types that a route's or maintenance window's `match`
 * or an inhibit `target` compares with (`name == 'site.ofline'`). Misspelt, an inhibition
 * would never start, an incident never gather and a route never take an event, silently.
 * Known: every event of the catalog, of the operator events and of the rules loaded
 * (built-in and the user's, enabled or not). Each problem is named by its key path, with the
 * near miss. Checked by `hostwatch check`, and `run` refuses to start on one (createApp).
 */
export function unknownEventNames(config: Pick<Config, 'inhibit' | 'incidents' | 'routes' | 'maintenance'>, rules: readonly CompiledRule[]): UnknownEventName[] {
  const known = knownEventNames(rules);
  // An inhibition starts, and an incident gathers, only from a site's alert that fires.
  const alerts = [...new Set(rules.filter((r) => r.kind === 'alert').map((r) => r.event))];
  const changes = new Set(rules.filter((r) => r.kind === 'change').map((r) => r.event));
  const problem = (path: Array<string | number>, name: string, what: string): UnknownEventName | null => {
    if (alerts.includes(name)) return null;
    if (!known.includes(name)) {
      const near = closest(name, known);
      return { path, message: `no rule sends the event ${name}${near ? ` (did you mean ${near}?)` : ''}; the events are those of docs/events.md and the event: of your rules` };
    }
    const near = closest(name, alerts);
    const kind = changes.has(name) ? 'a change event, not an alert' : name === INCIDENT_EVENT ? 'about many sites at once, not about one site' : 'about hostwatch itself, not about a site';
    return { path, message: `${name} is ${kind}: ${what}${near ? ` (did you mean ${near}?)` : ''}` };
  };
  const matches = (path: Array<string | number>, match: string | null): UnknownEventName[] =>
    match ? eventMatchProblems(match, known).map((message) => ({ path, message })) : [];
  return [
    ...config.inhibit.map((i, n) => problem(['inhibit', n, 'source'], i.source, "an inhibition starts only from a site's alert (kind: alert) as it fires")),
    ...config.incidents.alerts.map((name, n) => problem(['incidents', 'alerts', n], name, "an incident gathers only sites' alerts (kind: alert) as they fire")),
    ...config.routes.flatMap((r, n) => matches(['routes', n, 'match'], r.match)),
    ...config.maintenance.flatMap((m, n) => matches(['maintenance', n, 'match'], m.match)),
    ...config.inhibit.flatMap((i, n) => matches(['inhibit', n, 'target'], i.target)),
  ].filter((p) => p !== null);
}
