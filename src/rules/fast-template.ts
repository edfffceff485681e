/**
 * A fast path for the common part of Liquid, the templates rule summaries are made of:
 * text; `{{ a.b.c }}` (`a['b']` too) with the filters join (a quoted separator), size,
 * upcase, downcase, default (one argument) and the engine's own pure filters (age,
 * days_until); `{% if %}` / `{% elsif %}` / `{% else %}` and `{% unless %}` on a path's
 * truthiness, `==` / `!=` between paths and literals (text, numbers, true, false, nil,
 * blank, empty) and `and` / `or`. Compiled once from liquidjs's own parse into closures
 * that read the scope as the plain JSON values it is: liquidjs's renderSync spends 10-20 µs
 * on a one-line summary in its generic machinery (a Context, generators, limiters), the
 * closures well under 1 µs.
 *
 * It never renders anything differently from liquidjs: a template with anything outside
 * that subset is not compiled at all, and a compiled one gives up (GIVE_UP) on any value it
 * is not sure of: a missing variable (strictVariables throws), a value that is not a
 * string, finite number, boolean, null, plain object or array, an object where text is
 * expected, a property of anything but a plain object or null, a filter that throws, a
 * render over liquidjs's memory limit. The caller then renders with liquidjs, so an error
 * is liquidjs's own, with its message. What it renders itself was checked against liquidjs
 * 10.30.1's code (equals, isFalsy, stringify, readProperty, the filters) and is compared
 * with it on every kind of value and on every built-in template (test/fast-template.test.ts).
 * liquidjs's wall-clock renderLimit is not checked: a compiled template has no loop.
 */
import { defaultOperators, filters as builtinFilters, IfTag, isFalsy, isTruthy, Liquid, Output, TypeGuards, UnlessTag, type Filter, type Template, type Token } from 'liquidjs';

/** "Not sure": liquidjs renders this scope. */
export const GIVE_UP: unique symbol = Symbol('give up');
type GiveUp = typeof GIVE_UP;

/** A compiled template: the text liquidjs would render for a scope, or GIVE_UP. */
export type FastTemplate = (scope: Record<string, unknown>) => string | GiveUp;

/** A filter that reads only its arguments (not `this`, liquidjs's context) and changes nothing. */
export type PureFilter = (value: unknown, ...args: unknown[]) => unknown;

/** What one render counts: liquidjs charges its memory limit for what join, upcase and downcase build. */
interface RenderState {
  memory: number;
}

type Part = (scope: Record<string, unknown>, state: RenderState) => string | GiveUp;
type Read = (scope: Record<string, unknown>, state: RenderState) => unknown;

/** Liquid's `nil`/`null`, `blank` and `empty` literals, as operands of a condition. */
const NIL: unique symbol = Symbol('nil');
const BLANK: unique symbol = Symbol('blank');
const EMPTY: unique symbol = Symbol('empty');
type Special = typeof NIL | typeof BLANK | typeof EMPTY;
const SPECIALS = new Map<string, Special>([['nil', NIL], ['null', NIL], ['blank', BLANK], ['empty', EMPTY]]);

/** liquidjs's class for literal text (not exported): what it parses plain text into. */
const HTML_CLASS = (new Liquid().parse('x')[0] as object).constructor;

interface Compiler {
  pure: ReadonlySet<PureFilter>;
  memoryLimit: number;
}

/**
 * Compile a template liquidjs parsed with `engine`; null when the template or the engine's
 * options are outside what the fast path renders (then liquidjs renders every time).
 * `pure`: the engine's own filters the fast path may call directly (see PureFilter).
 */
export function compileTemplate(templates: Template[], engine: Liquid, pure: readonly PureFilter[] = []): FastTemplate | null {
  const o = engine.options;
  // The semantics below are those of these options (the rules' engine in parse.ts).
  if (!o.strictVariables || !o.ownPropertyOnly || o.jsTruthy || o.lenientIf || o.keepOutputType || o.outputEscape || o.operators !== defaultOperators) return null;
  const body = sequence(templates, { pure: new Set(pure), memoryLimit: o.memoryLimit });
  if (body === null) return null;
  return (scope) => {
    try {
      return body(scope, { memory: 0 });
    } catch {
      // A filter that threw (the fast path's own code does not): liquidjs says what went wrong.
      return GIVE_UP;
    }
  };
}

/** A renderer that uses the fast path where it can and liquidjs for the rest, compiling each template once. */
export interface TemplateRenderer {
  /** `String(engine.renderSync(templates, scope))`: the same text, or the same error thrown. */
  render(templates: Template[], scope: Record<string, unknown>): string;
  /** The compiled template (null when liquidjs renders it); for tests. */
  compiled(templates: Template[]): FastTemplate | null;
}

