import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Liquid } from 'liquidjs';
import { closest, unknownKeyMessage } from '../closest.js';
import { isMap, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import { freeIdentifiers, parseApiTime, parseCel, parseCelDuration, planCel, unknownFunctionsIn, unknownVariablesIn } from '../cel.js';
import { humanDuration, parseDuration } from '../config/duration.js';
import { isRecord } from '../is-record.js';
import type { Config } from '../config/types.js';
import { packageRoot } from '../paths.js';
import { SOURCE_NAMES } from '../sources/registry.js';
import { templateRenderer } from './fast-template.js';
import type { Absence, CompiledRule, RuleError } from './types.js';

const SEVERITIES = ['info', 'warning', 'critical'] as const;
const KINDS = ['change', 'alert'] as const;
const MODES = ['live', 'shadow'] as const;
const RULE_KEYS = [
  'name', 'event', 'kind', 'source', 'severity', 'when', 'summary', 'params', 'enabled', 'description',
  'mode', 'labels', 'for', 'keep_firing_for', 'repeat', 'resolve_when', 'dedup_key', 'window', 'every', 'absent',
];
const OVERRIDE_KEYS = ['name', 'params', 'enabled', 'mode', 'labels', 'for', 'keep_firing_for', 'repeat', 'every'];
const ABSENT_KEYS = ['match', 'time', 'for', 'in'];
/** Clock rules are evaluated again at most this often unless they say `every:`. */
export const DEFAULT_EVERY_MS = 60_000;
/** Keys that only mean something for one kind of rule. */
const KIND_ONLY: Record<string, (typeof KINDS)[number]> = {
  for: 'alert',
  keep_firing_for: 'alert',
  repeat: 'alert',
  resolve_when: 'alert',
  dedup_key: 'change',
  every: 'alert',
  absent: 'alert',
};

/** Raised when any rule file has an error; carries every error found, not just the first. */
export class RuleErrors extends Error {
  override readonly name = 'RuleErrors';
  readonly code = 'rules_invalid';
  readonly errors: RuleError[];
  constructor(errors: RuleError[]) {
    // In file order (files as first named, lines ascending), as config errors are.
    const order = new Map<string, number>();
    for (const e of errors) if (!order.has(e.file)) order.set(e.file, order.size);
    const sorted = [...errors].sort((a, b) => order.get(a.file)! - order.get(b.file)! || (a.line ?? 0) - (b.line ?? 0));
    super(sorted.map(formatRuleError).join('\n'));
    this.errors = sorted;
  }
}

/** `file:line: path: message`, the same shape as config errors. */
export function formatRuleError(e: RuleError): string {
  return `${e.file}${e.line ? `:${e.line}` : ''}: ${e.path}: ${e.message}`;
}

/**
 * The template engine for summaries: strict (an unknown variable or filter is an error,
 * not an empty string), own properties only, and bounded so a template cannot run away.
 */
export const liquid = new Liquid({
  strictVariables: true,
  strictFilters: true,
  ownPropertyOnly: true,
  parseLimit: 10_000,
  // Wall-clock ms per render: on a loaded machine (the process not scheduled for a while)
  // 100 ms was passed now and then by an ordinary summary, which then went out as the
  // fallback text. memoryLimit already bounds what a loop can build.
  renderLimit: 1_000,
  memoryLimit: 1_000_000,
});

/**
 * The variables a summary or description template sees (evaluate.ts builds exactly these,
 * typed by this list). `check` refuses a template naming anything else: with strict
 * variables, a typo like `{{ domian }}` would otherwise fail at every render and the
 * event would carry a fallback summary.
 */
export const TEMPLATE_VARIABLES = ['event', 'subject', 'site_id', 'domain', 'before', 'after', 'past', 'changes', 'params', 'labels', 'status', 'now', 'absence'] as const;

/**
 * Time filters for summaries of clock rules: `{{ after.last_ok | age: now }}` gives "26 h 5 min"
 * (how long ago), `{{ after.paid_until | days_until: now }}` the whole days left (negative
 * when past). Both take API dates and RFC 3339 times; anything else is shown as it is.
 */
function ageFilter(value: unknown, now: unknown): unknown {
  const t = typeof value === 'string' ? parseApiTime(value) : null;
  const n = typeof now === 'string' ? parseApiTime(now) : null;
  if (t === null || n === null) return value;
  return humanDuration(n - t);
}
function daysUntilFilter(value: unknown, now: unknown): unknown {
  const t = typeof value === 'string' ? parseApiTime(value) : null;
  const n = typeof now === 'string' ? parseApiTime(now) : null;
  if (t === null || n === null) return value;
  return Math.floor((t - n) / 86_400_000);
}
liquid.registerFilter('age', ageFilter);
liquid.registerFilter('days_until', daysUntilFilter);

/**
 * Render a template of this engine (a rule's summary or description, a channel's template):
 * `String(liquid.renderSync(template, scope))`, the same text or the same error, through
 * the compiled fast path when the template is within it (fast-template.ts). Both time
 * filters read only their arguments, so the fast path may call them itself.
 */
export const liquidTemplates = templateRenderer(liquid, [ageFilter, daysUntilFilter]);

/** What the loader needs from the rest of the program. */
export interface LoadRulesOptions {
  /** Source names that exist (`source:` must name one). */
  sourceNames: readonly string[];
  /** Paths are shown relative to this folder in messages. */
  cwd?: string;
  /** The config file that lists the user's paths: a missing one is named as its `rules[i]`. */
  configFile?: string;
  /** The key of that list in `configFile` (default `rules`; a rule test file's is `rule_files`). */
  listKey?: string;
}

/** Load the built-in rule packs and the user's rule paths for a config. */
export function rulesFor(config: Config): CompiledRule[] {
  return loadRules(join(packageRoot(), 'rules'), config.rules, { sourceNames: SOURCE_NAMES, cwd: process.cwd(), configFile: config.file });
}

/**
 * Load the built-in packs and then the user's paths (files or folders of .yaml/.yml).
 * A user entry with the name of an existing rule and only `params` / `enabled` overrides
 * that rule; a full definition with an existing name is a duplicate and an error.
 * Throws RuleErrors with every problem in every file.
 */
export function loadRules(builtinDir: string, userPaths: readonly string[], opts: LoadRulesOptions): CompiledRule[] {
  const errors: RuleError[] = [];
  const rules = new Map<string, CompiledRule>();
  // A user path that is the built-in folder itself (config.example.yaml's ./rules, run from
  // the repository) must not load every built-in rule twice.
  const builtinReal = realOrSelf(builtinDir);
  const files = listRuleFiles(builtinDir, errors, opts);
  userPaths.forEach((p, i) => {
    if (realOrSelf(p) !== builtinReal) files.push(...listRuleFiles(p, errors, opts, i));
  });
  for (const file of files) {
    const shown = opts.cwd ? relative(opts.cwd, file) || file : file;
    parseRuleFile(readFileSync(file, 'utf8'), shown, opts, rules, errors);
  }
  if (errors.length) throw new RuleErrors(errors);
  return [...rules.values()];
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** `index`: where the config's `rules` list names `path` (for a message that names it). */
function listRuleFiles(path: string, errors: RuleError[], opts: LoadRulesOptions, index?: number): string[] {
  let st;
  try {
    st = statSync(path);
  } catch {
    const shown = opts.cwd ? relative(opts.cwd, path) : path;
    if (opts.configFile !== undefined && index !== undefined) {
      errors.push({ file: opts.cwd ? relative(opts.cwd, opts.configFile) || opts.configFile : opts.configFile, line: null, path: `${opts.listKey ?? 'rules'}[${index}]`, message: `${shown}: no such file or folder` });
    } else errors.push({ file: shown, line: null, path: 'rules', message: 'no such file or folder' });
    return [];
  }
  if (!st.isDirectory()) return [path];
  return readdirSync(path)
    .filter((f) => /\.ya?ml$/.test(f) && !f.endsWith('.test.yaml'))
    .sort()
    .map((f) => join(path, f));
}

/**
 * Parse one rule file's text into `into`, appending problems to `errors`.
 * Exported for tests and for `hostwatch check`.
 */
export function parseRuleFile(
  text: string,
  file: string,
  opts: LoadRulesOptions,
  into: Map<string, CompiledRule>,
  errors: RuleError[],
): void {
  const lc = new LineCounter();
  // `<<: *base` merge keys let a file share one definition among rules that differ only in
  // name and source (the subscription rules of every paid tool).
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, merge: true });
  for (const e of doc.errors) {
    errors.push({ file, line: lc.linePos(e.pos[0]).line, path: '(yaml)', message: e.message.split('\n')[0] ?? e.message });
  }
  if (doc.errors.length) return;
  const root: unknown = doc.toJS();
  const at = (path: (string | number)[]): number | null => lineAt(doc, lc, path);
  const err = (path: (string | number)[], message: string): void => {
    errors.push({ file, line: at(path), path: pathText(path), message });
  };
  if (!isRecord(root) || !Array.isArray(root['rules'])) {
    err([], 'a rule file is a map with a "rules" list');
    return;
  }
  for (const key of Object.keys(root)) if (key !== 'rules') err([key], 'unknown key; allowed: rules');

  root['rules'].forEach((raw: unknown, i: number) => {
    const p = (k?: string): (string | number)[] => (k === undefined ? ['rules', i] : ['rules', i, k]);
    if (!isRecord(raw)) return err(p(), 'each rule is a map');
    const name = raw['name'];
    const named = typeof name === 'string' && /^[a-z0-9][a-z0-9-]*$/.test(name);
    const keys = Object.keys(raw);
    if (!named) {
      err(p('name'), `must be lower-case letters, digits and dashes (got ${JSON.stringify(name ?? null)})`);
      // A new rule's other keys are still checked (every error at once); an override's need its rule.
      if (keys.every((k) => OVERRIDE_KEYS.includes(k))) return;
    }
    const existing = named ? into.get(name) : undefined;
    if (existing && keys.every((k) => OVERRIDE_KEYS.includes(k))) {
      applyOverride(existing, raw, p, err);
      return;
    }
    if (existing) {
      // A whole rule under a taken name is a duplicate; a few keys under it are an override
      // that tries to change what an override cannot.
      const whole = ['event', 'kind', 'source'].every((k) => k in raw) && ('when' in raw || 'absent' in raw);
      if (whole) return err(p('name'), `duplicate rule name; "${name}" is already defined at ${existing.origin}`);
      const may = OVERRIDE_KEYS.filter((o) => o !== 'name');
      for (const k of keys.filter((k) => !OVERRIDE_KEYS.includes(k))) {
        // A rule's key that overrides cannot change, or no rule key at all (a typo of one it can).
        const message = RULE_KEYS.includes(k)
          ? `an override of ${name} (defined at ${existing.origin}) cannot change ${k}; it may set ${may.join(', ')}. For another ${k}, write a rule of your own under a new name and switch this one off (enabled: false)`
          : unknownKeyMessage(k, may, `key of an override of ${name}`);
        err(p(k), message);
      }
      return;
    }
    // Only what changes a rule (enabled, params, …) under a name no rule has: a misspelt
    // override, not a new rule without its event, kind, source and when.
    if (named && keys.every((k) => OVERRIDE_KEYS.includes(k))) {
      const near = closest(name, [...into.keys()]);
      return err(p('name'), `no rule is named ${name}${near ? ` (did you mean ${near}?)` : ''}: an entry with only ${keys.filter((k) => k !== 'name').join(', ') || 'a name'} changes an existing rule; a new rule needs event, kind, source and when`);
    }
    for (const k of keys) if (!RULE_KEYS.includes(k)) err(p(k), unknownKeyMessage(k, RULE_KEYS));

    const event = raw['event'];
    const kind = raw['kind'];
    const source = raw['source'];
    const severity = raw['severity'] ?? 'warning';
    const when = raw['when'];
    const summary = raw['summary'] ?? `{{ event }} on {{ subject }}`;
    let ok = true;
    const bad = (k: string, m: string): void => {
      ok = false;
      const [head, ...rest] = k.split('.');
      err([...p(head), ...rest], m);
    };
    if (typeof event !== 'string' || !/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/.test(event)) {
      bad('event', `must be a dotted lower-case event name like site.offline (got ${JSON.stringify(event ?? null)})`);
    }
    if (!KINDS.includes(kind as never)) bad('kind', `must be one of ${KINDS.join(', ')} (got ${JSON.stringify(kind ?? null)})`);
    if (typeof source !== 'string' || !opts.sourceNames.includes(source)) {
      bad('source', `must be one of ${opts.sourceNames.join(', ')} (got ${JSON.stringify(source ?? null)})`);
    }
    if (!SEVERITIES.includes(severity as never)) {
      bad('severity', `must be one of ${SEVERITIES.join(', ')} (got ${JSON.stringify(severity)})`);
    }
    const params = raw['params'] ?? {};
    if (!isRecord(params)) bad('params', 'must be a map of parameter names to values');
    const enabled = raw['enabled'] ?? true;
    if (typeof enabled !== 'boolean') bad('enabled', 'must be true or false');
    const absentRaw = raw['absent'];
    // An absence rule's `when` is an optional guard (say, "hourly backups are active").
    const whenText = when === undefined && absentRaw !== undefined ? 'true' : when;
    if (typeof whenText !== 'string' || whenText.trim() === '') bad('when', 'must be a CEL expression (a non-empty string)');
    const condition = typeof whenText === 'string' && whenText.trim() !== '' ? celOf('when', whenText, bad) : null;
    const absence = absentRaw === undefined ? null : absenceOf(absentRaw, bad);
    const tpl = templateOf('summary', summary, bad);
    const description = raw['description'] === undefined ? null : templateOf('description', raw['description'], bad);
    const mode = raw['mode'] ?? 'live';
    if (!MODES.includes(mode as never)) bad('mode', `must be one of ${MODES.join(', ')} (got ${JSON.stringify(mode)})`);
    const labels = labelsOf(raw['labels'], (path, m) => bad(path, m));
    for (const [k, only] of Object.entries(KIND_ONLY)) {
      if (k in raw && KINDS.includes(kind as never) && kind !== only) bad(k, `only for kind: ${only} rules`);
    }
    const dur = (k: string): number | null => durationOf(k, raw[k], bad);
    const forMs = dur('for') ?? 0;
    const keepFiringForMs = dur('keep_firing_for') ?? 0;
    const repeatMs = dur('repeat');
    const windowMs = dur('window');
    const everyMs = dur('every');
    if (repeatMs === 0) bad('repeat', 'must be longer than 0 (leave it out to never repeat)');
    if (windowMs === 0) bad('window', 'must be longer than 0');
    if (everyMs !== null && everyMs < DEFAULT_EVERY_MS) bad('every', `must be at least 1m (got ${JSON.stringify(raw['every'])})`);
    const resolveWhen = optionalCel('resolve_when', raw['resolve_when'], bad);
    const dedupKey = optionalCel('dedup_key', raw['dedup_key'], bad);
    if (isRecord(params)) {
      const absent = isRecord(absentRaw) ? absentRaw : {};
      unknownParams(
        [['when', whenText], ['resolve_when', raw['resolve_when']], ['dedup_key', raw['dedup_key']], ['summary', summary], ['description', raw['description']], ['absent', absent['match']], ['absent', absent['time']], ['absent', absent['in']]],
        params,
        bad,
      );
      badDurationParams([whenText, raw['resolve_when'], raw['dedup_key'], absent['match'], absent['time'], absent['in']], params, bad);
    }
    const clock = absentRaw !== undefined || readsClock([whenText, raw['resolve_when']]);
    if (everyMs !== null && !clock && kind === 'alert') {
      bad('every', 'only for rules that read the clock (now) or absence rules: other alerts are evaluated at each poll');
    }
    if (!named || !ok || !condition || !tpl || (raw['description'] !== undefined && !description) || (absentRaw !== undefined && !absence)) return;
    into.set(name, {
      name,
      event: event as string,
      kind: kind as CompiledRule['kind'],
      source: source as string,
      severity: severity as CompiledRule['severity'],
      when: whenText as string,
      condition,
      summarySource: summary as string,
      summary: tpl,
      params: { ...(params as Record<string, unknown>) },
      enabled: enabled as boolean,
      mode: mode as CompiledRule['mode'],
      labels,
      description,
      descriptionSource: description ? (raw['description'] as string) : null,
      forMs,
      keepFiringForMs,
      repeatMs,
      resolveWhen: resolveWhen?.program ?? null,
      resolveWhenSource: resolveWhen?.source ?? null,
      dedupKey: dedupKey?.program ?? null,
      dedupKeySource: dedupKey?.source ?? null,
      windowMs,
      clock,
      everyMs: everyMs ?? DEFAULT_EVERY_MS,
      absence,
      origin: `${file}:${at(p()) ?? '?'}`,
    });
  });
}

