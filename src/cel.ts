import { BAIL, compileFast, isField, isPlainRecord } from './cel-fast.js';
import { closest } from './closest.js';
import { celEnv, celFunc, celList, celMap, CelScalar, objectType, parse, plan, type CelResult } from '@bufbuild/cel';

/**
 * The one CEL environment of hostwatch: rule conditions, route matches, silence matches and
 * site labels all compile here, once, and run many times. Besides the CEL standard library
 * it has the time helpers rules need (docs/rules.md, "Time and absence"):
 *
 * - `now` is a variable (a timestamp) the caller binds from its injected clock;
 * - `date('2026-12-01')` reads a plain API date (midnight UTC) as a timestamp; a full
 *   RFC 3339 time is accepted too, so `date()` works on either kind of field;
 * - `duration('14d')` also takes days, like every other duration in hostwatch (CEL's own
 *   only goes up to hours);
 * - `glob(domain, '*.acme.com')`: `*` any run of characters, `?` one character.
 */

const { STRING, BOOL } = CelScalar;
const base = celEnv();
const TIMESTAMP = objectType(base.registry.getMessage('google.protobuf.Timestamp')!);
const DURATION = objectType(base.registry.getMessage('google.protobuf.Duration')!);

/** A protobuf Timestamp as CEL takes it (a plain message object: no protobuf import needed). */
interface TimestampMessage {
  $typeName: 'google.protobuf.Timestamp';
  seconds: bigint;
  nanos: number;
}
interface DurationMessage {
  $typeName: 'google.protobuf.Duration';
  seconds: bigint;
  nanos: number;
}

/** A CEL timestamp for epoch milliseconds (what `now` is bound to). */
export function celTimestamp(ms: number): unknown {
  const seconds = Math.floor(ms / 1000);
  const msg: TimestampMessage = { $typeName: 'google.protobuf.Timestamp', seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
  return msg;
}

/**
 * A JSON value as CEL sees it, converted once: plain objects become CEL maps and arrays CEL
 * lists. `@bufbuild/cel` converts a plain object again (a new Map of all its entries) on
 * every read of a variable and every field access, for every rule; a value converted here
 * is taken as it is, so rules that share a record share one conversion. A map's fields are
 * converted when first read (a rule reads a few fields of a record) and kept. Anything that
 * is not a plain object or an array (a number, a string, a protobuf message, an object with
 * another prototype) is left for the library to convert, or refuse, exactly as it would have.
 */
export function celValue(v: unknown): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return celList(v.map(celValue) as never);
  if (!isPlainRecord(v)) return v;
  return celMap(new RecordFields(v as Record<string, unknown>) as never);
}

/**
 * A plain object as the Map `celMap` wraps: the same keys, in the same order, as the
 * `new Map(Object.entries(record))` the library would build, each value converted
 * (celValue) on its first read and kept in the Map itself.
 */
