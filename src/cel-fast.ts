/**
 * A fast path for the common part of CEL: the expressions rules are made of (field reads,
 * `==`, `!=`, `<`…, `&&`, `||`, `!`, `in`, `size`, `has`, arithmetic, literals) compiled
 * once into JavaScript closures that read the rule's input as the plain JSON values it is.
 *
 * It never decides anything differently from `@bufbuild/cel`: every node either returns the
 * value the library would return, or BAIL ("not sure"), and any BAIL makes the whole
 * evaluation go to the library's interpreter (planCel in cel.ts). So an error (a missing
 * field, no matching overload, an overflow), a value of a kind it does not handle (a
 * timestamp, a CEL map built elsewhere, a uint), or a function it does not know is the
 * library's to answer, with the library's message. What it answers itself was checked
 * against the library, case by case (test/cel-fast.test.ts compares both on every operator
 * and value kind, and on every built-in rule).
 *
 * Values, as the library represents them: a JSON number is a CEL double (a JS number), an
 * integer literal or `size()` an int (a bigint), strings, booleans and null as themselves,
 * a plain object a map and an array a list.
 */

/** "Not sure": the interpreter decides. */
export const BAIL: unique symbol = Symbol('bail');
type Bail = typeof BAIL;

/**
 * Bindings that can hand out a variable as its plain value (LazyBindings in
 * rules/evaluate.ts). Other bindings are read by name; a value that is not plain JSON
 * (a CEL value, a protobuf message) makes the fast path bail wherever it is used.
 */
export const RAW: unique symbol = Symbol('raw');
export interface RawBindings {
  [RAW](name: string): unknown;
}

type Node = (b: Record<string | symbol, unknown>) => unknown;

/** What the fast path evaluates an expression to: a primitive CEL result, or BAIL. */
export type FastProgram = (bindings: Record<string, unknown>) => unknown;

interface Expr {
  exprKind: { case: string | undefined; value: unknown };
}

/**
 * What the library itself turns into a map: a plain object that is not a protobuf message or
 * a CEL value.
 */
export function isPlainRecord(v: object): boolean {
  return Object.getPrototypeOf(v) === Object.prototype && !Object.hasOwn(v, 'constructor') && !('$typeName' in v) && Object.getOwnPropertySymbols(v).length === 0;
}

/** A value the library reads as a map (a plain object; an array is not one). */
function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && isPlainRecord(v);
}

