import { formatDuration } from '../config/duration.js';
import type { HostwatchEvent } from '../events/types.js';
import { absenceText, listOf, planEvents, sourceRules, type Evidence } from '../pipeline/plan.js';
import { sourceByName } from '../sources/registry.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertsRepo } from '../store/alerts-repo.js';
import type { EventsRepo } from '../store/events-repo.js';
import type { HistoryRepo, StoredEvent } from '../store/history-repo.js';
import type { SnapshotsRepo } from '../store/snapshots-repo.js';
import { closest } from '../closest.js';
import { compileDiffOptions } from '../diff/index.js';
import { recordVolatile } from '../pipeline/poller.js';
import { check, holds, seenValues, type RuleInput } from './evaluate.js';
import type { CompiledRule } from './types.js';

/** Why an expected event did (or did not) reach a channel. */
export type WhyNotReason =
  | 'delivered'
  | 'queued'
  | 'not_routed'
  | 'pruned'
  | 'condition_false'
  | 'condition_unknown'
  | 'pending'
  | 'not_yet_evaluated'
  | 'deduplicated'
  | 'shadow'
  | 'silenced'
  | 'inhibited'
  | 'incident'
  | 'maintenance'
  | 'disabled'
  | 'no_data'
  | 'baseline_only';

/** The reads explain needs. */
export interface ExplainDeps {
  history: HistoryRepo;
  alerts: AlertsRepo;
  snapshots: SnapshotsRepo;
  events: EventsRepo;
  rules: readonly CompiledRule[];
  now: number;
  /** history.retention: older deliveries that succeeded are pruned, so their absence says nothing. */
  retentionMs?: number;
  /**
   * A site as the daemon's rules see it (`site`: id, domain and the labels of config
   * `site_labels`), from the stored site list; undefined when unknown.
   */
  site?: (id: number) => SiteInfo | undefined;
  /** Why the config's routes send an event to no channel (notify/routing.ts unroutedBecause); null: they send it somewhere. */
  unrouted?: (e: HostwatchEvent) => string | null;
}

/** Whether an event is older than history.retention: a missing outbox row may have been pruned. */
function pastRetention(deps: ExplainDeps, e: HostwatchEvent): boolean {
  return deps.retentionMs !== undefined && Date.parse(e.time) < deps.now - deps.retentionMs;
}

/** What an event past the retention with no outbox row says. */
const PRUNED_DELIVERY = 'no record: older than history.retention, whose prune removes the records of deliveries that succeeded (or no route matched it)';

/**
 * Why a stored event was held back from delivery (events.held_by, written by the notifier):
 * an inhibition (`inhibited:<source event>:<site id>`), a maintenance window
 * (`maintenance:<name>`) or a platform incident (`incident:<alert>`: held for human
 * channels only). Null when it was not held, or was held and then released.
 */
function holdOf(row: StoredEvent): { reason: 'inhibited' | 'maintenance' | 'incident'; text: string } | null {
  if (!row.held_by || row.held_outcome === 'released') return null;
  const [kind, ...rest] = row.held_by.split(':');
  if (kind === 'maintenance') return { reason: 'maintenance', text: `held back by the maintenance window ${rest.join(':')}` };
  if (kind === 'incident') {
    // A channel that had sent it before the incident opened keeps its delivery (listed after this).
    const what = `held by the platform incident about ${rest.join(':')} from the human channels it reaches that had not sent it yet (the channels below got it)`;
    return { reason: 'incident', text: row.held_outcome === 'dropped' ? `${what}; it fired and resolved during the incident, so the channels it was held from never got it` : what };
  }
  const [source, site] = rest;
  const what = `inhibited while ${source} fires for site ${site}`;
  return {
    reason: 'inhibited',
    text: row.held_outcome === 'dropped' ? `${what}; it fired and resolved while held, so it was never sent` : `${what}; held until that alert resolves`,
  };
}

