import { unknownVariables } from '../cel.js';

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
