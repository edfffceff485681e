import { diff } from '../diff/index.js';
import type { CompiledDiffOptions } from '../diff/index.js';
import type { Change } from '../diff/types.js';
import { alertEventId, changeEventId, envelope } from '../events/envelope.js';
import type { AlertStatus, HostwatchEvent } from '../events/types.js';
import { check, decideAlert, renderSummary, type RuleInput } from '../rules/evaluate.js';
import type { CompiledRule } from '../rules/types.js';
import { recordsAt } from '../sources/records.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';

/** The rules of one source, split by kind (computed once at start). */
export interface SourceRules {
  change: CompiledRule[];
  alert: CompiledRule[];
}

/** Everything the planner needs; all IO has been done by the caller. */
export interface PlanInput {
  instance: string;
  source: SourceDef;
  entity: string;
  /** The site a per-site entity belongs to. */
  entitySite: SiteInfo | null;
  siteLookup: (id: number) => SiteInfo | null;
  /** The previous snapshot value; null on a baseline. */
  before: unknown;
  after: unknown;
  /** First successful poll of this entity: no change events (invariant 2). */
  baseline: boolean;
  /** The snapshot did not change; only re-check alert conditions (after a restart). */
  alertsOnly: boolean;
  /** Version number of the snapshot `after` (ids of change events derive from it). */
  version: number;
  rules: SourceRules;
  /** Diff options for one record (volatile paths relative to the record). */
  recordDiff: CompiledDiffOptions;
  alertState: (rule: string, subject: string) => AlertRow | undefined;
  /** Alerts firing for a site (used when the site disappears from the list). */
  firingForSite: (siteId: number) => AlertRow[];
  ruleByName: (name: string) => CompiledRule | undefined;
  now: Date;
}

export interface PlanOutput {
  events: HostwatchEvent[];
  alerts: AlertRow[];
  /** Rule evaluation problems worth a log line (condition or template errors). */
  problems: string[];
}

interface RecordView {
  subject: string;
  key: string | null;
  before: unknown;
  after: unknown;
  changes: Change[];
  changed: boolean;
  site: SiteInfo | null;
}

/**
 * Turn one snapshot pair into events and alert-state updates. Pure: no IO, no clock
 * (the time is in the input), so it is tested directly and replayable.
 */
export function planEvents(input: PlanInput): PlanOutput {
  const out: PlanOutput = { events: [], alerts: [], problems: [] };
  for (const rec of records(input)) {
    if (rec.changed && !input.baseline && !input.alertsOnly) applyChangeRules(input, rec, out);
    applyAlertRules(input, rec, out);
    if (input.source.name === 'sites' && rec.after === null && rec.before !== null && !input.baseline) {
      resolveForRemovedSite(input, rec, out);
    }
  }
  return out;
}

function records(input: PlanInput): RecordView[] {
  const { source } = input;
  if (source.key === undefined) {
    const changes = input.before === null ? [] : diff(input.before, input.after, input.recordDiff);
    return [
      {
        subject: input.entity,
        key: null,
        before: input.before,
        after: input.after,
        changes,
        changed: changes.length > 0,
        site: input.entitySite,
      },
    ];
  }
  const key = source.key;
  const beforeMap = indexBy(listOf(source, input.before), key);
  const afterMap = indexBy(listOf(source, input.after), key);
  const views: RecordView[] = [];
  const everything = input.baseline || input.alertsOnly;
  for (const [k, a] of afterMap) {
    const b = beforeMap.get(k) ?? null;
    let changes: Change[];
    if (b === null) changes = input.baseline ? [] : [{ path: `[${key}=${k}]`, before: null, after: a }];
    else changes = diff(b, a, input.recordDiff);
    if (changes.length === 0 && !everything) continue;
    views.push(recordView(input, k, b, a, changes));
  }
  for (const [k, b] of beforeMap) {
    if (afterMap.has(k)) continue;
    views.push(recordView(input, k, b, null, [{ path: `[${key}=${k}]`, before: b, after: null }]));
  }
  return views;
}

function recordView(input: PlanInput, k: string, before: unknown, after: unknown, changes: Change[]): RecordView {
  return {
    subject: `${input.entity}/${k}`,
    key: k,
    before,
    after,
    changes,
    changed: changes.length > 0,
    site: siteOfRecord(input, (after ?? before) as Record<string, unknown>),
  };
}

function siteOfRecord(input: PlanInput, rec: Record<string, unknown>): SiteInfo | null {
  const field = input.source.siteField;
  if (field === undefined) return input.entitySite;
  const id = rec[field];
  if (typeof id !== 'number') return null;
  if (input.source.name === 'sites') return siteInfoFromRecord(rec);
  return input.siteLookup(id);
}