type Bad = (key: string, message: string) => void;

/**
 * `params.NAME` in an expression or a template of a rule that has no such parameter: it
 * reads nothing, so a condition with it is never true (a misspelt `params.treshold`, say,
 * and the rule never fires). Said at the key that reads it, with the rule's parameters.
 */
function unknownParams(texts: ReadonlyArray<readonly [string, unknown]>, params: Record<string, unknown>, bad: Bad): void {
  const said = new Set<string>();
  for (const [key, text] of texts) {
    if (typeof text !== 'string') continue;
    for (const m of text.matchAll(/\bparams\.([A-Za-z_][A-Za-z0-9_]*)/g)) {
      const name = m[1]!;
      if (name in params || said.has(`${key}\u0000${name}`)) continue;
      said.add(`${key}\u0000${name}`);
      bad(key, `params.${name}: ${unknownKeyMessage(name, Object.keys(params), 'parameter')}`);
    }
  }
}

/** The variables a rule's expressions see (docs/rules.md, "What an expression sees"); `item` only where WITH_ITEM. */
export const RULE_VARIABLES: readonly string[] = ['before', 'after', 'past', 'changes', 'site', 'now', 'params', 'subject'];
const WITH_ITEM: readonly string[] = [...RULE_VARIABLES, 'item'];

