import { readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { LineCounter, parseDocument, stringify } from 'yaml';
import { parseApiTime } from '../cel.js';
import { parseDuration } from '../config/duration.js';
import type { HostwatchEvent } from '../events/types.js';
import { isRecord } from '../is-record.js';
import { entityOf, sourceByName } from '../sources/registry.js';
import type { SiteInfo } from '../sources/types.js';
import { unknownKeyMessage } from '../closest.js';
import { lineAt, loadRules, parseRuleFile, pathText, RuleErrors, type LoadRulesOptions } from './parse.js';
import { eventLine, Replay } from './replay.js';
import type { CompiledRule, RuleError } from './types.js';

/** Keys an expected event may give; each one given must equal the actual event's. */
const EXPECT_KEYS = ['event', 'status', 'subject', 'summary', 'severity', 'labels', 'description', 'repeat', 'shadow'] as const;
const TEST_KEYS = ['name', 'source', 'site', 'record', 'entity', 'interval', 'rules', 'steps'];
const STEP_KEYS = ['at', 'now', 'snapshot', 'patch', 'expect'];
const DEFAULT_INTERVAL = 60_000;

/** The outcome of one test file: how many tests passed and failed, and the report lines. */
export interface RuleTestReport {
  file: string;
  passed: number;
  failed: number;
  lines: string[];
}

interface Step {
  line: number | null;
  /** Offset from the start of the test, in ms. */
  at: number;
  /** The clock at this step (the start plus `at`). */
  time: number;
  value: unknown;
  expect: Array<Record<string, unknown>>;
}

interface TestCase {
  name: string;
  line: number | null;
  source: string;
  site: SiteInfo | null;
  entity: string;
  siteId: number | null;
  interval: number;
  rules: unknown[] | null;
  /** The line in the test file of a key of `rules` (a path inside it, as [1, 'when']). */
  ruleLine: (path: ReadonlyArray<string | number>) => number | null;
  steps: Step[];
  /** The clock at the first step (epoch ms): 0 unless the first step gives `now:`. */
  start: number;
}

/**
 * Run one rule test file (`hostwatch rules test`): each test feeds a series of snapshots,
 * one poll per step, through the real planner (Replay) with the built-in rules plus the
 * file's `rule_files` and the test's own `rules`, and compares the events of each step with
 * its `expect`. Throws RuleErrors when the file itself is malformed.
 */
export function runRuleTestFile(path: string, builtinDir: string, opts: LoadRulesOptions): RuleTestReport {
  const shown = opts.cwd ? relative(opts.cwd, path) || path : path;
  const { ruleFiles, tests } = parseTestFile(readFileSync(path, 'utf8'), shown, dirname(path), opts);
  const report: RuleTestReport = { file: shown, passed: 0, failed: 0, lines: [] };
  for (const t of tests) {
    // A missing rule file is named as the test file's rule_files[i] (relative to the test file).
    const rules = rulesFor(t, builtinDir, ruleFiles, shown, { ...opts, configFile: path, listKey: 'rule_files' });
    const failures = runTest(t, rules);
    if (failures.length === 0) {
      report.passed++;
      report.lines.push(`ok   ${shown}: ${t.name}`);
    } else {
      report.failed++;
      report.lines.push(`FAIL ${shown}:${t.line ?? '?'}: ${t.name}`, ...failures.map((l) => `  ${l}`));
    }
  }
  return report;
}

function rulesFor(t: TestCase, builtinDir: string, ruleFiles: string[], file: string, opts: LoadRulesOptions): CompiledRule[] {
  const rules = loadRules(builtinDir, ruleFiles, opts);
  if (!t.rules) return rules;
  const byName = new Map(rules.map((r) => [r.name, r]));
  const errors: RuleError[] = [];
  parseRuleFile(stringify({ rules: t.rules }), `${file} (rules of test "${t.name}")`, opts, byName, errors);
  // The block was parsed as a file of its own: its lines are put back to the test file's.
  if (errors.length) throw new RuleErrors(errors.map((e) => ({ ...e, line: t.ruleLine(pathSegments(e.path).slice(1)) ?? e.line })));
  return [...byName.values()];
}

/** `rules[1].absent.for` as ['rules', 1, 'absent', 'for'] (pathText's inverse). */
function pathSegments(path: string): Array<string | number> {
  return [...path.matchAll(/\[(\d+)\]|([^.[\]]+)/g)].map((m) => (m[1] !== undefined ? Number(m[1]) : m[2]!));
}

function runTest(t: TestCase, rules: CompiledRule[]): string[] {
  const source = sourceByName(t.source)!;
  const replay = new Replay(rules, 'test');
  if (t.site) replay.knowSites([t.site]);
  const failures: string[] = [];
  let last = -Infinity;
  for (const [i, step] of t.steps.entries()) {
    const events: HostwatchEvent[] = [];
    // Between the previous step and this one, time passes as in the daemon: an unchanged
    // poll every interval, and the clock rules evaluated again at their \`every\`.
    if (last !== -Infinity) {
      const end = t.start + step.at;
      let poll = t.start + last + t.interval;
      for (;;) {
        const at = Math.min(poll, replay.nextClock(source, t.entity) ?? Infinity);
        if (at >= end) break;
        events.push(...(replay.tick(source, t.entity, t.siteId, at, { poll: at === poll })?.events ?? []));
        if (at === poll) poll += t.interval;
      }
    }
    events.push(...replay.observe(source, t.entity, t.siteId, step.time, step.value).events);
    last = step.at;
    const mismatch = compare(step.expect, events);
    if (mismatch) {
      failures.push(
        `step ${i + 1} at ${formatOffset(step.at)}${t.start !== 0 ? ` (${new Date(step.time).toISOString()})` : ''}${step.line ? ` (line ${step.line})` : ''}:`,
        '  expected:',
        ...(step.expect.length ? step.expect.map((e) => `    - ${expectedLine(e)}`) : ['    (no events)']),
        '  actual:',
        ...(events.length ? events.map((e) => `    - ${eventLine(e)}`) : ['    (no events)']),
      );
    }
  }
  return failures;
}

function compare(expected: Array<Record<string, unknown>>, actual: HostwatchEvent[]): boolean {
  if (expected.length !== actual.length) return true;
  return expected.some((exp, i) => {
    const a = actual[i]!;
    const view: Record<string, unknown> = { ...a.data, event: a.data.name, subject: a.subject };
    return Object.entries(exp).some(([k, v]) => JSON.stringify(view[k] ?? null) !== JSON.stringify(v));
  });
}

function expectedLine(e: Record<string, unknown>): string {
  const name = `${String(e['event'] ?? '*')}${e['status'] ? `:${String(e['status'])}` : ''}`;
  const parts = [name];
  if (e['subject'] !== undefined) parts.push(String(e['subject']));
  if (e['summary'] !== undefined) parts.push(JSON.stringify(e['summary']));
  for (const [k, v] of Object.entries(e)) if (!['event', 'status', 'subject', 'summary'].includes(k)) parts.push(`${k}=${JSON.stringify(v)}`);
  return parts.join(' ');
}

function formatOffset(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [u, n] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= n) {
      parts.push(`${Math.floor(rest / n)}${u}`);
      rest %= n;
    }
  }
  if (rest) parts.push(`${rest}ms`);
  return parts.join('');
}

