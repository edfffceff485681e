import { comparedStrings, parseCel, unknownVariables } from '../cel.js';
import { closest } from '../closest.js';

/**
 * The variables an event match can use: a route's `match`, a maintenance window's `match`,
 * an inhibit rule's `target` and a silence's `match` all see an event as routeBindings()
 * gives it (routing.ts; a test keeps the two lists equal). Here, apart from routing.ts, so
 * that the config parser can name an unknown variable at its line without loading the
 * notifier.
 */
export const MATCH_VARIABLES: readonly string[] = ['type', 'name', 'severity', 'status', 'subject', 'site_id', 'domain', 'rule', 'labels'];

/** The names of an event match's unknown variables ([] when all are known); throws on a syntax error. */
export function unknownMatchVariables(match: string): string[] {
  return unknownVariables(match, MATCH_VARIABLES);
}

/**
 * The values an event has of the match variables whose values are a closed set (a rule's
 * `severity` is one of three; a change event's `status` is null, so no string compares equal).
 */
export const MATCH_VALUES: Readonly<Record<'severity' | 'status', readonly string[]>> = {
  severity: ['critical', 'warning', 'info'],
  status: ['firing', 'resolved'],
};

/**
 * The strings an event match compares a variable with that no event has of it: `severity ==
 * 'critcal'` (a route that never takes an event, silently). `known` adds the open sets
 * (`name`, `type`: the events that rules send); throws on a syntax error.
 */
export function unknownMatchValues(match: string, known: Readonly<Record<string, readonly string[]>> = MATCH_VALUES): Array<{ variable: string; value: string; known: readonly string[] }> {
  return comparedStrings(parseCel(match).expr, new Set(Object.keys(known)))
    .filter((c) => !known[c.variable]!.includes(c.value))
    .map((c) => ({ ...c, known: known[c.variable]! }));
}

/** How a value no event has is said, at the match's key: the near miss, then what there is. */
export function matchValueMessage(
  u: { variable: string; value: string; known: readonly string[] },
  what = `${u.variable} is one of ${u.known.join(', ')}`,
  near = closest(u.value, u.known),
): string {
  return `compares ${u.variable} with ${JSON.stringify(u.value)}, which no event has${near ? ` (did you mean ${near}?)` : ''}; ${what}`;
}