/**
 * Compile one of a rule's expressions. A syntax error, a variable the rule does not have
 * (`aftr`, `item` outside an absence's match and time) or a function CEL does not have
 * (`startswith`) is said at its key: planned as it is, it would fail at every evaluation
 * and the rule would never fire, with only a log line each poll.
 */
function celOf(key: string, expr: string, bad: Bad, withItem = false): CompiledRule['condition'] | null {
  let parsed: ReturnType<typeof parseCel>;
  try {
    parsed = parseCel(expr);
  } catch (e) {
    bad(key, `CEL error: ${(e as Error).message}`);
    return null;
  }
  const known = withItem ? WITH_ITEM : RULE_VARIABLES;
  const unknown = unknownVariablesIn(parsed.expr, known);
  const functions = unknownFunctionsIn(parsed.expr);
  if (unknown.length > 0) {
    const near = unknown.map((n) => closest(n, known)).find((n) => n !== null);
    const itemHere = !withItem && unknown.includes('item') ? ' (item only in absent.match and absent.time)' : '';
    bad(key, `uses unknown variable ${unknown.map((n) => `"${n}"`).join(', ')}${near ? ` (did you mean ${near}?)` : ''}; ${withItem ? 'it' : "a rule's expressions"} can use ${known.join(', ')}${itemHere}`);
  }
  for (const f of functions) bad(key, `calls unknown function "${f.name}"${f.near ? ` (did you mean ${f.near}?)` : ''}`);
  if (unknown.length > 0 || functions.length > 0) return null;
  try {
    return planCel(parsed);
  } catch (e) {
    bad(key, `CEL error: ${(e as Error).message}`);
    return null;
  }
}

