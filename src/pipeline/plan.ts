import { humanDuration } from '../config/duration.js';
import { diff } from '../diff/index.js';
import type { CompiledDiffOptions } from '../diff/index.js';
import type { Change } from '../diff/types.js';
import { alertEventId, alertId, alertRepeatId, changeEventId, dedupEventId, envelope } from '../events/envelope.js';
import type { AlertStatus, HostwatchEvent } from '../events/types.js';
import {
  check,
  dedupValue,
  hasTimer,
  holds,
  renderTexts,
  seenValues,
  stepAlert,
  type AlertState,
  type RuleInput,
  type Verdict,
} from '../rules/evaluate.js';
import type { CompiledRule } from '../rules/types.js';
import { recordsAt } from '../sources/records.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { EvidenceRow } from '../store/history-repo.js';

/** The rules of one source, split by kind (computed once at start). */
export interface SourceRules {
  change: CompiledRule[];
  /** Alert rules evaluated per record (or on the whole snapshot of an unkeyed source). */
  alert: CompiledRule[];
  /** Absence rules: evaluated once per entity, over all its records. */
  entity: CompiledRule[];
  /** Some alert rule has `for`, `keep_firing_for` or `repeat`: time alone can move it. */
  timed: boolean;
}

/** Split a source's enabled rules by kind (done once per source). */
export function sourceRules(rules: readonly CompiledRule[], source: string): SourceRules {
  const mine = rules.filter((r) => r.source === source && r.enabled);
  const alert = mine.filter((r) => r.kind === 'alert');
  return {
    change: mine.filter((r) => r.kind === 'change'),
    alert: alert.filter((r) => r.absence === null),
    entity: alert.filter((r) => r.absence !== null),
    // A `window` condition reads the past, which moves with time even when the data does not.
    timed: alert.some((r) => r.forMs > 0 || r.keepFiringForMs > 0 || r.repeatMs !== null || r.windowMs !== null),
  };
}

/**
 * Only the rules that read the clock, for evaluating a stored snapshot again as time
 * passes (the re-evaluator; `rules test` and backtests between polls). `due` picks among
 * them (each has its own `every`).
 */
export function clockRules(rules: SourceRules, due: (rule: CompiledRule) => boolean = () => true): SourceRules {
  const pick = (list: CompiledRule[]): CompiledRule[] => list.filter((r) => r.clock && due(r));
  return { change: [], alert: pick(rules.alert), entity: pick(rules.entity), timed: false };
}

/** Whether a source has rules that read the clock. */
export function hasClockRules(rules: SourceRules): boolean {
  return rules.alert.some((r) => r.clock) || rules.entity.length > 0;
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
  /** A re-evaluation of clock rules on the stored snapshot as time passed (no poll). */
  reevaluation?: boolean;
  /** Version number of the snapshot `after` (ids of change events derive from it). */
  version: number;
  rules: SourceRules;
  /** Diff options for one record (volatile paths relative to the record). */
  recordDiff: CompiledDiffOptions;
  alertState: (rule: string, subject: string) => AlertRow | undefined;
  /** Alerts firing for a site (used when the site disappears from the list). */
  firingForSite: (siteId: number) => AlertRow[];
  ruleByName: (name: string) => CompiledRule | undefined;
  /** This entity's snapshot as it was at a time (rules with a `window`); undefined when unknown. */
  pastValue?: (at: number) => unknown;
  now: Date;
}

/**
 * What a caller of planEvents decides about one plan: which snapshot pair, how to take it,
 * with which rules. The rest of PlanInput (site directory, alert state, the past, the
 * time) comes from the caller's own state: the database for the poller, memory for replays.
 */
export type PlanCall = Pick<PlanInput, 'source' | 'entity' | 'before' | 'after' | 'baseline' | 'alertsOnly' | 'reevaluation' | 'version' | 'rules'> & {
  siteId: number | null;
};

