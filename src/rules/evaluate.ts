import { isCelError, type CelResult } from '@bufbuild/cel';
import { RAW } from '../cel-fast.js';
import { celTimestamp, celValue, timeOf } from '../cel.js';
import { humanDuration } from '../config/duration.js';
import type { Change } from '../diff/types.js';
import type { AlertStatus } from '../events/types.js';
import type { SiteInfo } from '../sources/types.js';
import { liquidTemplates, type TEMPLATE_VARIABLES } from './parse.js';
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
  /** The record as it was `window` ago (rules with a `window` only; null when unknown). */
  past?: unknown;
  /** The time of the evaluation (epoch ms, from the injected clock): `now` in expressions. */
  now: number;
  /** Absence rules: the records of the entity (the source's list); the rule runs once over all. */
  items?: readonly unknown[];
}

/**
 * A condition's outcome. `unknown` is an evaluation error (say, comparing a null reading
 * with a number): it is never taken as false, so an alert neither fires nor resolves on it.
 */
export type Verdict = { value: boolean } | { unknown: string };

/**
 * The CEL variables of one rule input, each converted (celValue) on its first read and kept
 * for every other rule that reads the same input: a record evaluated by ten rules is
 * converted once, not ten times per field it reads. Keyed by the input object, so a caller
 * that passes the same input to several rules (the planner does) shares the conversions;
 * inputs are never changed after they are made.
 */
const inputBindings = new WeakMap<RuleInput, Record<string, unknown>>();

/** A rule's params as CEL values; params are fixed once the rules are loaded. */
const ruleParams = new WeakMap<CompiledRule, { of: Record<string, unknown>; cel: unknown }>();

/** The CEL variables of a rule's expressions for one input (valid until the next call for the same input). */
export function bindingsOf(rule: CompiledRule, input: RuleInput): Record<string, unknown> {
  let b = inputBindings.get(input);
  if (b === undefined) {
    b = new LazyBindings(input) as unknown as Record<string, unknown>;
    inputBindings.set(input, b);
  }
  let params = ruleParams.get(rule);
  if (params === undefined || params.of !== rule.params) {
    params = { of: rule.params, cel: celValue(rule.params) };
    ruleParams.set(rule, params);
  }
  b['params'] = params.cel;
  (b as unknown as LazyBindings)[RAW_PARAMS] = rule.params;
  return b;
}

const RAW_PARAMS = Symbol('raw params');
const RAW_ITEM = Symbol('raw item');

/** Not converted yet (undefined is what a missing variable reads as, so it cannot mark this). */
const UNREAD = Symbol('unread');

/**
 * The variables of an input, each converted when first read: most rules read one or two
 * of them. The names are the ones a plain bindings object had (`item` is set only while an
 * absence rule looks at a record), so an unknown name still fails the same way.
 */