/** "no rule named X (did you mean Y?); known: …": the message for a rule name that does not exist. */
export function unknownRule(name: string, rules: readonly CompiledRule[]): string {
  const known = rules.map((r) => r.name);
  const near = closest(name, known);
  return `no rule named "${name}"${near ? ` (did you mean ${near}?)` : ''}; known: ${known.join(', ')}`;
}

const iso = (ms: number | null): string => (ms === null ? '-' : new Date(ms).toISOString());
const json = (v: unknown): string => JSON.stringify(v);
/** A duration as the config and the rules write it (`26h`, `4m30s`). */
const duration = (ms: number): string => formatDuration(Math.round(ms / 1000) * 1000);

/** Why an event exists: its rule, the values its condition saw, the snapshots and diff paths, its deliveries. Null when unknown. */
export async function explainEvent(deps: ExplainDeps, id: string): Promise<string[] | null> {
  const row = await deps.history.event(id);
  if (!row) return null;
  const e = JSON.parse(row.body) as HostwatchEvent;
  const lines = [
    `event ${e.id}`,
    `  ${e.type} ${e.subject} at ${e.time}`,
    `  summary: ${e.data.summary}`,
    `  severity: ${e.data.severity}${e.data.status ? `, status: ${e.data.status}` : ''}${e.data['repeat'] !== undefined ? `, repeat ${String(e.data['repeat'])}` : ''}`,
  ];
  if (e.data['labels']) lines.push(`  labels: ${json(e.data['labels'])}`);
  const ev = await deps.history.evidence(id);
  if (!ev) {
    lines.push(`  rule: ${e.data.rule} (no evidence stored: an operator event, or older than history.retention)`);
  } else {
    const x = JSON.parse(ev.body) as Evidence;
    lines.push(
      `rule ${x.rule} (${x.origin}), kind ${x.kind}, mode ${x.mode}`,
      `  ${x.expr}: ${x.expression}`,
      `  gave: ${'value' in x.verdict ? String(x.verdict.value) : `unknown (${x.verdict.unknown})`}${x['gone'] ? ' (the record was gone)' : ''}`,
      '  values seen:',
      ...Object.entries(x.seen).map(([k, v]) => `    ${k} = ${json(v)}`),
    );
    if (typeof x['now'] === 'string') {
      lines.push(`  evaluated at now = ${x['now']}${x['reevaluated'] ? ' (re-evaluated on the stored snapshot as time passed: no poll, no API request)' : ''}`);
    }
    if (Object.keys(x.params).length) lines.push(`  params: ${json(x.params)}`);
    if (x['dedup_key'] !== undefined && x['dedup_key'] !== null) lines.push(`  dedup key: ${String(x['dedup_key'])}`);
    const timers = x['timers'] as Record<string, number | null> | undefined;
    if (timers && (timers['for_ms'] || timers['keep_firing_for_ms'] || timers['repeat_ms'])) {
      lines.push(
        `  timers: for ${duration(timers['for_ms'] ?? 0)}, keep_firing_for ${duration(timers['keep_firing_for_ms'] ?? 0)}, repeat ${timers['repeat_ms'] ? duration(timers['repeat_ms']) : 'never'}; pending since ${iso(timers['pending_since'] ?? null)}, false since ${iso(timers['clear_since'] ?? null)}`,
      );
    }
    lines.push(
      `snapshots: ${x.source} ${x.entity} version ${x.versions.after}${x.versions.before === null ? ' (baseline)' : ` against version ${x.versions.before}`}`,
      `  diff paths: ${x.paths.length ? x.paths.join(', ') : '(none: evaluated on the current state)'}`,
      `  before: ${json(x.before)}`,
      `  after: ${json(x.after)}`,
    );
    if ('past' in x) lines.push(`  past (window): ${json(x.past)}`);
  }
  lines.push(...(await deliveryLines(deps, row, e)));
  return lines;
}