function optionalCel(key: string, value: unknown, bad: Bad, withItem = false): { program: CompiledRule['condition']; source: string } | null {
  if (value === undefined) return null;
  if (typeof value !== 'string' || value.trim() === '') {
    bad(key, 'must be a CEL expression (a non-empty string)');
    return null;
  }
  const program = celOf(key, value, bad, withItem);
  return program ? { program, source: value } : null;
}

/** A text CEL's duration() reads (30s, 90m, 26h, 14d). */
function isCelDuration(v: unknown): boolean {
  if (typeof v !== 'string') return false;
  try {
    parseCelDuration(v);
    return true;
  } catch {
    return false;
  }
}

/**
 * A parameter an expression reads with `duration(params.x)` whose value is no duration
 * (`after: 5x`): every evaluation would fail, and the rule never fire. Said at `params.x`.
 */
function badDurationParams(texts: readonly unknown[], params: Record<string, unknown>, bad: Bad): void {
  const said = new Set<string>();
  for (const text of texts) {
    if (typeof text !== 'string') continue;
    for (const m of text.matchAll(/\bduration\(\s*params\.([A-Za-z_][A-Za-z0-9_]*)\s*\)/g)) {
      const name = m[1]!;
      if (!(name in params) || said.has(name) || isCelDuration(params[name])) continue;
      said.add(name);
      bad(`params.${name}`, `must be a duration like 30s, 90m, 26h or 14d, as duration(params.${name}) reads it (got ${JSON.stringify(params[name])})`);
    }
  }
}