class RecordFields extends Map<unknown, unknown> {
  readonly #record: Record<string, unknown>;
  constructor(record: Record<string, unknown>) {
    super();
    this.#record = record;
  }
  override get(key: unknown): unknown {
    let v = super.get(key);
    if (v === undefined && isField(this.#record, key)) {
      v = celValue(this.#record[key]);
      if (v !== undefined) super.set(key, v);
    }
    return v;
  }
  override has(key: unknown): boolean {
    return isField(this.#record, key);
  }
  override get size(): number {
    return Object.keys(this.#record).length;
  }
  override keys(): ReturnType<Map<unknown, unknown>['keys']> {
    return Object.keys(this.#record).values() as never;
  }
  override values(): ReturnType<Map<unknown, unknown>['values']> {
    return Object.keys(this.#record).map((k) => this.get(k)).values() as never;
  }
  override entries(): ReturnType<Map<unknown, unknown>['entries']> {
    return Object.keys(this.#record).map((k): [unknown, unknown] => [k, this.get(k)]).values() as never;
  }
  override [Symbol.iterator](): ReturnType<Map<unknown, unknown>['entries']> {
    return this.entries();
  }
  override forEach(callback: (value: unknown, key: unknown, map: Map<unknown, unknown>) => void, thisArg?: unknown): void {
    for (const k of Object.keys(this.#record)) callback.call(thisArg, this.get(k), k, this);
  }
}

/** Epoch milliseconds of a CEL timestamp (as a function receives it), or of an ISO text; null for anything else. */
export function timeOf(value: unknown): number | null {
  if (typeof value === 'string') {
    const t = parseApiTime(value);
    return t;
  }
  const msg = (value as { message?: { $typeName?: string; seconds?: bigint; nanos?: number } } | null)?.message ?? (value as TimestampMessage | null);
  if (msg && msg.$typeName === 'google.protobuf.Timestamp' && typeof msg.seconds === 'bigint') {
    return Number(msg.seconds) * 1000 + Math.floor((msg.nanos ?? 0) / 1e6);
  }
  return null;
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** An API time (`YYYY-MM-DD` = midnight UTC, or RFC 3339) as epoch ms; null when it is neither. */
export function parseApiTime(text: string): number | null {
  const d = DATE_ONLY.exec(text);
  if (d) {
    const t = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]));
    // 2026-02-31 would roll over to March: not a date.
    return new Date(t).toISOString().slice(0, 10) === text ? t : null;
  }
  if (!RFC3339.test(text)) return null;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : t;
}

const DURATION_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)/y;
const UNIT_NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n,
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
  d: 86_400_000_000_000n,
};

/**
 * A CEL duration string (`300ms`, `-1.5h`, `2h45m`) or a hostwatch one with days (`14d`,
 * `1d12h`) as nanoseconds; throws on anything else. CEL's grammar is kept (fractions, a sign,
 * any unit order), days are added.
 */
export function parseCelDuration(text: string): bigint {
  let s = text;
  let sign = 1n;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1n;
    s = s.slice(1);
  }
  if (s === '0') return 0n;
  if (s === '') throw new Error(`invalid duration "${text}"`);
  let total = 0n;
  DURATION_PART.lastIndex = 0;
  while (DURATION_PART.lastIndex < s.length) {
    const m = DURATION_PART.exec(s);
    if (!m) throw new Error(`invalid duration "${text}" (like 30s, 90m, 26h or 14d)`);
    const [whole, frac = ''] = m[1]!.split('.');
    const unit = UNIT_NS[m[2]!]!;
    total += BigInt(whole || '0') * unit;
    if (frac) total += (BigInt(frac) * unit) / 10n ** BigInt(frac.length);
  }
  return sign * total;
}

function durationMessage(ns: bigint): DurationMessage {
  const seconds = ns / 1_000_000_000n;
  return { $typeName: 'google.protobuf.Duration', seconds, nanos: Number(ns - seconds * 1_000_000_000n) };
}

/** `*` any run of characters, `?` one; everything else literal; case-insensitive (domains). */
export function globToRegExp(pattern: string): RegExp {
  const body = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 'i');
}

const globCache = new Map<string, RegExp>();

const HELPERS = [
  celFunc('date', [STRING], TIMESTAMP, (text: string) => {
    const t = parseApiTime(text);
    if (t === null) throw new Error(`date() needs YYYY-MM-DD or an RFC 3339 time (got "${text}")`);
    return celTimestamp(t) as never;
  }),
  celFunc('duration', [STRING], DURATION, (text: string) => durationMessage(parseCelDuration(text)) as never),
  celFunc('glob', [STRING, STRING], BOOL, (text: string, pattern: string) => {
    let re = globCache.get(pattern);
    if (!re) {
      re = globToRegExp(pattern);
      if (globCache.size > 1000) globCache.clear();
      globCache.set(pattern, re);
    }
    return re.test(text);
  }),
];

const env = celEnv({ funcs: HELPERS });

/** A planned CEL expression. */
export type CelProgram = (bindings: Record<string, unknown>) => CelResult;

/** The most expressions the caches below hold: every rule, match and label of a config, many times over. */
const CACHED_EXPRESSIONS = 5_000;
const parsed = new Map<string, ReturnType<typeof parse>>();
const planned = new WeakMap<ReturnType<typeof parse>, CelProgram>();

/**
 * Parse a CEL expression; throws the parser's error, which names the position. The parse
 * of a text is kept (a parsed expression is never changed): loading the rules parses each
 * expression for several checks (variables, functions, the clock) and to plan it, and a
 * daemon, `check` or a test process loads the same rules again and again.
 */
export function parseCel(text: string): ReturnType<typeof parse> {
  let ast = parsed.get(text);
  if (ast === undefined) {
    ast = parse(text);
    if (parsed.size >= CACHED_EXPRESSIONS) parsed.clear();
    parsed.set(text, ast);
  }
  return ast;
}

/**
 * Plan a parsed expression for repeated evaluation: the library's interpreter, behind the
 * fast path of cel-fast.ts where the expression has parts it can take (it answers only what
 * it is sure the interpreter would answer, and hands everything else to it).
 */
export function planCel(ast: ReturnType<typeof parse>): CelProgram {
  // A plan holds no state of its own: the plan of a kept parse (parseCel) is kept with it.
  const known = planned.get(ast);
  if (known !== undefined) return known;
  const slow = plan(env, ast) as CelProgram;
  const fast = compileFast(ast);
  const program: CelProgram =
    fast === null
      ? slow
      : (bindings) => {
          const v = fast(bindings);
          return v === BAIL ? slow(bindings) : (v as CelResult);
        };
  planned.set(ast, program);
  return program;
}

/** The interpreter alone, without the fast path (the fast path's tests compare the two). */
export function planCelSlow(ast: ReturnType<typeof parse>): CelProgram {
  return plan(env, ast) as CelProgram;
}

/** Parse and plan in one step (throws on a syntax error). */
export function compileCel(expr: string): CelProgram {
  return planCel(parseCel(expr));
}

/**
 * The free variables of a parsed expression: identifiers that are not bound by a
 * comprehension (`exists(b, …)` binds `b`). Used to refuse unknown variables in silences
 * and site labels, and to see which rules read the clock (`now`).
 */
export function freeIdentifiers(root: unknown): Set<string> {
  return new Set(factsOf(root).free);
}

/** What the checks of an expression ask of its tree, found in one walk and kept with a kept parse (parseCel). */
interface ExprFacts {
  free: ReadonlySet<string>;
  calls: ReadonlySet<string>;
}
const facts = new WeakMap<object, ExprFacts>();

function factsOf(root: unknown): ExprFacts {
  const known = root !== null && typeof root === 'object' ? facts.get(root) : undefined;
  if (known !== undefined) return known;
  const used = new Set<string>();
  const bound = new Set<string>();
  const calls = new Set<string>();
  eachExprKind(root, (kind) => {
    if (kind.case === 'identExpr') used.add(String(kind.value?.['name']));
    if (kind.case === 'callExpr') calls.add(String(kind.value?.['function']));
    if (kind.case === 'comprehensionExpr') {
      for (const k of ['iterVar', 'iterVar2', 'accuVar']) if (kind.value?.[k]) bound.add(String(kind.value[k]));
    }
  });
  for (const b of bound) used.delete(b);
  const found = { free: used, calls };
  if (root !== null && typeof root === 'object') facts.set(root, found);
  return found;
}

/** Calls `fn` with the kind of every expression node of a parsed expression. */
function eachExprKind(root: unknown, fn: (kind: { case?: string; value?: Record<string, unknown> }) => void): void {
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const kind = (node as { exprKind?: { case?: string; value?: Record<string, unknown> } }).exprKind;
    if (kind) fn(kind);
    for (const [key, value] of Object.entries(node)) if (key !== 'sourceInfo' && typeof value === 'object') visit(value);
  };
  visit(root);
}

/**
 * The functions an expression calls that no function of the environment has (`frobnicate(x)`,
 * a misspelt `startswith`): planned, it would fail at every evaluation ("unbound function").
 * Macros (`has`, `exists`, `all`, `map`, `filter`) are expanded by the parser, so every
 * call left is a function. With the near miss among the known names.
 */
export function unknownFunctionsIn(root: unknown): Array<{ name: string; near: string | null }> {
  const names = factsOf(root).calls;
  // Operators (`_&&_`, `_?_:_`, `@not_strictly_false`) are the planner's own, not functions.
  const unknown = [...names].filter((n) => /^[A-Za-z]/.test(n) && env.funcs.find(n) === undefined);
  if (unknown.length === 0) return [];
  const known = [...new Set([...env.funcs].map((f) => f.name))].filter((n) => /^[A-Za-z]/.test(n));
  return unknown.map((name) => ({ name, near: closest(name, known) }));
}

/**
 * The string literals an expression compares one of `variables` with: `v == 'x'`,
 * `'x' != v`, `v in ['x', 'y']`. A variable that a comprehension binds anywhere in the
 * expression is left out (its name no longer means the input's).
 */
export function comparedStrings(root: unknown, variables: ReadonlySet<string>): Array<{ variable: string; value: string }> {
  const out: Array<{ variable: string; value: string }> = [];
  const bound = new Set<string>();
  type Node = { exprKind?: { case?: string; value?: Record<string, unknown> } };
  const identOf = (n: unknown): string | null => {
    const k = (n as Node | null)?.exprKind;
    return k?.case === 'identExpr' ? String(k.value?.['name']) : null;
  };
  const stringOf = (n: unknown): string | null => {
    const k = (n as Node | null)?.exprKind;
    const c = k?.case === 'constExpr' ? (k.value?.['constantKind'] as { case?: string; value?: unknown } | undefined) : undefined;
    return c?.case === 'stringValue' ? String(c.value) : null;
  };
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const kind = (node as Node).exprKind;
    if (kind?.case === 'comprehensionExpr') {
      for (const k of ['iterVar', 'iterVar2', 'accuVar']) if (kind.value?.[k]) bound.add(String(kind.value[k]));
    }
    if (kind?.case === 'callExpr') {
      const fn = kind.value?.['function'];
      const args = (kind.value?.['args'] ?? []) as unknown[];
      if ((fn === '_==_' || fn === '_!=_') && args.length === 2) {
        for (const [a, b] of [[args[0], args[1]], [args[1], args[0]]]) {
          const variable = identOf(a);
          const value = stringOf(b);
          if (variable !== null && value !== null && variables.has(variable)) out.push({ variable, value });
        }
      }
      const list = (args[1] as Node | undefined)?.exprKind;
      const variable = identOf(args[0]);
      if (fn === '@in' && variable !== null && variables.has(variable) && list?.case === 'listExpr') {
        for (const e of (list.value?.['elements'] ?? []) as unknown[]) {
          const value = stringOf(e);
          if (value !== null) out.push({ variable, value });
        }
      }
    }
    for (const [key, value] of Object.entries(node)) if (key !== 'sourceInfo' && typeof value === 'object') visit(value);
  };
  visit(root);
  return out.filter((c) => !bound.has(c.variable));
}

/**
 * The variables an expression uses that are not among `known` (nor CEL's type names);
 * throws on a syntax error. Used to refuse a match over a variable its input does not have.
 */
export function unknownVariables(expr: string, known: readonly string[]): string[] {
  return unknownVariablesIn(parseCel(expr).expr, known);
}

/** The same, of an expression already parsed (its `expr`). */
export function unknownVariablesIn(root: unknown, known: readonly string[]): string[] {
  return [...freeIdentifiers(root)].filter((n) => !known.includes(n) && !CEL_TYPE_NAMES.has(n));
}

/** CEL type names are identifiers too (`type(site_id) == int`). */
export const CEL_TYPE_NAMES: ReadonlySet<string> = new Set(['int', 'uint', 'double', 'bool', 'string', 'bytes', 'list', 'map', 'null_type', 'type', 'dyn']);

/**
 * A whole JSON number as a CEL int (a bigint): CEL reads every JSON number as a double, where
 * `%` and int overloads do not apply (`id % 50` is an error). Anything else as it is.
 */
export function celInt(v: unknown): unknown {
  return typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : v;
}