/** The renderer of one engine; a template is compiled on its first render and kept as long as it lives. */
export function templateRenderer(engine: Liquid, pure: readonly PureFilter[] = []): TemplateRenderer {
  const cache = new WeakMap<Template[], FastTemplate | null>();
  const compiled = (templates: Template[]): FastTemplate | null => {
    let fast = cache.get(templates);
    if (fast === undefined) {
      fast = compileTemplate(templates, engine, pure);
      cache.set(templates, fast);
    }
    return fast;
  };
  return {
    compiled,
    render(templates, scope) {
      const fast = compiled(templates);
      const text = fast === null ? GIVE_UP : fast(scope);
      return text === GIVE_UP ? String(engine.renderSync(templates, scope)) : text;
    },
  };
}

function sequence(templates: readonly Template[], c: Compiler): Part | null {
  const parts: Part[] = [];
  for (const t of templates) {
    const part = node(t, c);
    if (part === null) return null;
    parts.push(part);
  }
  if (parts.length === 1) return parts[0]!;
  return (scope, state) => {
    let out = '';
    for (const part of parts) {
      const s = part(scope, state);
      if (s === GIVE_UP) return GIVE_UP;
      out += s;
    }
    return out;
  };
}

function node(t: Template, c: Compiler): Part | null {
  const ctor = (t as object).constructor;
  if (ctor === HTML_CLASS) {
    // Whitespace control (`{{-`, `-%}`) is applied by the parser to the text itself.
    const text = (t as unknown as { str: unknown }).str;
    return typeof text === 'string' ? () => text : null;
  }
  if (ctor === Output) return output(t as Output, c);
  if (ctor === IfTag || ctor === UnlessTag) return branches(t as IfTag | UnlessTag, c);
  return null;
}

/** `{{ path | filter: arg | … }}`. */
function output(t: Output, c: Compiler): Part | null {
  const postfix = t.value.initial.postfix;
  if (postfix.length !== 1) return null;
  let read = path(postfix[0]!);
  if (read === null) return null;
  for (const f of t.value.filters) {
    read = filter(read, f, c);
    if (read === null) return null;
  }
  const value = read;
  return (scope, state) => printed(value(scope, state));
}

/**
 * `{% if %}…{% elsif %}…{% else %}…{% endif %}`, or `{% unless %}` (its first test is
 * inverted; liquidjs's parse already dropped what `unless` ignores, like a second else).
 */
function branches(t: IfTag | UnlessTag, c: Compiler): Part | null {
  const tests: Array<{ when: Read; negate: boolean; then: Part }> = [];
  for (const b of t.branches) {
    if (b.value.filters.length > 0) return null;
    const test = 'test' in b ? (b as { test: unknown }).test : isTruthy;
    if (test !== isTruthy && test !== isFalsy) return null;
    const when = condition(b.value.initial.postfix);
    const then = sequence(b.templates, c);
    if (when === null || then === null) return null;
    tests.push({ when, negate: test === isFalsy, then });
  }
  const otherwise = sequence(t.elseTemplates ?? [], c);
  if (otherwise === null) return null;
  return (scope, state) => {
    for (const { when, negate, then } of tests) {
      const truth = truthy(when(scope, state));
      if (truth === GIVE_UP) return GIVE_UP;
      if (truth !== negate) return then(scope, state);
    }
    return otherwise(scope, state);
  };
}

/**
 * A condition from liquidjs's postfix form (so `and`/`or` group as liquidjs groups them:
 * right to left, both sides always evaluated: a missing variable on the side that does not
 * decide still throws in liquidjs, so it gives up here too).
 */
function condition(postfix: readonly Token[]): Read | null {
  const stack: Array<Read | Special> = [];
  for (const token of postfix) {
    if (TypeGuards.isOperatorToken(token)) {
      const r = stack.pop();
      const l = stack.pop();
      if (l === undefined || r === undefined) return null;
      const op = token.operator;
      if (op === 'and' || op === 'or') stack.push(logical(op, operand(l), operand(r)));
      else if (op === '==' || op === '!=') {
        const cmp = comparison(l, r, op === '!=');
        if (cmp === null) return null;
        stack.push(cmp);
      } else return null;
    } else {
      const v = conditionOperand(token);
      if (v === null) return null;
      stack.push(v);
    }
  }
  if (stack.length !== 1) return null;
  return operand(stack[0]!);
}

/** A path, or a literal: a string, a number, true/false, nil, blank or empty. */
function conditionOperand(token: Token): Read | Special | null {
  if (TypeGuards.isPropertyAccessToken(token)) return path(token);
  if (TypeGuards.isQuotedToken(token) || TypeGuards.isNumberToken(token)) {
    const v = token.content;
    return () => v;
  }
  if (TypeGuards.isLiteralToken(token)) {
    const special = SPECIALS.get(token.literal);
    if (special !== undefined) return special;
    const v = token.content;
    return typeof v === 'boolean' ? () => v : null;
  }
  return null;
}