/** A key of a map as the library sees it: an own, enumerable property. */
export function isField(record: object, key: unknown): key is string {
  return typeof key === 'string' && Object.prototype.propertyIsEnumerable.call(record, key);
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Compile a parsed expression (`parse()`'s result); null when nothing of it can go fast
 * (the root itself is something only the interpreter does).
 */
export function compileFast(parsed: unknown): FastProgram | null {
  const root = (parsed as { expr?: Expr }).expr;
  if (!root) return null;
  const node = compile(root);
  if (node === null) return null;
  return (b) => {
    const v = node(b as Record<string | symbol, unknown>);
    // Only primitives leave the fast path: a list or map result is the library's to build.
    return (typeof v === 'object' && v !== null) || typeof v === 'function' ? BAIL : v;
  };
}

const always: Node = () => BAIL;

/** A node, or null when the interpreter must take it (the whole expression then bails there). */
function compile(e: Expr): Node | null {
  const k = e.exprKind;
  switch (k.case) {
    case 'constExpr':
      return constant(k.value as { constantKind: { case: string; value: unknown } });
    case 'identExpr':
      return ident((k.value as { name: string }).name);
    case 'selectExpr': {
      const s = k.value as { operand: Expr; field: string; testOnly: boolean };
      const operand = compile(s.operand) ?? always;
      return s.testOnly ? has(operand, s.field) : select(operand, s.field);
    }
    case 'listExpr': {
      const l = k.value as { elements: Expr[]; optionalIndices?: number[] };
      if (l.optionalIndices && l.optionalIndices.length > 0) return null;
      const items = l.elements.map((x) => compile(x) ?? always);
      return (b) => {
        const out: unknown[] = [];
        for (const item of items) {
          const v = item(b);
          if (v === BAIL) return BAIL;
          out.push(v);
        }
        return out;
      };
    }
    case 'callExpr':
      return call(k.value as { target?: Expr; function: string; args: Expr[] });
    default:
      // Comprehensions (exists, all, map, filter), map and message literals.
      return null;
  }
}

function constant(c: { constantKind: { case: string; value: unknown } }): Node | null {
  const v = c.constantKind.value;
  switch (c.constantKind.case) {
    case 'stringValue':
    case 'boolValue':
    case 'doubleValue':
    case 'int64Value':
      return () => v;
    case 'nullValue':
      return () => null;
    default:
      // uint, bytes, durations: values the fast path does not represent.
      return null;
  }
}

function ident(name: string): Node {
  return (b) => {
    const raw = b[RAW];
    // Other bindings: own properties only (an inherited `toString` is no variable).
    const v = typeof raw === 'function' ? (raw as RawBindings[typeof RAW]).call(b, name) : Object.hasOwn(b, name) ? b[name] : undefined;
    return v === undefined || typeof v === 'function' ? BAIL : v;
  };
}

/** A plain object's own field, as the library reads a map entry; BAIL where it would fail or the value is not JSON. */
function fieldOf(o: unknown, key: string): unknown {
  if (!isMap(o) || !isField(o, key)) return BAIL;
  const v = o[key];
  return v === undefined ? BAIL : v;
}

function select(operand: Node, field: string): Node {
  return (b) => {
    const o = operand(b);
    return o === BAIL ? BAIL : fieldOf(o, field);
  };
}

/** `has(x.f)` on a plain object: the library answers false for a field that is null. */
function has(operand: Node, field: string): Node {
  return (b) => {
    const o = operand(b);
    if (!isMap(o)) return BAIL;
    if (!isField(o, field)) return false;
    const v = o[field];
    return v === undefined ? BAIL : v !== null;
  };
}

function call(c: { target?: Expr; function: string; args: Expr[] }): Node | null {
  // Receiver-style calls (`s.startsWith(x)`) and any function not below: the interpreter's.
  if (c.target) return null;
  const args = c.args.map((a) => compile(a) ?? always);
  const [x, y, z] = args;
  switch (c.function) {
    case '_&&_':
      return args.length === 2 ? logical(x!, y!, false) : null;
    case '_||_':
      return args.length === 2 ? logical(x!, y!, true) : null;
    case '!_':
      return (b) => {
        const v = x!(b);
        return typeof v === 'boolean' ? !v : BAIL;
      };
    case '_?_:_':
      return (b) => {
        const cond = x!(b);
        return cond === true ? y!(b) : cond === false ? z!(b) : BAIL;
      };
    case '_==_':
      return (b) => equal(x!(b), y!(b));
    case '_!=_':
      return (b) => {
        const v = equal(x!(b), y!(b));
        return v === BAIL ? BAIL : !v;
      };
    case '_<_':
      return ordering(x!, y!, (r) => r < 0);
    case '_<=_':
      return ordering(x!, y!, (r) => r <= 0);
    case '_>_':
      return ordering(x!, y!, (r) => r > 0);
    case '_>=_':
      return ordering(x!, y!, (r) => r >= 0);
    case '_+_':
    case '_-_':
    case '_*_':
    case '_/_':
      return arithmetic(c.function, x!, y!);
    case '-_':
      return (b) => {
        const v = x!(b);
        if (typeof v === 'number') return -v;
        if (typeof v === 'bigint') return int64(-v);
        return BAIL;
      };
    case '@in':
      return (b) => contains(x!(b), y!(b));
    case 'size':
      return args.length === 1 ? (b) => size(x!(b)) : null;
    case '_[_]':
      return (b) => index(x!(b), y!(b));
    default:
      return null;
  }
}

/**
 * `&&` (`or` false) and `||` (`or` true). A left side that decides alone short-circuits as in
 * CEL; anything else the fast path is not sure of goes to the interpreter, whose error
 * absorption (`error && false` is false) it does not try to copy.
 */
function logical(x: Node, y: Node, or: boolean): Node {
  return (b) => {
    const l = x(b);
    if (l === or) return or;
    if (l !== !or) return BAIL;
    const r = y(b);
    return typeof r === 'boolean' ? r : BAIL;
  };
}

type Primitive = string | number | bigint | boolean | null;
const isPrimitive = (v: unknown): v is Primitive => v === null || (typeof v !== 'object' && typeof v !== 'symbol' && typeof v !== 'undefined' && typeof v !== 'function');

/**
 * CEL equality as the library answers it: numbers compare across double and int, values of
 * different kinds are unequal, a map or list is unequal to null. Maps and lists compared
 * with each other are left to the library.
 */
function equal(a: unknown, c: unknown): boolean | Bail {
  if (a === BAIL || c === BAIL) return BAIL;
  if (isPrimitive(a) && isPrimitive(c)) {
    const ta = typeof a;
    const tc = typeof c;
    if (ta === tc) return a === c;
    if (ta === 'number' && tc === 'bigint') return sameNumber(a as number, c as bigint);
    if (ta === 'bigint' && tc === 'number') return sameNumber(c as number, a as bigint);
    return false;
  }
  // One side a list or map: equal to null never; to anything else, the library decides.
  if ((a === null && isJsonContainer(c)) || (c === null && isJsonContainer(a))) return false;
  return BAIL;
}

function isJsonContainer(v: unknown): boolean {
  return Array.isArray(v) || isMap(v);
}

function sameNumber(d: number, i: bigint): boolean {
  return Number.isInteger(d) && BigInt(d) === i;
}

/** Orders numbers (double and int, also across), strings without surrogates, and booleans; else BAIL. */
function ordering(x: Node, y: Node, test: (r: number) => boolean): Node {
  return (b) => {
    const a = x(b);
    const c = y(b);
    if (a === BAIL || c === BAIL) return BAIL;
    const ta = typeof a;
    const tc = typeof c;
    if ((ta === 'number' || ta === 'bigint') && (tc === 'number' || tc === 'bigint')) {
      if (Number.isNaN(a) || Number.isNaN(c)) return BAIL;
      return test((a as number) < (c as number) ? -1 : (a as number) > (c as number) ? 1 : 0);
    }
    if (ta === 'string' && tc === 'string') {
      // UTF-16 order equals code point order without surrogate pairs.
      if (SURROGATE.test(a as string) || SURROGATE.test(c as string)) return BAIL;
      return test((a as string) < (c as string) ? -1 : (a as string) > (c as string) ? 1 : 0);
    }
    if (ta === 'boolean' && tc === 'boolean') return test(Number(a) - Number(c));
    return BAIL;
  };
}

function int64(v: bigint): bigint | Bail {
  return v < INT64_MIN || v > INT64_MAX ? BAIL : v;
}

/** Double with double, int with int (in range, no division by zero), string + string; else BAIL. */
function arithmetic(op: string, x: Node, y: Node): Node {
  return (b) => {
    const a = x(b);
    const c = y(b);
    if (typeof a === 'number' && typeof c === 'number') {
      switch (op) {
        case '_+_':
          return a + c;
        case '_-_':
          return a - c;
        case '_*_':
          return a * c;
        default:
          return a / c;
      }
    }
    if (typeof a === 'bigint' && typeof c === 'bigint') {
      switch (op) {
        case '_+_':
          return int64(a + c);
        case '_-_':
          return int64(a - c);
        case '_*_':
          return int64(a * c);
        default:
          // CEL's int division truncates toward zero, like BigInt's; -2^63 / -1 overflows.
          return c === 0n ? BAIL : int64(a / c);
      }
    }
    if (op === '_+_' && typeof a === 'string' && typeof c === 'string') return a + c;
    return BAIL;
  };
}

/** `x in list` (any element equal, as `==` above) and `key in map` (a string key of a plain object). */
function contains(x: unknown, coll: unknown): boolean | Bail {
  if (x === BAIL || coll === BAIL || !isPrimitive(x)) return BAIL;
  if (Array.isArray(coll)) {
    for (const el of coll) {
      if (!isPrimitive(el)) return BAIL;
      if (equal(x, el) === true) return true;
    }
    return false;
  }
  if (typeof x !== 'string' || !isMap(coll)) return BAIL;
  if (!isField(coll, x)) return false;
  const v = coll[x];
  return v === undefined || v === null ? BAIL : true;
}

/** size() of a string (code points), a list or a plain object, as an int. */
function size(v: unknown): bigint | Bail {
  if (typeof v === 'string') {
    let n = 0;
    for (const _ of v) n++;
    return BigInt(n);
  }
  if (Array.isArray(v)) return BigInt(v.length);
  if (isMap(v)) return BigInt(Object.keys(v).length);
  return BAIL;
}

/** `list[int]` in range, `map['key']` present; else BAIL. */
function index(coll: unknown, key: unknown): unknown {
  if (coll === BAIL || key === BAIL) return BAIL;
  if (Array.isArray(coll)) {
    if (typeof key !== 'bigint' || key < 0n || key >= BigInt(coll.length)) return BAIL;
    const v: unknown = coll[Number(key)];
    return v === undefined ? BAIL : v;
  }
  return typeof key === 'string' ? fieldOf(coll, key) : BAIL;
}