export interface PlanOutput {
  events: HostwatchEvent[];
  alerts: AlertRow[];
  /** What each rule-made event's rule saw, stored with the event for `explain`. */
  evidence: EvidenceRow[];
  /** Some alert of this entity has a running timer: poll it again even when unchanged. */
  timed: boolean;
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
  /** Entity views of absence rules: the records. */
  items?: readonly unknown[];
}

/**
 * Turn one snapshot pair into events and alert-state updates. Pure: no IO, no clock
 * (the time is in the input), so it is tested directly and replayable.
 */
export function planEvents(input: PlanInput): PlanOutput {
  const out: PlanOutput = { events: [], alerts: [], evidence: [], timed: false, problems: [] };
  const r = input.rules;
  // No per-record rules and no removed-site resolutions to make: nothing to diff per record.
  if (r.change.length > 0 || r.alert.length > 0 || input.source.name === 'sites') {
    for (const rec of records(input)) {
      if (rec.changed && !input.baseline && !input.alertsOnly) applyChangeRules(input, rec, out);
      applyAlertRules(input, rec, out, r.alert);
      if (input.source.name === 'sites' && rec.after === null && rec.before !== null && !input.baseline) {
        resolveForRemovedSite(input, rec, out);
      }
    }
  }
  // Absence rules look at the entity as a whole, after its records had their say.
  if (r.entity.length > 0) applyAlertRules(input, entityView(input), out, r.entity);
  return out;
}

/** The whole entity as one record, for absence rules: its subject is the entity, `items` its records. */
function entityView(input: PlanInput): RecordView {
  return {
    subject: input.entity,
    key: null,
    before: input.before,
    after: input.after,
    changes: [],
    changed: false,
    site: input.entitySite,
    items: input.source.key === undefined ? [] : listOf(input.source, input.after),
  };
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
  // With timed alert rules, unchanged records are evaluated too: their timers run on.
  const everything = input.baseline || input.alertsOnly || input.rules.timed;
  for (const [k, a] of afterMap) {
    const b = beforeMap.get(k) ?? null;
    let changes: Change[];
    if (b === null) changes = input.baseline ? [] : [{ path: `[${key}=${k}]`, before: null, after: a }];
    else changes = diff(b, a, input.recordDiff);
    if (changes.length === 0 && !everything) continue;
    views.push(recordView(input, k, b, a, changes));
  }
  // Lists come newest first (backups, jobs, cron runs): numbered records are taken in id
  // order instead, so the events of records found in one poll are in the feed oldest first.
  if (views.every((v) => /^\d{1,15}$/.test(v.key!))) views.sort((x, y) => Number(x.key) - Number(y.key));
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
  const ruleInput = toRuleInput(input, rec);
  for (const rule of input.rules.change) {
    const verdict = check(rule, ruleInput(rule));
    if ('unknown' in verdict) {
      out.problems.push(`rule ${rule.name} on ${rec.subject}: ${verdict.unknown}`);
      continue;
    }
    if (!verdict.value) continue;
    const dedup = dedupValue(rule, ruleInput(rule));
    if ('unknown' in dedup) {
      out.problems.push(`rule ${rule.name} on ${rec.subject}: dedup_key: ${dedup.unknown}`);
      continue;
    }
    const id = dedup.key === null ? changeEventId(rule.name, rec.subject, input.version) : dedupEventId(rule.name, rec.subject, dedup.key);
    const ri = ruleInput(rule);
    const event = makeEvent(input, rule, rec, ri, id, null, out);
    out.events.push(event);
    out.evidence.push(evidence(input, rule, ri, event, { expr: 'when', verdict, dedup_key: dedup.key }));
  }
}