/** A special literal as a value of its own: nil is null; blank and empty print as ''. */
function operand(x: Read | Special): Read {
  if (x === NIL) return () => null;
  if (x === BLANK || x === EMPTY) return () => '';
  return x;
}

function logical(op: 'and' | 'or', l: Read, r: Read): Read {
  return (scope, state) => {
    const a = truthy(l(scope, state));
    const b = truthy(r(scope, state));
    if (a === GIVE_UP || b === GIVE_UP) return GIVE_UP;
    return op === 'and' ? a && b : a || b;
  };
}

/** `l == r` or `l != r`; null when both sides are special literals (not compiled). */
function comparison(l: Read | Special, r: Read | Special, negate: boolean): Read | null {
  if (typeof l === 'symbol' && typeof r === 'symbol') return null;
  const eq = (a: unknown, b: unknown): boolean | GiveUp => {
    const e = equals(a, b);
    return e === GIVE_UP ? GIVE_UP : e !== negate;
  };
  // liquidjs asks the special literal, on whichever side it is (`nil == a` is `a == nil`).
  if (typeof r === 'symbol') return (scope, state) => eq((l as Read)(scope, state), r);
  if (typeof l === 'symbol') return (scope, state) => eq(r(scope, state), l);
  return (scope, state) => eq(l(scope, state), r(scope, state));
}

/**
 * liquidjs's `equals` for the values the fast path knows: a special literal compares by its
 * own rule (nil: null; blank: false, null, a blank string or an empty string, array or
 * object; empty: an empty string, array or object), anything else is `===` (an array is
 * never equal to a non-array; two arrays are compared item by item: given up).
 */
function equals(a: unknown, b: unknown): boolean | GiveUp {
  if (a === GIVE_UP || b === GIVE_UP || !known(a)) return GIVE_UP;
  if (b === NIL) return a === null;
  if (b === BLANK || b === EMPTY) {
    if (b === BLANK && (a === false || a === null)) return true;
    if (typeof a === 'string') return b === BLANK ? /^\s*$/.test(a) : a.length === 0;
    if (Array.isArray(a)) return a.length === 0;
    if (typeof a === 'object' && a !== null) return Object.keys(a).length === 0;
    return false;
  }
  if (!known(b)) return GIVE_UP;
  if (Array.isArray(a) && Array.isArray(b)) return GIVE_UP;
  return a === b;
}

/**
 * `a.b.c` (or `a['b']`): liquidjs's strict, own-property read. A property of null is null;
 * a missing property throws in liquidjs (given up here), as does one of a value that is not
 * a plain object (a string's `length`, an array's `first` or `size` are liquidjs's own).
 */
function path(token: Token): Read | null {
  if (!TypeGuards.isPropertyAccessToken(token) || token.variable !== undefined || token.props.length === 0) return null;
  const keys: string[] = [];
  for (const p of token.props) {
    if (!(TypeGuards.isWordToken(p) || TypeGuards.isQuotedToken(p)) || typeof p.content !== 'string') return null;
    keys.push(p.content);
  }
  return (scope) => {
    if (!known(scope)) return GIVE_UP;
    let v: unknown = scope;
    for (const key of keys) {
      // liquidjs reads any property of null as null, and so on to the end of the path.
      if (v === null) return null;
      // v is known: a primitive, an array, or a plain object.
      if (typeof v !== 'object' || Array.isArray(v) || !Object.hasOwn(v, key)) return GIVE_UP;
      v = (v as Record<string, unknown>)[key];
      if (v === undefined || !known(v)) return GIVE_UP;
    }
    return v;
  };
}

/** One filter applied to what `read` gives; null for a filter (or arguments) the fast path does not do. */
function filter(read: Read, f: Filter, c: Compiler): Read | null {
  const handler = (f as unknown as { handler: unknown }).handler;
  const args: Read[] = [];
  for (const a of f.args) {
    const arg = argument(a);
    if (arg === null) return null;
    args.push(arg);
  }
  if (handler === builtinFilters['join']) {
    // The separator: a quoted string, or none (a space).
    const token = f.args[0];
    if (f.args.length > 1 || (token !== undefined && !TypeGuards.isQuotedToken(token))) return null;
    const sep = token !== undefined && TypeGuards.isQuotedToken(token) ? token.content : ' ';
    return (scope, state) => join(read(scope, state), sep, state, c.memoryLimit);
  }
  if (handler === builtinFilters['size'] && args.length === 0) return (scope, state) => size(read(scope, state));
  if ((handler === builtinFilters['upcase'] || handler === builtinFilters['downcase']) && args.length === 0) {
    const upper = handler === builtinFilters['upcase'];
    return (scope, state) => cased(read(scope, state), upper, state, c.memoryLimit);
  }
  if (handler === builtinFilters['default'] && args.length === 1) {
    const fallback = args[0]!;
    return (scope, state) => defaulted(read(scope, state), fallback(scope, state));
  }
  if (c.pure.has(handler as PureFilter)) {
    const fn = handler as PureFilter;
    return (scope, state) => {
      const v = read(scope, state);
      if (v === GIVE_UP) return GIVE_UP;
      const argv: unknown[] = [];
      for (const arg of args) {
        const x = arg(scope, state);
        if (x === GIVE_UP) return GIVE_UP;
        argv.push(x);
      }
      const out = fn(v, ...argv);
      return known(out) ? out : GIVE_UP;
    };
  }
  return null;
}