/** A4: the site fields hostwatch uses, from a site record (tolerant of missing fields). */
export function siteInfoFromRecord(rec: Record<string, unknown>): SiteInfo {
  const id = rec['id'] as number;
  const domain =
    typeof rec['domain'] === 'string' ? rec['domain'] : typeof rec['name'] === 'string' ? rec['name'] : `site-${id}`;
  return { id, domain };
}

function applyChangeRules(input: PlanInput, rec: RecordView, out: PlanOutput): void {
  for (const rule of input.rules.change) {
    const ruleInput = toRuleInput(rec);
    const verdict = check(rule, ruleInput);
    if ('unknown' in verdict) {
      out.problems.push(`rule ${rule.name} on ${rec.subject}: ${verdict.unknown}`);
      continue;
    }
    if (!verdict.value) continue;
    const id = changeEventId(rule.name, rec.subject, input.version);
    out.events.push(makeEvent(input, rule, rec, id, null, out));
  }
}

function applyAlertRules(input: PlanInput, rec: RecordView, out: PlanOutput): void {
  for (const rule of input.rules.alert) {
    const state = input.alertState(rule.name, rec.subject);
    const current: AlertStatus | null = state?.status ?? null;
    let next: AlertStatus | null;
    if (rec.after === null) {
      // The record is gone: whatever fired about it no longer holds.
      next = current === 'firing' ? 'resolved' : null;
    } else {
      const verdict = check(rule, toRuleInput(rec));
      if ('unknown' in verdict) out.problems.push(`rule ${rule.name} on ${rec.subject}: ${verdict.unknown}`);
      next = decideAlert(verdict, current);
    }
    if (next === null) continue;
    const seq = next === 'firing' ? (state?.seq ?? 0) + 1 : (state?.seq ?? 1);
    const id = alertEventId(rule.name, rec.subject, seq, next);
    out.events.push(makeEvent(input, rule, rec, id, next, out));
    out.alerts.push({
      rule: rule.name,
      subject: rec.subject,
      site_id: rec.site?.id ?? null,
      status: next,
      seq,
      since: input.now.getTime(),
      last_event_id: id,
    });
  }
}

function resolveForRemovedSite(input: PlanInput, rec: RecordView, out: PlanOutput): void {
  const siteId = rec.site?.id;
  if (siteId === undefined) return;
  for (const row of input.firingForSite(siteId)) {
    const rule = input.ruleByName(row.rule);
    if (!rule || out.alerts.some((a) => a.rule === row.rule && a.subject === row.subject)) continue;
    const id = alertEventId(row.rule, row.subject, row.seq, 'resolved');
    const view: RecordView = { ...rec, subject: row.subject, before: null, after: null, changes: [] };
    const event = makeEvent(input, rule, view, id, 'resolved', out);
    event.data.summary = `${event.data.summary} (site removed)`;
    out.events.push(event);
    out.alerts.push({ ...row, status: 'resolved', since: input.now.getTime(), last_event_id: id });
  }
}

function makeEvent(
  input: PlanInput,
  rule: CompiledRule,
  rec: RecordView,
  id: string,
  status: AlertStatus | null,
  out: PlanOutput,
): HostwatchEvent {
  const summary = renderSummary(rule, toRuleInput(rec), status);
  if (summary.error) out.problems.push(`rule ${rule.name}: summary template: ${summary.error}`);
  return envelope({
    id,
    instance: input.instance,
    subject: rec.subject,
    time: input.now,
    data: {
      name: rule.event,
      severity: rule.severity,
      ...(status ? { status } : {}),
      summary: summary.text,
      site_id: rec.site?.id ?? null,
      domain: rec.site?.domain ?? null,
      changes: rec.changes,
      rule: rule.name,
      observed_at: input.now.toISOString(),
    },
  });
}

function toRuleInput(rec: RecordView): RuleInput {
  return { subject: rec.subject, site: rec.site, before: rec.before, after: rec.after, changes: rec.changes };
}

/** The list of records inside a snapshot value (honouring `listField`). */
export function listOf(source: SourceDef, value: unknown): Record<string, unknown>[] {
  if (value === null || value === undefined) return [];
  return recordsAt(source, value) as Record<string, unknown>[];
}

function indexBy(list: Record<string, unknown>[], key: string): Map<string, Record<string, unknown>> {
  const m = new Map<string, Record<string, unknown>>();
  for (const item of list) m.set(String(item[key]), item);
  return m;
}