/** True when any of the expressions reads `now` (a syntax error is reported elsewhere). */
function readsClock(exprs: unknown[]): boolean {
  return exprs.some((e) => {
    if (typeof e !== 'string') return false;
    try {
      return freeIdentifiers(parseCel(e).expr).has('now');
    } catch {
      return false;
    }
  });
}

/** `absent: { match, time, for, in }`: every key checked, every problem reported. */
function absenceOf(value: unknown, bad: Bad): Absence | null {
  if (!isRecord(value)) {
    bad('absent', 'must be a map like { match: "item.state == \'Ok\'", time: "item.created_at", for: 26h }');
    return null;
  }
  let ok = true;
  const fail = (key: string, message: string): void => {
    ok = false;
    bad(`absent.${key}`, message);
  };
  for (const k of Object.keys(value)) if (!ABSENT_KEYS.includes(k)) fail(k, unknownKeyMessage(k, ABSENT_KEYS));
  const cel = (key: string, required: boolean): { program: CompiledRule['condition']; source: string } | null => {
    const v = value[key];
    if (v === undefined) {
      if (required) fail(key, `is required: a CEL expression over each record (item)`);
      return null;
    }
    return optionalCel(`absent.${key}`, v, (k, m) => fail(k.slice('absent.'.length), m), key === 'match' || key === 'time');
  };
  const match = cel('match', true);
  const time = cel('time', true);
  const within = cel('in', false);
  let forMs: number | null = null;
  if (value['for'] === undefined) fail('for', 'is required: how long without a matching record, like 26h');
  else {
    forMs = durationOf('absent.for', value['for'], (k, m) => fail('for', m));
    if (forMs === 0) fail('for', 'must be longer than 0');
  }
  if (!ok || !match || !time || forMs === null) return null;
  return {
    match: match.program,
    matchSource: match.source,
    time: time.program,
    timeSource: time.source,
    forMs,
    within: within?.program ?? null,
    withinSource: within?.source ?? null,
  };
}