/** Deep-merge a patch into a value (maps merge, anything else replaces; null deletes a key). */
export function applyPatch(value: unknown, patch: unknown): unknown {
  if (!isRecord(value) || !isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = { ...value };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyPatch(out[k], v);
  }
  return out;
}

function parseTestFile(text: string, file: string, dir: string, opts: LoadRulesOptions): { ruleFiles: string[]; tests: TestCase[] } {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  const errors: RuleError[] = [];
  const err = (path: (string | number)[], message: string): void => {
    errors.push({ file, line: lineAt(doc, lc, path), path: pathText(path), message });
  };
  for (const e of doc.errors) {
    errors.push({ file, line: lc.linePos(e.pos[0]).line, path: '(yaml)', message: e.message.split('\n')[0] ?? e.message });
  }
  if (errors.length) throw new RuleErrors(errors);
  const root: unknown = doc.toJS();
  if (!isRecord(root) || !Array.isArray(root['tests'])) {
    err([], 'a rule test file is a map with a "tests" list (and optionally "rule_files")');
    throw new RuleErrors(errors);
  }
  for (const k of Object.keys(root)) if (k !== 'tests' && k !== 'rule_files') err([k], 'unknown key; allowed: rule_files, tests');
  const rf = root['rule_files'] ?? [];
  const ruleFiles: string[] = [];
  if (!Array.isArray(rf) || rf.some((f) => typeof f !== 'string')) err(['rule_files'], 'must be a list of rule file paths, relative to this file');
  else ruleFiles.push(...rf.map((f: string) => resolve(dir, f)));

  const tests: TestCase[] = [];
  root['tests'].forEach((raw: unknown, i: number) => {
    const p = (...k: (string | number)[]): (string | number)[] => ['tests', i, ...k];
    if (!isRecord(raw)) return err(p(), 'each test is a map');
    for (const k of Object.keys(raw)) if (!TEST_KEYS.includes(k)) err(p(k), unknownKeyMessage(k, TEST_KEYS));
    const name = typeof raw['name'] === 'string' ? raw['name'] : `test ${i + 1}`;
    const source = sourceByName(String(raw['source']));
    if (!source || !opts.sourceNames.includes(source.name)) {
      return err(p('source'), `must be one of ${opts.sourceNames.join(', ')} (got ${JSON.stringify(raw['source'] ?? null)})`);
    }
    let site: SiteInfo | null = null;
    if (raw['site'] !== undefined) {
      const s = raw['site'];
      if (!isRecord(s) || typeof s['id'] !== 'number') return err(p('site'), 'must be a map like { id: 1, domain: a.example }');
      site = { id: s['id'], domain: typeof s['domain'] === 'string' ? s['domain'] : `site-${s['id']}` };
      // The site's labels (as config site_labels would give them): events carry them.
      if (s['labels'] !== undefined) {
        const labels = s['labels'];
        if (!isRecord(labels) || Object.values(labels).some((v) => typeof v !== 'string')) {
          return err(p('site', 'labels'), 'must be a map of label names to text values, like { client: acme }');
        }
        site.labels = labels as Record<string, string>;
      }
    }
    // A detail source reads one record of its parent list: per site when its parent is, or
    // when its records name their site (the runs of a job of the account's cron list).
    const parent = source.per === 'record' && source.parent !== undefined ? sourceByName(source.parent) : undefined;
    const perSite = source.per === 'site' || parent?.per === 'site' || (source.entity ?? '').includes('{site_id}');
    if (perSite && site === null) return err(p('site'), `source ${source.name} is per site: give site: { id: 1, domain: a.example }`);
    const record = raw['record'];
    const needsRecord = (source.entity ?? '').includes('{id}');
    if (needsRecord && (typeof record !== 'string' && typeof record !== 'number')) {
      return err(p('record'), `source ${source.name} reads one record of ${source.parent ?? 'its parent'}: give that record's key, like record: 12`);
    }
    if (!needsRecord && record !== undefined) return err(p('record'), `source ${source.name} is not a per-record source: leave record out`);
    // On an account-wide source, `site` only names a site its records may point to (site_id).
    const ref = entityOf(source, perSite ? site : null, needsRecord ? String(record) : undefined);
    const interval = raw['interval'] === undefined ? DEFAULT_INTERVAL : parseDuration(String(raw['interval']));
    if (interval === null || interval <= 0) return err(p('interval'), `must be a duration like 1m (got ${JSON.stringify(raw['interval'])})`);
    const rules = raw['rules'] ?? null;
    if (rules !== null && !Array.isArray(rules)) return err(p('rules'), 'must be a list of rules or overrides, as in a rule file');
    if (!Array.isArray(raw['steps']) || raw['steps'].length === 0) return err(p('steps'), 'must be a non-empty list of steps');
    const steps: Step[] = [];
    let value: unknown = undefined;
    let at = -interval;
    // `now:` sets the clock of a step (rules that read `now` need real dates); the first
    // step's `now` is the start, and a later one is an offset from it.
    let start: number | null = null;
    raw['steps'].forEach((st: unknown, j: number) => {
      const sp = (...k: (string | number)[]): (string | number)[] => p('steps', j, ...k);
      if (!isRecord(st)) return err(sp(), 'each step is a map');
      for (const k of Object.keys(st)) if (!STEP_KEYS.includes(k)) err(sp(k), unknownKeyMessage(k, STEP_KEYS));
      if (st['now'] !== undefined) {
        const t = typeof st['now'] === 'string' ? parseApiTime(st['now']) : st['now'] instanceof Date ? st['now'].getTime() : null;
        if (t === null) return err(sp('now'), `must be an RFC 3339 time like 2026-11-21T10:00:00Z (got ${JSON.stringify(st['now'])})`);
        if (st['at'] !== undefined) return err(sp('now'), 'give at or now, not both');
        if (j === 0) start = t;
        else if (start === null) return err(sp('now'), 'a step can set now: only when the first step does (it is the start of the test)');
        const offset = t - start!;
        if (offset <= at) return err(sp('now'), `must be later than the step before (${new Date(start! + Math.max(at, 0)).toISOString()})`);
        at = offset;
      } else if (st['at'] !== undefined) {
        const t = parseDuration(String(st['at']));
        if (t === null) return err(sp('at'), `must be a time offset like 10m (got ${JSON.stringify(st['at'])})`);
        if (t <= at) return err(sp('at'), `must be later than the step before (${formatOffset(Math.max(at, 0))})`);
        at = t;
      } else {
        at += interval;
      }
      if ('snapshot' in st && 'patch' in st) return err(sp('patch'), 'give snapshot or patch, not both');
      if ('snapshot' in st) value = st['snapshot'];
      else if ('patch' in st) {
        if (value === undefined) return err(sp('patch'), 'a patch needs a snapshot in an earlier step');
        value = applyPatch(value, st['patch']);
      } else if (value === undefined) return err(sp(), 'the first step needs a snapshot');
      const expect = st['expect'] ?? [];
      if (!Array.isArray(expect)) return err(sp('expect'), 'must be a list of expected events, like [{ event: site.offline, status: firing }]');
      const exps: Array<Record<string, unknown>> = [];
      expect.forEach((e: unknown, k: number) => {
        if (!isRecord(e)) return err(sp('expect', k), 'each expected event is a map');
        for (const key of Object.keys(e)) if (!EXPECT_KEYS.includes(key as never)) err(sp('expect', k, key), unknownKeyMessage(key, EXPECT_KEYS));
        exps.push(e);
      });
      steps.push({ line: lineAt(doc, lc, sp()), at, time: (start ?? 0) + at, value: structuredClone(value), expect: exps });
    });
    const ruleLine = (path: ReadonlyArray<string | number>): number | null => lineAt(doc, lc, p('rules', ...path));
    tests.push({ name, line: lineAt(doc, lc, p()), source: source.name, site, entity: ref.entity, siteId: ref.siteId, interval, rules, ruleLine, steps, start: start ?? 0 });
  });
  if (errors.length) throw new RuleErrors(errors);
  return { ruleFiles, tests };
}