class LazyBindings {
  #before: unknown = UNREAD;
  #after: unknown = UNREAD;
  #past: unknown = UNREAD;
  #changes: unknown = UNREAD;
  #site: unknown = UNREAD;
  #now: unknown = UNREAD;
  params: unknown = null;
  item: unknown = undefined;
  /**
   * `params` and `item` as plain values, for the CEL fast path (cel-fast.ts); undefined: not
   * known as such. Symbol keys: CEL reads variables by name, so these are no variables.
   */
  [RAW_PARAMS]: unknown = undefined;
  [RAW_ITEM]: unknown = undefined;
  readonly subject: string;
  readonly #input: RuleInput;
  constructor(input: RuleInput) {
    this.#input = input;
    this.subject = input.subject;
  }
  get before(): unknown {
    return this.#before === UNREAD ? (this.#before = celValue(this.#input.before ?? null)) : this.#before;
  }
  get after(): unknown {
    return this.#after === UNREAD ? (this.#after = celValue(this.#input.after ?? null)) : this.#after;
  }
  get past(): unknown {
    return this.#past === UNREAD ? (this.#past = celValue(this.#input.past ?? null)) : this.#past;
  }
  get changes(): unknown {
    return this.#changes === UNREAD ? (this.#changes = celValue(this.#input.changes)) : this.#changes;
  }
  get site(): unknown {
    return this.#site === UNREAD ? (this.#site = celValue(this.#input.site ?? null)) : this.#site;
  }
  get now(): unknown {
    return this.#now === UNREAD ? (this.#now = celTimestamp(this.#input.now)) : this.#now;
  }
  /**
   * A variable as the plain value it was converted from (the fast path reads these); undefined
   * for `now` (a timestamp) and anything else, which sends the expression to the interpreter.
   */
  [RAW](name: string): unknown {
    switch (name) {
      case 'after':
        return this.#input.after ?? null;
      case 'before':
        return this.#input.before ?? null;
      case 'past':
        return this.#input.past ?? null;
      case 'site':
        return this.#input.site ?? null;
      case 'changes':
        return this.#input.changes;
      case 'subject':
        return this.subject;
      case 'params':
        return this[RAW_PARAMS];
      case 'item':
        return this[RAW_ITEM];
      default:
        return undefined;
    }
  }
}

/** Evaluate a rule's CEL condition (`when`). Pure. */
export function check(rule: CompiledRule, input: RuleInput): Verdict {
  return verdictOf(rule.condition(bindingsOf(rule, input)));
}

function verdictOf(result: CelResult): Verdict {
  if (isCelError(result)) return { unknown: result.message };
  if (typeof result !== 'boolean') return { unknown: `condition gave ${typeof result}, not a boolean` };
  return { value: result };
}

/** What an absence rule found: the newest matching record's time and how many matched. */
export interface AbsenceView {
  /** Epoch ms of the newest matching record, or null when none matches. */
  last: number | null;
  matches: number;
  /** Why it could not be evaluated (a match or time expression failed), else null. */
  unknown: string | null;
}

/**
 * Look for the newest record an absence rule's `match` accepts (pure). A record whose
 * `time` cannot be read (null, not a timestamp) makes the whole answer unknown rather than
 * silently "absent": an unreadable reading must not fire an alert.
 */
export function findLatest(rule: CompiledRule, input: RuleInput): AbsenceView {
  let found = latestFound.get(input);
  if (found === undefined) {
    found = new Map();
    latestFound.set(input, found);
  }
  let view = found.get(rule);
  if (view === undefined) {
    view = scanLatest(rule, input);
    found.set(rule, view);
  }
  return view;
}

/** findLatest's answers: one scan per rule and input, though the verdict, the evidence and the templates all ask. */
const latestFound = new WeakMap<RuleInput, Map<CompiledRule, AbsenceView>>();

/** An input's records as CEL values, converted once for all the absence rules that scan them. */
const celItems = new WeakMap<RuleInput, readonly unknown[]>();

function scanLatest(rule: CompiledRule, input: RuleInput): AbsenceView {
  const a = rule.absence;
  if (!a) return { last: null, matches: 0, unknown: 'not an absence rule' };
  const b = bindingsOf(rule, input);
  let items: readonly unknown[] | undefined;
  /** The same records as plain values (the fast path's), when they came from the input. */
  let raw: readonly unknown[] | null = null;
  if (a.within) {
    const list = a.within(b);
    if (isCelError(list)) return { last: null, matches: 0, unknown: `absent.in: ${list.message}` };
    const arr = toArray(list);
    if (arr === null) return { last: null, matches: 0, unknown: 'absent.in: gave no list' };
    items = arr;
  } else {
    items = celItems.get(input);
    if (items === undefined) {
      items = (input.items ?? []).map(celValue);
      celItems.set(input, items);
    }
    raw = input.items ?? [];
  }
  let last: number | null = null;
  let matches = 0;
  try {
    for (let i = 0; i < items.length; i++) {
      // The shared bindings see `item` only while this record is looked at.
      b['item'] = items[i];
      (b as unknown as LazyBindings)[RAW_ITEM] = raw === null ? undefined : raw[i];
      const m = a.match(b);
      if (isCelError(m)) return { last: null, matches: 0, unknown: `absent.match: ${m.message}` };
      if (m !== true) continue;
      const t = timeOf(a.time(b));
      if (t === null) return { last: null, matches: 0, unknown: `absent.time: a matching record has no readable time (${a.timeSource})` };
      matches++;
      if (last === null || t > last) last = t;
    }
  } finally {
    b['item'] = undefined;
    (b as unknown as LazyBindings)[RAW_ITEM] = undefined;
  }
  return { last, matches, unknown: null };
}

