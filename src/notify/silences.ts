import { parseCel, planCel, unknownFunctionsIn, unknownVariablesIn, type CelProgram } from '../cel.js';
import { isRecord } from '../is-record.js';
import { formatDuration, isOverlongDuration, parseDuration } from '../config/duration.js';
import type { HostwatchEvent } from '../events/types.js';
import { routeBindings } from './routing.js';
import { eventMatchProblems } from './event-names.js';
import { matchValueMessage, nonBooleanMatch, nonBooleanMessage, unknownMatchValues } from './match-variables.js';
import type { Database } from '../store/schema.js';

/**
 * Silences (docs/silences.md): a CEL match and a time window. While a silence is active,
 * the events it matches are stored and shown but not delivered. Everything here is pure;
 * the table lives in store/silences-repo.ts and the check runs in Poller.addEvent.
 */

/** A silence as stored (times are epoch milliseconds): the `silences` row. */
export type Silence = Database['silences'];

/** `pending` before starts_at, `active` until ends_at, `expired` after it or once expired by hand. */
export type SilenceState = 'active' | 'pending' | 'expired';

/** A silence's state at a time. */
export function silenceState(s: Silence, now: number): SilenceState {
  if (s.expired_at !== null || s.ends_at <= now) return 'expired';
  return s.starts_at > now ? 'pending' : 'active';
}

/** A rejected silence field: which one and what is allowed. */
export interface SilenceFieldError {
  field: string;
  message: string;
}

/** Raised when a silence's match is not a usable CEL expression. */
export class SilenceMatchError extends Error {
  override readonly name = 'SilenceMatchError';
  readonly code = 'silence_invalid';
}

type Test = CelProgram;

/** What a sample event binds; used to name the variables and to check a match gives a boolean. */
const SAMPLE = routeBindings({
  specversion: '1.0',
  id: 'sample',
  source: 'hostwatch://sample',
  type: 'hostwatch.site.offline',
  subject: 'sites/1/health',
  time: new Date(0).toISOString(),
  datacontenttype: 'application/json',
  data: {
    name: 'site.offline',
    severity: 'critical',
    status: 'firing',
    summary: 'example.com is offline',
    site_id: 1,
    domain: 'example.com',
    changes: [],
    rule: 'site-offline',
    observed_at: new Date(0).toISOString(),
  },
});

/** The variables a silence's match can use (the same as a route's match). */
export const SILENCE_VARIABLES: readonly string[] = Object.keys(SAMPLE);

/**
 * Compile a silence match. Throws SilenceMatchError with the CEL error for a syntax error,
 * for a variable events do not have (a typo would otherwise silence nothing, silently), and
 * for an expression that is not true/false for an event.
 */
export function compileSilenceMatch(match: string): Test {
  let parsed: ReturnType<typeof parseCel>;
  let test: Test;
  try {
    parsed = parseCel(match);
    test = planCel(parsed);
  } catch (e) {
    throw new SilenceMatchError(`CEL error: ${(e as Error).message}`);
  }
  const functions = unknownFunctionsIn(parsed.expr);
  if (functions.length > 0) {
    throw new SilenceMatchError(functions.map((f) => `CEL error: unknown function "${f.name}"${f.near ? ` (did you mean ${f.near}?)` : ''}`).join('; '));
  }
  const unknown = unknownVariablesIn(parsed.expr, SILENCE_VARIABLES);
  if (unknown.length > 0) {
    throw new SilenceMatchError(
      `CEL error: unknown variable ${unknown.map((n) => `"${n}"`).join(', ')}; a match can use ${SILENCE_VARIABLES.join(', ')}`,
    );
  }
  const gives = nonBooleanMatch(match);
  if (gives !== null) throw new SilenceMatchError(nonBooleanMessage(gives));
  return test;
}

/**
 * Finds the silence that holds an event back. Each silence's CEL is compiled once and
 * cached by id (a silence's match never changes after it is created).
 */
export class SilenceMatcher {
  private readonly compiled = new Map<string, Test | null>();

  /** The first of `active` whose match is true for the event; null when none is. */
  first(event: HostwatchEvent, active: readonly Silence[]): Silence | null {
    if (active.length === 0) return null;
    // Forget silences that ended, so the cache stays as small as the active set.
    if (this.compiled.size > active.length * 2 + 32) {
      const keep = new Set(active.map((s) => s.id));
      for (const id of this.compiled.keys()) if (!keep.has(id)) this.compiled.delete(id);
    }
    const bindings = routeBindings(event);
    for (const s of active) {
      const test = this.testFor(s);
      // An error (a missing label, say) is no match, as in routing.
      if (test && test(bindings) === true) return s;
    }
    return null;
  }

  private testFor(s: Silence): Test | null {
    let test = this.compiled.get(s.id);
    if (test === undefined) {
      try {
        test = compileSilenceMatch(s.match);
      } catch {
        // Only valid matches are stored; one that is not (an edited database) silences nothing.
        test = null;
      }
      this.compiled.set(s.id, test);
    }
    return test;
  }
}

