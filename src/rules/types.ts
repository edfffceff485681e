import type { CelResult } from '@bufbuild/cel';
import type { Template } from 'liquidjs';
import type { Severity } from '../events/types.js';

/**
 * `change`: one-shot, evaluated on each changed record of a new snapshot (never on a baseline).
 * `alert`: a condition on current state; fires once when it becomes true, resolves once when false.
 */
export type RuleKind = 'change' | 'alert';

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
  /** Where it was defined, for messages: `rules/health.yaml:4`. */
  origin: string;
}

/** One problem in a rule file: file, line, key path, and what is wrong. */
export interface RuleError {
  file: string;
  line: number | null;
  path: string;
  message: string;
}