/**
 * Parsed templates by their text, with the variables they read. A template is not changed
 * by rendering, so one parse serves every load of the same rules (as parseCel's cache does
 * for the rules' expressions).
 */
const parsedTemplates = new Map<string, { template: CompiledRule['summary']; variables: string[] }>();
const CACHED_TEMPLATES = 5_000;

function templateOf(key: string, value: unknown, bad: Bad): CompiledRule['summary'] | null {
  if (typeof value !== 'string') {
    bad(key, 'must be a template string');
    return null;
  }
  let parsed = parsedTemplates.get(value);
  if (parsed === undefined) {
    let template: CompiledRule['summary'];
    try {
      template = liquid.parse(value);
    } catch (e) {
      bad(key, `template error: ${(e as Error).message}`);
      return null;
    }
    parsed = { template, variables: [...new Set(liquid.globalVariableSegmentsSync(template).map((segments) => String(segments[0])))] };
    if (parsedTemplates.size >= CACHED_TEMPLATES) parsedTemplates.clear();
    parsedTemplates.set(value, parsed);
  }
  const { template } = parsed;
  const known: readonly string[] = TEMPLATE_VARIABLES;
  const unknown = parsed.variables.filter((v) => !known.includes(v));
  for (const name of unknown) {
    const near = closest(name, known);
    bad(key, `unknown template variable "${name}"${near ? ` (did you mean ${near}?)` : ''}; a template sees ${known.join(', ')}`);
  }
  return unknown.length === 0 ? template : null;
}

function durationOf(key: string, value: unknown, bad: Bad): number | null {
  if (value === undefined) return null;
  const ms = typeof value === 'string' ? parseDuration(value) : null;
  if (ms === null) bad(key, `must be a duration like 30s, 10m, 4h or 1h30m (got ${JSON.stringify(value)})`);
  return ms;
}

/** Label names are what routes write after `labels.`, so they must be CEL identifiers. */
function labelsOf(value: unknown, bad: (path: string, message: string) => void): Record<string, string> {
  if (value === undefined) return {};
  if (!isRecord(value)) {
    bad('labels', 'must be a map of label names to strings');
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (!/^[a-z_][a-z0-9_]*$/.test(k)) bad(`labels.${k}`, 'a label name is lower-case letters, digits and underscores');
    else if (typeof v !== 'string') bad(`labels.${k}`, `must be a string (got ${JSON.stringify(v)})`);
    else out[k] = v;
  }
  return out;
}