function toArray(v: unknown): unknown[] | null {
  if (Array.isArray(v)) return v;
  if (v !== null && typeof v === 'object' && Symbol.iterator in v) return [...(v as Iterable<unknown>)];
  return null;
}

/** The outcome of an alert's condition for its state machine, with the `for` wait it uses. */
export interface Holds {
  holds: boolean | null;
  verdict: Verdict;
  expr: 'when' | 'resolve_when' | 'absent';
  /** The wait before firing: the rule's `for`, or an absence's span when nothing ever matched. */
  forMs: number;
  /** Absence rules: what was found. */
  absence?: AbsenceView;
}

/**
 * Whether an alert's condition "holds" for its state machine. With hysteresis
 * (`resolve_when`), a firing alert holds until `resolve_when` is true; otherwise it holds
 * while `when` is true. An absence rule holds while its `when` guard is true and no record
 * matched within its span; when none matched at all, the span itself is the wait, counted
 * from the first evaluation that found none. Null when something could not be evaluated.
 */
export function holds(rule: CompiledRule, input: RuleInput, firing: boolean): Holds {
  if (firing && rule.resolveWhen) {
    const verdict = verdictOf(rule.resolveWhen(bindingsOf(rule, input)));
    return { holds: 'value' in verdict ? !verdict.value : null, verdict, expr: 'resolve_when', forMs: rule.forMs };
  }
  const verdict = check(rule, input);
  if (!rule.absence) return { holds: 'value' in verdict ? verdict.value : null, verdict, expr: 'when', forMs: rule.forMs };
  if (!('value' in verdict)) return { holds: null, verdict, expr: 'when', forMs: rule.forMs };
  if (!verdict.value) return { holds: false, verdict, expr: 'when', forMs: rule.forMs };
  const found = findLatest(rule, input);
  if (found.unknown !== null) return { holds: null, verdict: { unknown: found.unknown }, expr: 'absent', forMs: rule.forMs, absence: found };
  const span = rule.absence.forMs;
  if (found.last === null) return { holds: true, verdict: { value: true }, expr: 'absent', forMs: Math.max(rule.forMs, span), absence: found };
  const absent = input.now - found.last >= span;
  return { holds: absent, verdict: { value: absent }, expr: 'absent', forMs: rule.forMs, absence: found };
}

/** The part of an alert's stored row that its state machine reads and writes. */
export interface AlertState {
  status: AlertStatus | null;
  /** Firings so far (the n-th firing and its resolution have their own ids). */
  seq: number;
  since: number;
  pending_since: number | null;
  clear_since: number | null;
  last_sent_at: number | null;
  repeats: number;
}

/** What one evaluation of an alert does: the event it sends (if any) and its new state. */
export interface AlertStep {
  emit: 'firing' | 'resolved' | 'repeat' | null;
  state: AlertState;
  /** The state must be written (an event, or a timer started or stopped). */
  changed: boolean;
}

/** The state of an alert never seen before. */
export function freshAlert(now: number): AlertState {
  return { status: null, seq: 0, since: now, pending_since: null, clear_since: null, last_sent_at: null, repeats: 0 };
}