/**
 * Alertmanager's matcher syntax (`amtool silence add alertname="x" site_id=12`, or
 * `{name="x", severity!="info"}`) as the CEL it means; null when the text is not a list of
 * such matchers. Operators: `=`, `!=`, `=~` and `!~` (regexes anchored at both ends, as in
 * Alertmanager). `alertname` is the event name; a field events do not have is a label.
 */
export function amtoolToCel(text: string): string | null {
  let body = text.trim();
  if (body.startsWith('{') && body.endsWith('}')) body = body.slice(1, -1).trim();
  // A bare value never starts with an operator's character: `site_id == ` is CEL cut short,
  // not the matcher site_id = "=".
  const MATCHER = /\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,"'=!~][^\s,"']*)\s*(?:,|\s|$)/y;
  const parts: string[] = [];
  let at = 0;
  while (at < body.length) {
    MATCHER.lastIndex = at;
    const m = MATCHER.exec(body);
    if (!m || m[0].length === 0) return null;
    at = MATCHER.lastIndex;
    const [, field, op, raw] = m as unknown as [string, string, string, string];
    const value = /^["']/.test(raw) ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
    const name = field === 'alertname' ? 'name' : field;
    const ref = SILENCE_VARIABLES.includes(name) && name !== 'labels' ? name : `labels[${JSON.stringify(field)}]`;
    const numeric = name === 'site_id' && /^\d+$/.test(value);
    if (op === '=~' || op === '!~') {
      const test = `${numeric || name === 'site_id' ? `string(${ref})` : ref}.matches(${JSON.stringify(`^(?:${value})$`)})`;
      parts.push(op === '=~' ? test : `!${test}`);
    } else {
      parts.push(`${ref} ${op === '!=' ? '!=' : '=='} ${numeric ? value : JSON.stringify(value)}`);
    }
  }
  return parts.length > 0 ? parts.join(' && ') : null;
}

const REQUEST_FIELDS = ['match', 'duration', 'ends_at', 'starts_at', 'comment', 'created_by'];
const MAX_TEXT = 2000;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * Check a silence request (the API body, or the CLI's `--match --for --comment` mapped to
 * match, duration, comment) and turn it into a silence without an id. Fields: `match`,
 * `duration` (`2h`) or `ends_at` (ISO), optional `starts_at` (ISO, default now), `comment`,
 * optional `created_by`. Pure: `now` is the creation time. Every problem is reported at
 * once, each naming its field and what is allowed. A silence lasts at most `maxDurationMs`
 * (config `silences.max_duration`): a forgotten one, or one a hostile page managed to
 * create, ends on its own.
 */
export function parseSilenceRequest(
  body: unknown,
  now: number,
  defaults: {
    createdBy: string;
    maxDurationMs: number;
    /** The names of the events that can exist (knownEventNames): a match's `name` and `type` are checked against them. */
    eventNames?: readonly string[];
  },
): { ok: true; silence: Omit<Silence, 'id'>; translated?: { from: string; to: string } } | { ok: false; errors: SilenceFieldError[] } {
  if (!isRecord(body)) {
    return { ok: false, errors: [{ field: 'body', message: 'expected a JSON object with match, duration (or ends_at) and comment' }] };
  }
  const req = body;
  const errors: SilenceFieldError[] = [];
  const bad = (field: string, message: string): void => void errors.push({ field, message });
  for (const key of Object.keys(req)) {
    if (!REQUEST_FIELDS.includes(key)) bad(key, `unknown field; allowed: ${REQUEST_FIELDS.join(', ')}`);
  }

  let match = text(req['match']);
  let translated: { from: string; to: string } | undefined;
  if (match === null) {
    const given = req['match'] !== undefined && req['match'] !== null && !(typeof req['match'] === 'string' && req['match'].trim() === '');
    bad('match', `${given ? 'must be a string' : 'required'}: a CEL expression over ${SILENCE_VARIABLES.join(', ')} (like "site_id == 12")`);
  }
  else if (match.length > MAX_TEXT) bad('match', `at most ${MAX_TEXT} characters`);
  else {
    try {
      compileSilenceMatch(match);
    } catch (e) {
      // An amtool user types name="x", which is no CEL at all: take the CEL it means (and
      // say so). Text that parses as CEL keeps its own error (a misspelt variable, say).
      const cel = parses(match) ? null : amtoolToCel(match);
      if (cel !== null && compiles(cel)) {
        translated = { from: match, to: cel };
        match = cel;
      } else bad('match', (e as Error).message);
    }
    // A severity or status no event has (`severity == 'critcal'`), or the name of an event no
    // rule sends (`name == 'site.ofline'`): a silence of nothing, as a route's match would be
    // (config checks those the same way).
    if (!errors.some((x) => x.field === 'match')) {
      for (const u of unknownMatchValues(match)) bad('match', matchValueMessage(u));
      if (defaults.eventNames) for (const m of eventMatchProblems(match, defaults.eventNames)) bad('match', m);
    }
  }

  const comment = text(req['comment']);
  if (comment === null) bad('comment', 'required: a non-empty text saying why (who is working on what)');
  else if (comment.length > MAX_TEXT) bad('comment', `at most ${MAX_TEXT} characters`);

  let createdBy = defaults.createdBy;
  if (req['created_by'] !== undefined) {
    const who = text(req['created_by']);
    if (who === null || who.length > 200) bad('created_by', 'a non-empty text of at most 200 characters (a name or an e-mail address)');
    else createdBy = who;
  }

  let startsAt = now;
  if (req['starts_at'] !== undefined) {
    const t = isoTime(req['starts_at']);
    if (t === null) bad('starts_at', `an ISO 8601 time with a zone, like 2026-11-21T14:00:00Z (got ${show(req['starts_at'])})`);
    else startsAt = t;
  }

  let endsAt: number | null = null;
  const hasDuration = req['duration'] !== undefined;
  const hasEnd = req['ends_at'] !== undefined;
  if (hasDuration && hasEnd) bad('duration', 'give either duration or ends_at, not both');
  else if (!hasDuration && !hasEnd) bad('duration', 'required (or ends_at): how long the silence lasts, like 30m, 2h or 1d');
  else if (hasDuration) {
    const ms = typeof req['duration'] === 'string' ? parseDuration(req['duration']) : null;
    // Written as a duration but more ms than a number holds: too long, as any over the maximum.
    const huge = typeof req['duration'] === 'string' && isOverlongDuration(req['duration']);
    if (huge) bad('duration', `a silence lasts at most ${formatDuration(defaults.maxDurationMs)} (silences.max_duration; got ${show(req['duration'])})`);
    else if (ms === null || ms <= 0) bad('duration', `a positive duration like 30m, 2h or 1d12h (got ${show(req['duration'])})`);
    else endsAt = startsAt + ms;
  } else {
    const t = isoTime(req['ends_at']);
    if (t === null) bad('ends_at', `an ISO 8601 time with a zone, like 2026-11-21T16:00:00Z (got ${show(req['ends_at'])})`);
    else if (t <= startsAt) bad('ends_at', `must be after starts_at (${new Date(startsAt).toISOString()})`);
    else endsAt = t;
  }
  if (endsAt !== null && endsAt <= now) bad(hasDuration ? 'duration' : 'ends_at', 'the silence would already be over; it must end in the future');
  else if (endsAt !== null && endsAt - startsAt > defaults.maxDurationMs) {
    bad(
      hasDuration ? 'duration' : 'ends_at',
      `a silence lasts at most ${formatDuration(defaults.maxDurationMs)} (silences.max_duration; got ${formatDuration(endsAt - startsAt)}); for planned quiet periods use maintenance windows in the config`,
    );
  }

  if (errors.length > 0 || match === null || comment === null || endsAt === null) return { ok: false, errors };
  return {
    ok: true,
    silence: { match, starts_at: startsAt, ends_at: endsAt, comment, created_by: createdBy, created_at: now, expired_at: null },
    ...(translated ? { translated } : {}),
  };
}

const parses = (match: string): boolean => succeeds(() => parseCel(match));
const compiles = (match: string): boolean => succeeds(() => compileSilenceMatch(match));

function succeeds(fn: () => unknown): boolean {
  try {
    fn();
    return true;
  } catch {
    return false;
  }
}

/** A silence as the API shows it: ISO times and its state now. */
export interface SilenceView {
  id: string;
  state: SilenceState;
  match: string;
  starts_at: string;
  ends_at: string;
  comment: string;
  created_by: string;
  created_at: string;
  expired_at: string | null;
  /** How many events it has held back so far. */
  suppressed: number;
}

/** The API view of a silence. */
export function silenceView(s: Silence, now: number, suppressed: number): SilenceView {
  return {
    id: s.id,
    state: silenceState(s, now),
    match: s.match,
    starts_at: iso(s.starts_at),
    ends_at: iso(s.ends_at),
    comment: s.comment,
    created_by: s.created_by,
    created_at: iso(s.created_at),
    expired_at: s.expired_at === null ? null : iso(s.expired_at),
    suppressed,
  };
}

const STATE_ORDER: Record<SilenceState, number> = { active: 0, pending: 1, expired: 2 };

/**
 * List order: active first (soonest to end first), then pending (soonest to start), then
 * expired (most recently ended first).
 */
export function sortSilences(list: readonly Silence[], now: number): Silence[] {
  const ended = (s: Silence): number => s.expired_at ?? s.ends_at;
  return [...list].sort((a, b) => {
    const sa = silenceState(a, now);
    const sb = silenceState(b, now);
    if (sa !== sb) return STATE_ORDER[sa] - STATE_ORDER[sb];
    if (sa === 'active') return a.ends_at - b.ends_at || a.id.localeCompare(b.id);
    if (sa === 'pending') return a.starts_at - b.starts_at || a.id.localeCompare(b.id);
    return ended(b) - ended(a) || a.id.localeCompare(b.id);
  });
}

function text(v: unknown): string | null {
  return typeof v === 'string' && v.trim() !== '' ? v.trim() : null;
}

function isoTime(v: unknown): number | null {
  if (typeof v !== 'string' || !ISO_TIME.test(v)) return null;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

function show(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
