import { join } from 'node:path';
import { isCelError, type CelResult } from '@bufbuild/cel';
import { describe, expect, it } from 'vitest';
import { BAIL, compileFast } from '../src/cel-fast.js';
import { parseCel, planCel, planCelSlow } from '../src/cel.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { packageRoot } from '../src/paths.js';
import { bindingsOf, findLatest, type RuleInput } from '../src/rules/evaluate.js';
import { loadRules } from '../src/rules/parse.js';

// The fast path (src/cel-fast.ts) answers part of CEL itself and hands the rest to
// @bufbuild/cel's interpreter. These tests pin that an answer it gives is the
// interpreter's answer, value for value, and that it does answer the common cases.

/** A result to compare: the value (bigints and -0 kept apart), an error's message, or the kind of an object. */
function outcome(r: CelResult | unknown): unknown {
  if (isCelError(r as CelResult)) return { error: (r as { message: string }).message };
  if (typeof r === 'bigint') return { int: r.toString() };
  if (typeof r === 'number') return Object.is(r, -0) ? { double: '-0' } : Number.isNaN(r) ? { double: 'NaN' } : { double: r };
  if (r === null || typeof r !== 'object') return r;
  return { object: Symbol.iterator in r ? 'iterable' : 'other' };
}

/** A value's name in a failure message. */
const label = (v: unknown): string => {
  try {
    return typeof v === 'bigint' ? `${v}n` : (JSON.stringify(v) ?? String(v));
  } catch {
    return Object.prototype.toString.call(v);
  }
};

const VALUES: unknown[] = [
  0, 1, 1.5, -0, NaN, 2 ** 53, 2n, -7n, 9223372036854775807n, 'x', 'Z', 'a', '😀', '', 'Ok', true, false, null,
  {}, { x: null }, { x: 1 }, { x: false }, { x: 'x' }, { x: { y: 2 } }, [], [1], ['x', 1], [null], [{}], [2n], [1.5, 'Ok'],
  undefined, new Map([['x', 1]]), new Date(0), Object.create(null) as unknown,
];

const EXPRESSIONS = [
  'a == b', 'a != b', 'a < b', 'a <= b', 'a > b', 'a >= b', 'a + b', 'a - b', 'a * b', 'a / b', 'a % b', 'a in b', 'b in a',
  'a && b', 'a || b', '!a', '-a', 'size(a)', 'has(a.x)', 'a.x', 'a.x.y', 'a[b]', 'a[0]', "a['x']", 'a ? 1 : 2', 'a == 1',
  'a == 1.0', 'a > 0', "a == 'x'", 'a == null', 'a != null', "a in [1, 'x', null]", 'a.x == b', '[a, b] == [a, b]',
  'size(a) > 0 || b == true', '!(a in b)', 'a * 100.0 >= b * 90.0', 'a - 1 < b + 1', "a + 'y' == 'xy'", 'a ? b : a',
  "a == 'x' && b.startsWith('x')", 'a.exists(e, e == b)', 'int(a) == 1', 'a == 1u', 'now > a', 'type(a) == int',
];