/**
 * The alert state machine, pure. `holds` null (unknown) changes nothing. Not firing: the
 * condition must hold for `for` before it fires (a false reading in between resets the
 * wait). Firing: it must be false for `keep_firing_for` before it resolves (a true reading
 * in between resets that wait), and it is re-sent every `repeat` while it holds.
 * `gone`: the record disappeared, so the alert resolves at once.
 */
export function stepAlert(rule: CompiledRule, holdsNow: boolean | null, cur: AlertState | null, now: number, gone = false, forMs = rule.forMs): AlertStep {
  const s = cur ?? freshAlert(now);
  const same: AlertStep = { emit: null, state: s, changed: false };
  if (holdsNow === null) return same;
  if (s.status !== 'firing') {
    if (!holdsNow) return s.pending_since === null ? same : { emit: null, state: { ...s, pending_since: null }, changed: true };
    if (now - (s.pending_since ?? now) >= forMs) {
      return {
        emit: 'firing',
        state: { status: 'firing', seq: s.seq + 1, since: now, pending_since: null, clear_since: null, last_sent_at: now, repeats: 0 },
        changed: true,
      };
    }
    return s.pending_since === null ? { emit: null, state: { ...s, pending_since: now }, changed: true } : same;
  }
  if (holdsNow) {
    const next = s.clear_since === null ? s : { ...s, clear_since: null };
    if (rule.repeatMs !== null && now - (s.last_sent_at ?? s.since) >= rule.repeatMs) {
      return { emit: 'repeat', state: { ...next, last_sent_at: now, repeats: s.repeats + 1 }, changed: true };
    }
    return { emit: null, state: next, changed: next !== s };
  }
  const wait = gone ? 0 : rule.keepFiringForMs;
  if (now - (s.clear_since ?? now) >= wait) {
    return { emit: 'resolved', state: { ...s, status: 'resolved', since: now, pending_since: null, clear_since: null }, changed: true };
  }
  return s.clear_since === null ? { emit: null, state: { ...s, clear_since: now }, changed: true } : same;
}

/**
 * Whether an alert in this state needs evaluating again as time passes even if nothing
 * changes (a `for` or `keep_firing_for` wait runs, or a firing alert may repeat).
 */
export function hasTimer(rule: CompiledRule, s: AlertState | null | undefined): boolean {
  if (!s) return false;
  return s.pending_since !== null || s.clear_since !== null || (s.status === 'firing' && rule.repeatMs !== null);
}

/** The value a change rule's `dedup_key` names, as text; null without one; unknown on an error. */
export function dedupValue(rule: CompiledRule, input: RuleInput): { key: string | null } | { unknown: string } {
  if (!rule.dedupKey) return { key: null };
  // Unshared, unconverted bindings: the key is the JSON text of the result, and a list the
  // library made over plain records prints them, where one over converted records would not.
  const r = rule.dedupKey({ ...plainValues(rule, input), now: celTimestamp(input.now) });
  if (isCelError(r)) return { unknown: r.message };
  return { key: JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) };
}

/** The variables of an input as plain JSON values (for dedup keys and `seen`); `now` is left to the caller. */
export function plainValues(rule: CompiledRule, input: RuleInput): Record<string, unknown> {
  return {
    before: input.before ?? null,
    after: input.after ?? null,
    past: input.past ?? null,
    changes: input.changes,
    site: input.site ?? null,
    params: rule.params,
    subject: input.subject,
  };
}

const PATH_RE = /\b(before|after|past|site|params|subject|now)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)/g;

/** The paths each rule's expressions read (`after.disk.percent`), in order, each once; found once per rule. */
const seenPaths = new WeakMap<CompiledRule, Array<{ path: string; parts: string[] }>>();