async function deliveryLines(deps: ExplainDeps, row: StoredEvent, e: HostwatchEvent): Promise<string[]> {
  if (e.data['shadow'] === true) return ['delivery: none (shadow rule: stored and shown, never delivered)'];
  if (row.silenced_by) return [`delivery: none (silenced by ${row.silenced_by})`];
  const hold = holdOf(row);
  const out = await deps.events.outboxFor(e.id);
  if (hold?.reason === 'incident') return [`delivery: ${hold.text}:`, ...out.map((o) => `  ${o.channel}: ${o.state} after ${o.attempts} attempt(s)`)];
  if (hold) return [`delivery: none (${hold.text})`];
  if (out.length === 0) return [`delivery: ${pastRetention(deps, e) ? PRUNED_DELIVERY : `none (${unroutedReason(deps, e)})`}`];
  return ['delivery:', ...out.map((o) => `  ${o.channel}: ${o.state} after ${o.attempts} attempt(s)${o.last_error ? ` (last error: ${o.last_error})` : ''}`)];
}

/** Why a stored event that was not held got no outbox row, as the config's routes say now. */
function unroutedReason(deps: ExplainDeps, e: HostwatchEvent): string {
  let why: string | null = null;
  try {
    why = deps.unrouted?.(e) ?? null;
  } catch {
    // A route that does not compile is `check`'s to report; the generic reason stands.
  }
  return why === null ? 'no route matched it, or it was a duplicate of a stored event' : `${why}; judged by the routes of the config now`;
}

/** The answer to "why did I not get R about S?": a reason code and the lines that explain it. */
export interface WhyNot {
  reason: WhyNotReason;
  lines: string[];
}

