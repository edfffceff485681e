import { isCelError, isCelList, isCelMap, isCelUint } from '@bufbuild/cel';
import { compileCel, comparedStrings, parseCel, unknownVariables } from '../cel.js';
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

/**
 * An event as a match sees it (routing.ts' routeBindings of a firing `site.offline`; a test
 * keeps the two equal), to learn what a match gives.
 */
export const SAMPLE_EVENT_BINDINGS: Readonly<Record<string, unknown>> = {
  type: 'hostwatch.site.offline',
  name: 'site.offline',
  severity: 'critical',
  status: 'firing',
  subject: 'sites/1/health',
  site_id: 1n,
  domain: 'example.com',
  rule: 'site-offline',
  labels: {},
};

/**
 * What a match gives for `bindings` when that is not true or false ("a number", "a
 * string"), else null. A match that gives anything else never takes anything: routing,
 * silences, maintenance windows, inhibition and site labels all ask for `true`, so `match:
 * severity` would route, silence or label nothing, silently. An evaluation error (a label the
 * sample lacks) is not reported: real events may have it. Throws on a syntax error.
 */
export function nonBooleanMatch(match: string, bindings: Readonly<Record<string, unknown>> = SAMPLE_EVENT_BINDINGS): string | null {
  const v = compileCel(match)(bindings as Record<string, never>);
  if (isCelError(v) || typeof v === 'boolean') return null;
  if (v === null) return 'null';
  if (typeof v === 'bigint' || typeof v === 'number' || isCelUint(v)) return 'a number';
  if (typeof v === 'string') return 'a string';
  if (isCelList(v) || Array.isArray(v)) return 'a list';
  if (isCelMap(v) || typeof v === 'object') return 'a map';
  return `a ${typeof v}`;
}

/** How a match that is not true/false is said, at its key or field. */
export function nonBooleanMessage(gives: string, what = 'an event', example = 'site_id == 12'): string {
  return `must be true or false for ${what} (like "${example}"), but it gives ${gives}`;
}
