import { isCelError } from '@bufbuild/cel';
import type { Change } from '../diff/types.js';
import type { AlertStatus } from '../events/types.js';
import type { SiteInfo } from '../sources/types.js';
import { liquid } from './parse.js';
import type { CompiledRule } from './types.js';

/** What a rule sees about one record (or one whole snapshot) of a source. */
export interface RuleInput {
  subject: string;
  site: SiteInfo | null;
  /** The record before (null when new or on a baseline). */
  before: unknown;
  /** The record now (null when it was removed). */
  after: unknown;
  /** Field changes inside the record, relative to it. */
  changes: Change[];
}

/**
 * A condition's outcome. `unknown` is an evaluation error (say, comparing a null reading
 * with a number): it is never taken as false, so an alert neither fires nor resolves on it.
 */
export type Verdict = { value: boolean } | { unknown: string };

/** Evaluate a rule's CEL condition. Pure. */
export function check(rule: CompiledRule, input: RuleInput): Verdict {
  const result = rule.condition({
    before: (input.before ?? null) as never,
    after: (input.after ?? null) as never,
    changes: input.changes as never,
    site: (input.site ?? null) as never,
    params: rule.params as never,
    subject: input.subject,
  });
  if (isCelError(result)) return { unknown: result.message };
  if (typeof result !== 'boolean') return { unknown: `condition gave ${typeof result}, not a boolean` };
  return { value: result };
}

/**
 * The state change an alert rule's verdict implies: fire when true and not firing,
 * resolve when false and firing, otherwise nothing (level-triggered, no repeats).
 */
export function decideAlert(verdict: Verdict, current: AlertStatus | null): AlertStatus | null {
  if (!('value' in verdict)) return null;
  if (verdict.value && current !== 'firing') return 'firing';
  if (!verdict.value && current === 'firing') return 'resolved';
  return null;
}

/**
 * Render a rule's summary. A template error must not lose the event: it falls back to a
 * plain summary and reports the error for the log.
 */
export function renderSummary(
  rule: CompiledRule,
  input: RuleInput,
  status: AlertStatus | null,
): { text: string; error: string | null } {
  const scope = {
    event: rule.event,
    subject: input.subject,
    site_id: input.site?.id ?? null,
    domain: input.site?.domain ?? null,
    before: input.before ?? null,
    after: input.after ?? null,
    changes: input.changes,
    params: rule.params,
    status,
  };
  try {
    return { text: String(liquid.renderSync(rule.summary, scope)).trim(), error: null };
  } catch (e) {
    return { text: `${rule.event} on ${input.subject}`, error: (e as Error).message };
  }
}
