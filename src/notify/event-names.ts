import type { Config } from '../config/types.js';
import { closest } from '../closest.js';
import { knownEventNames } from '../events/catalog.js';
import type { CompiledRule } from '../rules/types.js';

/** A config key (its path, as `['inhibit', 0, 'source']`) that names an event no rule sends. */
export interface UnknownEventName {
  path: Array<string | number>;
  message: string;
}

/**
 * Event names in the config that no rule sends: an inhibit rule's `source` and the names in
 * `incidents.alerts`. Misspelt (`site.ofline`), an inhibition would never start and an
 * incident never gather, silently. Known: every event of the catalog, of the operator
 * events and of the rules loaded (built-in and the user's, enabled or not). Each problem is
 * named by its key path, with the near miss. Checked by `hostwatch check`, and `run` refuses
 * to start on one (createApp).
 */
export function unknownEventNames(config: Pick<Config, 'inhibit' | 'incidents'>, rules: readonly CompiledRule[]): UnknownEventName[] {
  const known = knownEventNames(rules);
  const problem = (path: Array<string | number>, name: string): UnknownEventName | null => {
    if (known.includes(name)) return null;
    const near = closest(name, known);
    return { path, message: `no rule sends the event ${name}${near ? ` (did you mean ${near}?)` : ''}; the events are those of docs/events.md and the event: of your rules` };
  };
  return [
    ...config.inhibit.map((i, n) => problem(['inhibit', n, 'source'], i.source)),
    ...config.incidents.alerts.map((name, n) => problem(['incidents', 'alerts', n], name)),
  ].filter((p) => p !== null);
}