/** Why rule `ruleName` did or did not send an event about `subject` (throws on an unknown rule). */
export async function explainWhyNot(deps: ExplainDeps, subject: string, ruleName: string): Promise<WhyNot> {
  const rule = deps.rules.find((r) => r.name === ruleName);
  if (!rule) throw new Error(unknownRule(ruleName, deps.rules));
  const head = [`rule ${rule.name} (${rule.origin}), kind ${rule.kind}, mode ${rule.mode}, about ${subject}`];
  const done = (reason: WhyNotReason, ...lines: string[]): WhyNot => ({ reason, lines: [...head, `why: ${reason}`, ...lines] });
  if (!rule.enabled) return done('disabled', 'the rule is switched off (enabled: false)');
  const source = sourceByName(rule.source)!;
  const found = await recordOf(deps, source, subject, rule.absence !== null);
  if (!found) return done('no_data', `no snapshot of ${subject} in source ${source.name}: never polled yet, failing, or not a subject of this source`);
  const noRecord = (): WhyNot => done('no_data', `the snapshot of ${found.entity} has no record ${subject.slice(found.entity.length + 1)}: a wrong id, or one not seen in its last two versions`);
  const last = await deps.history.lastEventOf(rule.name, subject);
  if (rule.kind === 'alert') {
    const state = await deps.alerts.get(rule.name, subject);
    // A record that is not in the snapshot and that this alert never judged: a wrong id.
    if (found.record === null && found.entity !== subject && !state) return noRecord();
    if (state?.status === 'firing' && last) return lastEventReason(deps, done, last, `firing since ${iso(state.since)}`);
    // Clock rules are judged at the time of the question, as the re-evaluator would.
    const input: RuleInput = {
      subject,
      site: siteOfFound(deps, source, found, found.record),
      before: found.record,
      after: found.record,
      changes: [],
      now: deps.now,
      ...(rule.absence ? { items: listOf(source, found.record) } : {}),
    };
    const h = holds(rule, input, false);
    const cond = rule.absence ? `absent: ${absenceText(rule)}` : `when: ${rule.when}`;
    const seen = Object.entries(seenValues(rule, input)).map(([k, v]) => `  ${k} = ${json(v)}`);
    if (rule.clock) seen.unshift(`  evaluated at now = ${iso(deps.now)}`);
    if (h.holds === null) return done('condition_unknown', cond, `could not be evaluated: ${'unknown' in h.verdict ? h.verdict.unknown : ''}`, ...seen);
    if (!h.holds) {
      const resolved = state?.status === 'resolved' && state.seq > 0 ? [`it last resolved at ${iso(state.since)}`, ...(await resolutionLines(deps, last))] : [];
      // An absence is false while a match is recent: say when it turns true if none comes.
      const when = rule.absence && h.absence?.last != null ? [`it fires at ${iso(h.absence.last + rule.absence.forMs)} if no matching record appears by then`] : [];
      return done('condition_false', cond, 'is false now; values seen:', ...seen, ...when, ...resolved);
    }
    if (state?.pending_since != null) {
      const held = deps.now - state.pending_since;
      const wait = rule.absence && h.absence?.last === null ? 'no record ever matched: the span counts from the first evaluation that found none; ' : '';
      return done(
        'pending',
        `${cond} is true; pending since ${iso(state.pending_since)} (${duration(held)} of for: ${duration(h.forMs)})`,
        `${wait}it fires at the first ${rule.clock ? 'evaluation' : 'poll'} after ${iso(state.pending_since + h.forMs)} if it still holds`,
        ...seen,
      );
    }
    const next = rule.clock
      ? `the re-evaluator evaluates it on the stored snapshot within ${duration(rule.everyMs)} (every), without a poll`
      : 'the next poll evaluates it';
    return done('not_yet_evaluated', `${cond} is true on the stored snapshot; ${next}`, ...seen);
  }
  // A change rule: replay the entity's last change through the planner.
  const versions = await deps.history.ofEntity(source.name, found.entity);
  // A record in neither of the last two versions: nothing a change rule could have seen.
  if (found.record === null && found.entity !== subject && (versions.length < 2 || found.prevRecord(versions.at(-2)!.body) === null)) return noRecord();
  if (versions.length < 2) return done('baseline_only', 'only the first snapshot (the baseline) is stored: change rules never fire on a baseline');
  const [prev, cur] = versions.slice(-2) as [(typeof versions)[0], (typeof versions)[0]];
  const plan = planEvents({
    instance: 'explain',
    source,
    entity: found.entity,
    entitySite: cur.site_id === null ? null : siteById(deps, cur.site_id),
    siteLookup: (id) => deps.site?.(id) ?? null,
    before: JSON.parse(prev.body),
    after: JSON.parse(cur.body),
    baseline: false,
    alertsOnly: false,
    version: cur.version,
    rules: { ...sourceRules([{ ...rule, enabled: true }], source.name), alert: [] },
    recordDiff: compileDiffOptions({ key: 'id', volatile: recordVolatile(source) }),
    alertState: () => undefined,
    firingForSite: () => [],
    ruleByName: () => rule,
    now: new Date(cur.at),
  });
  const made = plan.events.find((e) => e.subject === subject);
  if (!made) {
    const input: RuleInput = { subject, site: siteOfFound(deps, source, found, found.record), before: found.prevRecord(prev.body), after: found.record, changes: [], now: cur.at };
    const seen = Object.entries(seenValues(rule, input)).map(([k, v]) => `  ${k} = ${json(v)}`);
    const v = check(rule, input);
    return done(
      'unknown' in v ? 'condition_unknown' : 'condition_false',
      `when: ${rule.when}`,
      `on the last change (version ${prev.version} → ${cur.version} at ${iso(cur.at)}) it ${'unknown' in v ? `could not be evaluated: ${v.unknown}` : 'was false (or the record did not change)'}; values seen:`,
      ...seen,
    );
  }
  const stored = await deps.history.event(made.id);
  if (stored && stored.time < cur.at) {
    return done('deduplicated', `the last change made event ${made.id} again (dedup_key ${rule.dedupKeySource ?? ''}); it was first stored at ${iso(stored.time)} and is not sent twice`);
  }
  if (!stored) return done('not_yet_evaluated', `the last change would make event ${made.id}, but it is not stored (outside the watched sites, or stored history and events disagree)`);
  return lastEventReason(deps, done, stored, `made at ${iso(stored.time)}`);
}

/**
 * What became of an alert's last resolution: silenced, held back, dropped while held, or
 * not routed is why "it resolved" may never have reached anyone.
 */