function pathsOf(rule: CompiledRule): Array<{ path: string; parts: string[] }> {
  let paths = seenPaths.get(rule);
  if (paths !== undefined) return paths;
  paths = [];
  const names = new Set<string>();
  const exprs = [rule.when, rule.resolveWhenSource, rule.dedupKeySource, rule.absence?.withinSource ?? null].filter((e): e is string => e !== null);
  for (const expr of exprs) {
    // Strings inside the expression are not paths.
    const code = expr.replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "''");
    for (const m of code.matchAll(PATH_RE)) {
      const path = m[0];
      if (names.has(path)) continue;
      names.add(path);
      paths.push({ path, parts: path.split('.') });
    }
  }
  seenPaths.set(rule, paths);
  return paths;
}

/**
 * The values the rule's expressions read (`after.disk.percent` → 93), for `explain`.
 * Paths are taken from the expression text; each is read from the input, so the result
 * shows what the condition saw without re-running it.
 */
export function seenValues(rule: CompiledRule, input: RuleInput): Record<string, unknown> {
  const b: Record<string, unknown> = { ...plainValues(rule, input), now: new Date(input.now).toISOString() };
  const out: Record<string, unknown> = {};
  const a = rule.absence;
  if (a) {
    // What an absence rule saw: the newest matching record, not every record's fields.
    const found = findLatest(rule, input);
    out['absent.match'] = a.matchSource;
    out['absent.for'] = humanDuration(a.forMs);
    out['absent.last_match'] = found.unknown ?? (found.last === null ? null : new Date(found.last).toISOString());
    out['absent.matches'] = found.matches;
  }
  for (const { path, parts } of pathsOf(rule)) {
    let v: unknown = b;
    for (const part of parts) {
      v = v !== null && typeof v === 'object' && Object.hasOwn(v, part) ? (v as Record<string, unknown>)[part] : undefined;
    }
    out[path] = v === undefined ? '(missing)' : v;
  }
  return out;
}

/** The variables a summary or description template sees (every one of TEMPLATE_VARIABLES, no other). */
function templateScope(rule: CompiledRule, input: RuleInput, status: AlertStatus | null): Record<(typeof TEMPLATE_VARIABLES)[number], unknown> {
  return {
    event: rule.event,
    subject: input.subject,
    site_id: input.site?.id ?? null,
    domain: input.site?.domain ?? null,
    before: input.before ?? null,
    after: input.after ?? null,
    past: input.past ?? null,
    changes: input.changes,
    params: rule.params,
    labels: { ...(input.site?.labels ?? {}), ...rule.labels },
    status,
    now: new Date(input.now).toISOString(),
    absence: rule.absence ? absenceScope(rule, input) : null,
  };
}

function absenceScope(rule: CompiledRule, input: RuleInput): Record<string, unknown> {
  const found = findLatest(rule, input);
  return {
    last: found.last === null ? null : new Date(found.last).toISOString(),
    matches: found.matches,
    for: humanDuration(rule.absence!.forMs),
  };
}

/** An event's rendered texts; a template error is reported for the log, never loses the event. */
export interface RenderedTexts {
  summary: string;
  summaryError: string | null;
  /** Null without a description template, or when it failed. */
  description: string | null;
  descriptionError: string | null;
}

/**
 * Render a rule's summary and description over one scope (built once for both). A summary
 * that fails falls back to a plain `<event> on <subject>`; a description that fails is null.
 */
export function renderTexts(rule: CompiledRule, input: RuleInput, status: AlertStatus | null): RenderedTexts {
  const scope = templateScope(rule, input, status);
  const summary = render(rule.summary, scope);
  // A copy: `{% increment %}` writes into the scope it renders with.
  const description = rule.description ? render(rule.description, { ...scope }) : { text: null, error: null };
  return {
    summary: summary.text ?? `${rule.event} on ${input.subject}`,
    summaryError: summary.error,
    description: description.text,
    descriptionError: description.error,
  };
}

function render(template: CompiledRule['summary'], scope: Record<string, unknown>): { text: string | null; error: string | null } {
  try {
    return { text: liquidTemplates.render(template, scope).trim(), error: null };
  } catch (e) {
    return { text: null, error: (e as Error).message };
  }
}