function applyAlertRules(input: PlanInput, rec: RecordView, out: PlanOutput, rules: readonly CompiledRule[]): void {
  const ruleInput = toRuleInput(input, rec);
  const now = input.now.getTime();
  for (const rule of rules) {
    const row = input.alertState(rule.name, rec.subject);
    const cur: AlertState | null = row ?? null;
    const gone = rec.after === null;
    let h: ReturnType<typeof holds> | null = null;
    if (!gone) {
      h = holds(rule, ruleInput(rule), cur?.status === 'firing');
      if ('unknown' in h.verdict) out.problems.push(`rule ${rule.name} on ${rec.subject}: ${h.verdict.unknown}`);
    }
    // A record that is gone resolves what fired about it, at once.
    const step = stepAlert(rule, gone ? false : h!.holds, cur, now, gone, h?.forMs ?? rule.forMs);
    if (rule.windowMs !== null || hasTimer(rule, step.state)) out.timed = true;
    if (!step.changed) continue;
    let id: string | null = row?.last_event_id ?? null;
    if (step.emit !== null) {
      const s = step.state;
      id = step.emit === 'repeat' ? alertRepeatId(rule.name, rec.subject, s.seq, s.repeats) : alertEventId(rule.name, rec.subject, s.seq, step.emit);
      const status: AlertStatus = step.emit === 'resolved' ? 'resolved' : 'firing';
      const event = makeEvent(input, rule, rec, ruleInput(rule), id, status, out, alertId(rule.name, rec.subject, s.seq));
      if (step.emit === 'repeat') event.data['repeat'] = s.repeats;
      out.events.push(event);
      out.evidence.push(
        evidence(input, rule, ruleInput(rule), event, {
          expr: h?.expr ?? 'when',
          verdict: h?.verdict ?? { value: false },
          gone,
          timers: { for_ms: h?.forMs ?? rule.forMs, keep_firing_for_ms: rule.keepFiringForMs, repeat_ms: rule.repeatMs, pending_since: cur?.pending_since ?? null, clear_since: cur?.clear_since ?? null },
        }),
      );
    }
    out.alerts.push({
      rule: rule.name,
      subject: rec.subject,
      site_id: rec.site?.id ?? null,
      ...step.state,
      // A row of an alert that never fired (pending only) is stored as resolved, seq 0.
      status: step.state.status ?? 'resolved',
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
    const ri = toRuleInput(input, view)(rule);
    const event = makeEvent(input, rule, view, ri, id, 'resolved', out, alertId(row.rule, row.subject, row.seq));
    // Not the rule's resolved text ("is back online"): the condition did not clear, the site left.
    event.data.summary = `${event.data.domain ?? `site ${siteId}`} was removed from the account, so its ${rule.event} alert is resolved`;
    out.events.push(event);
    out.evidence.push(evidence(input, rule, ri, event, { expr: 'when', verdict: { value: false }, gone: true }));
    out.alerts.push({ ...row, status: 'resolved', since: input.now.getTime(), pending_since: null, clear_since: null, last_event_id: id });
  }
}

function makeEvent(
  input: PlanInput,
  rule: CompiledRule,
  rec: RecordView,
  ri: RuleInput,
  id: string,
  status: AlertStatus | null,
  out: PlanOutput,
  alert: string | null = null,
): HostwatchEvent {
  const texts = renderTexts(rule, ri, status);
  if (texts.summaryError) out.problems.push(`rule ${rule.name}: summary template: ${texts.summaryError}`);
  if (texts.descriptionError) out.problems.push(`rule ${rule.name}: description template: ${texts.descriptionError}`);
  return envelope({
    id,
    instance: input.instance,
    subject: rec.subject,
    time: input.now,
    data: {
      name: rule.event,
      severity: rule.severity,
      ...(status ? { status } : {}),
      ...(alert !== null ? { alert_id: alert } : {}),
      summary: texts.summary,
      site_id: rec.site?.id ?? null,
      domain: rec.site?.domain ?? null,
      changes: rec.changes,
      rule: rule.name,
      observed_at: input.now.toISOString(),
      // Site labels (config site_labels) and the rule's own; the rule's win on a clash.
      ...labelsOf(rule, rec.site),
      ...(texts.description !== null ? { description: texts.description } : {}),
      // Shadow events are stored and shown, never delivered (docs/rules.md, "Shadow mode").
      ...(rule.mode === 'shadow' ? { shadow: true } : {}),
    },
  });
}

function labelsOf(rule: CompiledRule, site: SiteInfo | null): { labels?: Record<string, string> } {
  const labels = { ...(site?.labels ?? {}), ...rule.labels };
  return Object.keys(labels).length ? { labels } : {};
}

/** What `hostwatch explain` shows about an event: everything the rule saw, as stored at the time. */
export interface Evidence {
  rule: string;
  kind: CompiledRule['kind'];
  mode: CompiledRule['mode'];
  origin: string;
  /** The expression that decided (`when`, `resolve_when` for a firing alert with hysteresis, `absent` for an absence rule). */
  expr: 'when' | 'resolve_when' | 'absent';
  expression: string;
  verdict: Verdict;
  seen: Record<string, unknown>;
  params: Record<string, unknown>;
  source: string;
  entity: string;
  subject: string;
  /** The snapshot versions compared (change_log rows of `entity`). */
  versions: { before: number | null; after: number };
  before: unknown;
  after: unknown;
  past?: unknown;
  paths: string[];
  [extra: string]: unknown;
}

function evidence(
  input: PlanInput,
  rule: CompiledRule,
  ri: RuleInput,
  event: HostwatchEvent,
  extra: { expr: 'when' | 'resolve_when' | 'absent'; verdict: Verdict; [k: string]: unknown },
): EvidenceRow {
  const { expr, verdict, ...rest } = extra;
  const a = rule.absence;
  const body: Evidence = {
    rule: rule.name,
    kind: rule.kind,
    mode: rule.mode,
    origin: rule.origin,
    expr,
    expression: expr === 'resolve_when' ? rule.resolveWhenSource! : expr === 'absent' && a ? absenceText(rule) : rule.when,
    verdict,
    seen: seenValues(rule, ri),
    params: rule.params,
    source: input.source.name,
    entity: input.entity,
    subject: ri.subject,
    versions: { before: input.baseline ? null : input.alertsOnly ? input.version : input.version - 1, after: input.version },
    before: ri.before ?? null,
    after: ri.after ?? null,
    ...(rule.windowMs !== null ? { past: ri.past ?? null } : {}),
    // Clock rules: the time they were evaluated at (explain shows it; the verdict depends on it).
    ...(rule.clock ? { now: new Date(ri.now).toISOString(), ...(input.reevaluation ? { reevaluated: true } : {}) } : {}),
    paths: ri.changes.map((c) => c.path),
    ...rest,
  };
  return { event_id: event.id, at: input.now.getTime(), body: JSON.stringify(body) };
}

/** An absence rule as one line: `no record with <match> (time <time>) in the last <for>`. */
export function absenceText(rule: CompiledRule): string {
  const a = rule.absence!;
  const guard = rule.when === 'true' ? '' : ` while ${rule.when}`;
  return `no record with ${a.matchSource} (time ${a.timeSource}${a.withinSource ? `, in ${a.withinSource}` : ''}) in the last ${humanDuration(a.forMs)}${guard}`;
}

/** The rule input of a record for a rule (a rule with a `window` also sees `past`). */
function toRuleInput(input: PlanInput, rec: RecordView): (rule: CompiledRule) => RuleInput {
  const base: RuleInput = {
    subject: rec.subject,
    site: rec.site,
    before: rec.before,
    after: rec.after,
    changes: rec.changes,
    now: input.now.getTime(),
    ...(rec.items ? { items: rec.items } : {}),
  };
  // One input per window, not per call: the rule layer keeps its CEL conversions per input.
  const windowed = new Map<number, RuleInput>();
  return (rule) => {
    if (rule.windowMs === null) return base;
    let ri = windowed.get(rule.windowMs);
    if (ri === undefined) {
      ri = { ...base, past: pastRecord(input, rec, rule.windowMs) };
      windowed.set(rule.windowMs, ri);
    }
    return ri;
  };
}

function pastRecord(input: PlanInput, rec: RecordView, windowMs: number): unknown {
  const value = input.pastValue?.(input.now.getTime() - windowMs);
  if (value === undefined || value === null) return null;
  if (input.source.key === undefined || rec.key === null) return value;
  const key = input.source.key;
  return listOf(input.source, value).find((r) => String(r[key]) === rec.key) ?? null;
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