async function resolutionLines(deps: ExplainDeps, last: StoredEvent | undefined): Promise<string[]> {
  if (!last) return [];
  const e = JSON.parse(last.body) as HostwatchEvent;
  if (e.data.status !== 'resolved') return [];
  const [first = '', ...rest] = await deliveryLines(deps, last, e);
  return [`its resolution, event ${e.id}, ${first}`, ...rest];
}

async function lastEventReason(deps: ExplainDeps, done: (r: WhyNotReason, ...l: string[]) => WhyNot, row: StoredEvent, what: string): Promise<WhyNot> {
  const e = JSON.parse(row.body) as HostwatchEvent;
  const intro = `event ${e.id} ${what}`;
  if (e.data['shadow'] === true) return done('shadow', intro, 'the rule is in shadow mode: its events are stored and shown, never delivered');
  if (row.silenced_by) return done('silenced', intro, `silenced by ${row.silenced_by}: stored, not delivered`);
  const hold = holdOf(row);
  if (hold?.reason === 'incident') {
    const out = await deps.events.outboxFor(e.id);
    return done('incident', intro, hold.text, ...out.map((o) => `  ${o.channel}: ${o.state} after ${o.attempts} attempt(s)`));
  }
  if (hold) return done(hold.reason, intro, `${hold.text}: stored, not delivered`);
  const out = await deps.events.outboxFor(e.id);
  const delivered = out.some((o) => o.state === 'delivered');
  const pruned = out.length === 0 && pastRetention(deps, e);
  // Never queued for a channel (and not held back): no route sent it to one.
  return done(
    delivered ? 'delivered' : pruned ? 'pruned' : out.length ? 'queued' : 'not_routed',
    intro,
    ...(out.length ? out.map((o) => `  ${o.channel}: ${o.state} after ${o.attempts} attempt(s)`) : [`  ${pruned ? PRUNED_DELIVERY : `never queued for a channel: no route sent it to one (hostwatch explain ${e.id} says why, by the routes of the config now)`}`]),
  );
}

interface FoundRecord {
  entity: string;
  /** The site of the entity's snapshot (null: account-wide). */
  siteId: number | null;
  record: unknown;
  prevRecord: (body: string) => unknown;
}

/** A site as the rules see it, from the stored site list (id and a stand-in name when it is not there). */
function siteById(deps: ExplainDeps, id: number): SiteInfo {
  return deps.site?.(id) ?? { id, domain: `site-${id}` };
}

/**
 * The `site` a rule saw for a record, as the planner picks it: the record's own site field
 * where its source has one (a site of the site list), else the entity's site.
 */
function siteOfFound(deps: ExplainDeps, source: SourceDef, found: FoundRecord, record: unknown): SiteInfo | null {
  if (source.siteField !== undefined) {
    const id = record !== null && typeof record === 'object' ? (record as Record<string, unknown>)[source.siteField] : undefined;
    return typeof id === 'number' ? siteById(deps, id) : null;
  }
  return found.siteId === null ? null : siteById(deps, found.siteId);
}

/**
 * The current record a subject names: the whole snapshot, or one keyed record of a list.
 * Absence rules name the entity itself (their subject is the whole list).
 */
async function recordOf(deps: ExplainDeps, source: SourceDef, subject: string, wholeEntity: boolean): Promise<FoundRecord | null> {
  const whole = await deps.snapshots.get(source.name, subject);
  if (whole && (source.key === undefined || wholeEntity)) {
    return { entity: subject, siteId: whole.site_id, record: JSON.parse(whole.body), prevRecord: (b) => JSON.parse(b) };
  }
  const cut = subject.lastIndexOf('/');
  if (cut < 0 || source.key === undefined) return null;
  const entity = subject.slice(0, cut);
  const k = subject.slice(cut + 1);
  const snap = await deps.snapshots.get(source.name, entity);
  if (!snap) return null;
  const key = source.key;
  const pick = (body: string): unknown => listOf(source, JSON.parse(body)).find((r) => String(r[key]) === k) ?? null;
  return { entity, siteId: snap.site_id, record: pick(snap.body), prevRecord: pick };
}