/** A filter's argument: a quoted string, a number or a path (not `key: value`, not nil, blank or empty). */
function argument(a: Filter['args'][number]): Read | null {
  if (Array.isArray(a)) return null;
  const token = a as Token;
  if (TypeGuards.isQuotedToken(token) || TypeGuards.isNumberToken(token)) {
    const v = token.content;
    return () => v;
  }
  return path(token);
}

/** Charge `cost` to the render's memory limit as liquidjs does; false when liquidjs would throw ("memory alloc limit exceeded"). */
function charge(state: RenderState, cost: number, limit: number): boolean {
  if (cost <= 0) return true;
  if (state.memory + cost > limit) return false;
  state.memory += cost;
  return true;
}

/**
 * liquidjs's `join`: a list's items (a single value is a list of one, null none) joined by
 * the separator, charged to the render's memory limit as liquidjs charges it (`String()`
 * of every item, so a null item counts four). Items other than text, numbers, booleans
 * and null are given up.
 */
function join(v: unknown, sep: string, state: RenderState, limit: number): unknown {
  if (v === GIVE_UP) return GIVE_UP;
  const list = v === null ? [] : Array.isArray(v) ? (v as unknown[]) : [v];
  let cost = sep.length * Math.max(list.length - 1, 0);
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    if (!printable(item)) return GIVE_UP;
    cost += String(item).length;
  }
  if (!charge(state, cost, limit)) return GIVE_UP;
  return Array.prototype.join.call(list, sep);
}

/** liquidjs's `upcase` and `downcase`: the value as text (charged to the memory limit), in upper or lower case. */
function cased(v: unknown, upper: boolean, state: RenderState, limit: number): unknown {
  if (v === GIVE_UP) return GIVE_UP;
  const text = printed(v);
  if (text === GIVE_UP || !charge(state, text.length, limit)) return GIVE_UP;
  return upper ? text.toUpperCase() : text.toLowerCase();
}

/** liquidjs's `default: x`: x for an empty string or list, false or null; else the value. */
function defaulted(v: unknown, fallback: unknown): unknown {
  if (v === GIVE_UP || fallback === GIVE_UP) return GIVE_UP;
  if (typeof v === 'string' || Array.isArray(v)) return v.length > 0 ? v : fallback;
  return v === false || v === null ? fallback : v;
}

/** liquidjs's `size`: `(v && v.length) || 0`; a plain object may have a `length` of its own: given up. */
function size(v: unknown): unknown {
  if (v === GIVE_UP) return GIVE_UP;
  if (typeof v === 'string' || Array.isArray(v)) return v.length;
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return 0;
  return GIVE_UP;
}

/** liquidjs's output of a value (`stringify`), for what the fast path prints: text, a number, a boolean or null. */
function printed(v: unknown): string | GiveUp {
  if (typeof v === 'string') return v;
  if (v === null) return '';
  return printable(v) ? String(v) : GIVE_UP;
}

function printable(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** liquidjs's truthiness (`isFalsy`: only false, null and undefined are false). */
function truthy(v: unknown): boolean | GiveUp {
  if (v === GIVE_UP || !known(v)) return GIVE_UP;
  return v !== false && v !== null;
}

/**
 * A value the fast path reasons about: text, a finite number, a boolean, null, or a plain
 * object or array that liquidjs does not treat specially (no `toLiquid`, which it reads
 * through, and no `equals`, which makes a value compare as a Drop). Not a Date, a class
 * instance (a Drop), a function, a bigint, NaN or an infinity.
 */
function known(v: unknown): boolean {
  if (printable(v)) return true;
  if (typeof v !== 'object' || v === null) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  if (Array.isArray(v) ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) return false;
  const o = v as { toLiquid?: unknown; equals?: unknown };
  return typeof o.toLiquid !== 'function' && typeof o.equals !== 'function';
}
