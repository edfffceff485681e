import type { CelResult } from '@bufbuild/cel';
import type { Template } from 'liquidjs';
import type { Severity } from '../events/types.js';

/**
 * `change`: one-shot, evaluated on each changed record of a new snapshot (never on a baseline).
 * `alert`: a condition on current state; fires once when it becomes true, resolves once when false.
 */
export type RuleKind = 'change' | 'alert';

/** `live` rules deliver; `shadow` rules only store their events (marked `data.shadow`). */
export type RuleMode = 'live' | 'shadow';

/** A rule compiled once at load: its condition planned, its summary template parsed. */
export interface CompiledRule {
  name: string;
  /** Catalog name, e.g. `site.offline`; the CloudEvents type is `hostwatch.<event>`. */
  event: string;
  kind: RuleKind;
  source: string;
  severity: Severity;
  when: string;
  condition: (bindings: Record<string, unknown>) => CelResult;
  summarySource: string;
  summary: Template[];
  params: Record<string, unknown>;
  enabled: boolean;
  /** `shadow`: evaluated and stored, never delivered. */
  mode: RuleMode;
  /** Free key/values copied into `data.labels` (routes match on them). */
  labels: Record<string, string>;
  /** A longer Liquid template (`data.description`), or null. */
  description: Template[] | null;
  descriptionSource: string | null;
  /** Alerts: the condition must hold this long before the alert fires (0 = at once). */
  forMs: number;
  /** Alerts: the condition must be false this long before a firing alert resolves. */
  keepFiringForMs: number;
  /** Alerts: a still-firing alert is re-sent at most this often (null = never). */
  repeatMs: number | null;
  /** Alerts: hysteresis; once firing, the alert resolves when this is true (not when `when` is false). */
  resolveWhen: ((bindings: Record<string, unknown>) => CelResult) | null;
  resolveWhenSource: string | null;
  /** Changes: a CEL expression whose value names the event; the same value is never sent twice. */
  dedupKey: ((bindings: Record<string, unknown>) => CelResult) | null;
  dedupKeySource: string | null;
  /** Rate of change over a window: the condition sees `past`, the record as it was this long ago. */
  windowMs: number | null;
  /**
   * The rule reads the clock (`now`, or it is an absence rule): its truth can change while
   * the data does not, so it is evaluated again on the stored snapshot as time passes.
   */
  clock: boolean;
  /** Clock rules: evaluated again at most this often (`every`, default 1 minute). */
  everyMs: number;
  /** Absence rules (`absent:`): the rule runs once per entity over its records. Null otherwise. */
  absence: Absence | null;
  /** Where it was defined, for messages: `rules/health.yaml:4`. */
  origin: string;
}

/**
 * "Nothing matching X in the list since D": the condition holds when no record matches
 * `match` with a `time` within `forMs` of now. When no record matches at all, it holds
 * once `forMs` has passed since hostwatch first saw it so (a wait kept in the alert state).
 */
export interface Absence {
  match: (bindings: Record<string, unknown>) => CelResult;
  matchSource: string;
  time: (bindings: Record<string, unknown>) => CelResult;
  timeSource: string;
  forMs: number;
  /** Where the records are: a CEL list expression over `after`; null = the source's records. */
  within: ((bindings: Record<string, unknown>) => CelResult) | null;
  withinSource: string | null;
}

/** One problem in a rule file: file, line, key path, and what is wrong. */
export interface RuleError {
  file: string;
  line: number | null;
  path: string;
  message: string;
}