describe('the CEL fast path', () => {
  it('answers exactly as the interpreter on every operator, for every kind of value and pair of kinds', () => {
    let fast = 0;
    let compared = 0;
    for (const expr of EXPRESSIONS) {
      const ast = parseCel(expr);
      const both = planCel(ast);
      const slow = planCelSlow(ast);
      const alone = compileFast(ast);
      for (const a of VALUES) {
        for (const b of VALUES) {
          const bindings: Record<string, unknown> = {};
          if (a !== undefined) bindings['a'] = a;
          if (b !== undefined) bindings['b'] = b;
          const want = outcome(slow(bindings));
          expect(outcome(both(bindings)), `${expr} with a=${label(a)} b=${label(b)}`).toEqual(want);
          const v = alone === null ? BAIL : alone(bindings);
          if (v !== BAIL) {
            expect(outcome(v), `fast ${expr} with a=${label(a)} b=${label(b)}`).toEqual(want);
            fast++;
          }
          compared++;
        }
      }
    }
    expect(compared).toBe(EXPRESSIONS.length * VALUES.length ** 2);
    // Not vacuous: a good part is answered without the interpreter.
    expect(fast).toBeGreaterThan(compared / 6);
  });

  it('leaves errors, timestamps, macros and unknown functions to the interpreter, with its messages', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['a.x', { a: {} }],
      ['a > b', { a: null, b: 1 }],
      ['a * b', { a: 1.5, b: 2n }],
      ['a * b', { a: 9223372036854775807n, b: 2n }],
      ['size(a)', { a: null }],
      ['a', {}],
      ['a[1]', { a: [5] }],
      ["now - timestamp('2026-11-20T00:00:00Z') > duration('1h')", { now: { $typeName: 'google.protobuf.Timestamp', seconds: 1_800_000_000n, nanos: 0 } }],
      ["a.exists(e, e == 'x')", { a: ['x'] }],
      ["glob(a, '*.example')", { a: 'c.example' }],
      ['toString', {}],
      ['a == b', { a: () => 1, b: null }],
    ];
    for (const [expr, b] of cases) {
      const ast = parseCel(expr);
      const fast = compileFast(ast);
      expect(fast === null || fast(b) === BAIL, expr).toBe(true);
      expect(outcome(planCel(ast)(b))).toEqual(outcome(planCelSlow(ast)(b)));
    }
  });

  it('gives every built-in rule the interpreter answer on generated records, and answers most of them itself', () => {
    const root = packageRoot();
    const rules = loadRules(join(root, 'rules'), [], { sourceNames: SOURCE_NAMES, cwd: root });
    const states = ['Ok', 'Error', 'Pending', 'Creating', 'released', 'blocked', 'offline', 'online', 'slow', 'paused', null, 1, ''];
    const record = (i: number): Record<string, unknown> => ({
      id: i,
      state: states[i % states.length],
      status: states[(i + 3) % states.length],
      online: i % 7 === 0 ? null : { status: states[(i + 5) % states.length], label: 'L' },
      integrity: { problems: i % 4 === 0 ? 2 : i % 5 === 0 ? 0.5 : 0, status: 'x' },
      disk: { percent: (i * 7) % 120, used_mib: i * 3, limit_mib: 100, over: i % 9 === 0 },
      db: { used_mib: (i * 13) % 130, limit_mib: i % 6 === 0 ? 0 : 100 },
      inodes: { used: (i * 11) % 140, limit: i % 8 === 0 ? 0 : 100 },
      over: i % 10 === 0 ? ['disk'] : [],
      frozen: i % 11 === 0,
      created_at: '2026-11-20T10:00:00Z',
      active: i % 3 !== 0,
      enabled: i % 4 !== 0,
      done: i % 2 === 0,
      error: i % 5 === 0 ? 'boom' : null,
      ...(i % 6 === 0 ? {} : { last_error: i % 4 === 0 ? 'e' : null }),
    });
    const compiled = new Map<string, { slow: ReturnType<typeof planCelSlow>; fast: ReturnType<typeof compileFast> }>();
    const of = (src: string): { slow: ReturnType<typeof planCelSlow>; fast: ReturnType<typeof compileFast> } => {
      let p = compiled.get(src);
      if (!p) compiled.set(src, (p = { slow: planCelSlow(parseCel(src)), fast: compileFast(parseCel(src)) }));
      return p;
    };
    let compared = 0;
    let fastAnswers = 0;
    for (let i = 0; i < 120; i++) {
      const after = i % 13 === 12 ? null : record(i);
      const before = i % 5 === 0 ? null : record(i + 1);
      const input: RuleInput = { subject: `s/${i}`, site: { id: 3, domain: 'c.example' }, before, after, changes: [], now: Date.parse('2026-11-23T12:00:00Z'), items: [record(i), record(i + 2)] };
      for (const rule of rules) {
        const exprs: Array<[string, ((b: Record<string, unknown>) => CelResult) | null]> = [
          [rule.when, rule.condition],
          [rule.resolveWhenSource ?? '', rule.resolveWhen],
        ];
        for (const [src, program] of exprs) {
          if (!program || src.trim() === '') continue;
          const b = bindingsOf(rule, input);
          const { slow, fast } = of(src);
          const v = fast ? fast(b) : BAIL;
          const want = outcome(slow(b));
          if (v !== BAIL) {
            expect(outcome(v), `fast ${rule.name}: ${src} on ${JSON.stringify(after)}`).toEqual(want);
            fastAnswers++;
          }
          expect(outcome(program(b)), `${rule.name}: ${src} on ${JSON.stringify(after)}`).toEqual(want);
          compared++;
        }
        if (rule.absence) findLatest(rule, input);
      }
    }
    expect(compared).toBeGreaterThan(3000);
    expect(fastAnswers).toBeGreaterThan(compared / 2);
  });

  it('reads an absence rule item as the record it is, and the same item as the interpreter', () => {
    const root = packageRoot();
    const rules = loadRules(join(root, 'rules'), [], { sourceNames: SOURCE_NAMES, cwd: root });
    const stale = rules.find((r) => r.name === 'backup-stale')!;
    const items = [
      { state: 'Ok', created_at: '2026-11-23T11:00:00Z' },
      { state: 'Error', created_at: '2026-11-23T11:30:00Z' },
      { state: 'Ok', created_at: '2026-11-22T11:00:00Z' },
      { state: 'Ok' },
    ];
    const input: RuleInput = { subject: 's', site: null, before: null, after: items.slice(0, 3), changes: [], now: Date.parse('2026-11-23T12:00:00Z'), items: items.slice(0, 3) };
    expect(findLatest(stale, input)).toEqual({ last: Date.parse('2026-11-23T11:00:00Z'), matches: 2, unknown: null });
    // A matching record without a time: unknown, as the interpreter says (the fast path bails on the missing field).
    const missing: RuleInput = { ...input, items };
    expect(findLatest(stale, missing).unknown).toMatch(/no readable time/);
  });
});