function applyOverride(
  rule: CompiledRule,
  raw: Record<string, unknown>,
  p: (k?: string) => (string | number)[],
  err: (path: (string | number)[], message: string) => void,
): void {
  if ('enabled' in raw) {
    if (typeof raw['enabled'] !== 'boolean') return err(p('enabled'), 'must be true or false');
    rule.enabled = raw['enabled'];
  }
  if ('mode' in raw) {
    if (!MODES.includes(raw['mode'] as never)) return err(p('mode'), `must be one of ${MODES.join(', ')} (got ${JSON.stringify(raw['mode'])})`);
    rule.mode = raw['mode'] as CompiledRule['mode'];
  }
  // Timing of a built-in alert can be tuned by name, like its params.
  const timing = [['for', 'forMs'], ['keep_firing_for', 'keepFiringForMs'], ['repeat', 'repeatMs'], ['every', 'everyMs']] as const;
  for (const [key, field] of timing) {
    if (!(key in raw)) continue;
    if (rule.kind !== 'alert') {
      err(p(key), `only for kind: alert rules (${rule.name} is a ${rule.kind} rule)`);
      continue;
    }
    if (key === 'every' && !rule.clock) {
      err(p(key), `only for rules that read the clock (now) or absence rules (${rule.name} is evaluated at each poll)`);
      continue;
    }
    const ms = durationOf(key, raw[key], (_k, m) => err(p(key), m));
    if (ms === null) continue;
    if (key === 'repeat' && ms === 0) err(p(key), 'must be longer than 0 (leave it out to never repeat)');
    else if (key === 'every' && ms < DEFAULT_EVERY_MS) err(p(key), `must be at least 1m (got ${JSON.stringify(raw[key])})`);
    else rule[field] = ms;
  }
  if ('labels' in raw) {
    rule.labels = { ...rule.labels, ...labelsOf(raw['labels'], (path, m) => err([...p(), ...path.split('.')], m)) };
  }
  if ('params' in raw) {
    const params = raw['params'];
    if (!isRecord(params)) return err(p('params'), 'must be a map of parameter names to values');
    for (const [k, v] of Object.entries(params)) {
      if (!(k in rule.params)) {
        err([...p('params'), k], unknownKeyMessage(k, Object.keys(rule.params), `parameter of rule ${rule.name}`));
      } else if (typeof v !== typeof rule.params[k]) {
        err([...p('params'), k], `must be a ${typeof rule.params[k]} like the default (${JSON.stringify(rule.params[k])})`);
      } else if (isCelDuration(rule.params[k]) && !isCelDuration(v)) {
        // Read by duration(params.x): a value it cannot read fails every evaluation, and the rule never fires.
        err([...p('params'), k], `must be a duration like the default (${JSON.stringify(rule.params[k])}): 30s, 90m, 26h or 14d (got ${JSON.stringify(v)})`);
      } else {
        rule.params[k] = v;
      }
    }
  }
}

/** The 1-based line of the node at `path` (or of its nearest existing parent). */
export function lineAt(doc: Document, lc: LineCounter, path: (string | number)[]): number | null {
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
    if (range) {
      // For a map entry, point at the key rather than the value where possible.
      if (n > 0) {
        const parent = n === 1 ? doc.contents : doc.getIn(path.slice(0, n - 1), true);
        if (isMap(parent)) {
          const pair = parent.items.find((it) => (it.key as { value?: unknown } | null)?.value === path[n - 1]);
          const kr = (pair?.key as { range?: [number, number, number] } | null)?.range;
          if (kr) return lc.linePos(kr[0]).line;
        } else if (isSeq(parent)) {
          return lc.linePos(range[0]).line;
        }
      }
      return lc.linePos(range[0]).line;
    }
  }
  return null;
}

/** A key path as text: `rules[0].when`. */
export function pathText(path: (string | number)[]): string {
  return path.reduce<string>((s, k) => (typeof k === 'number' ? `${s}[${k}]` : s ? `${s}.${k}` : k), '') || '(file)';
}

