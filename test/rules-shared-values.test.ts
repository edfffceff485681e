import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isCelError, type CelResult } from '@bufbuild/cel';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { celTimestamp, celValue, compileCel } from '../src/cel.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { packageRoot } from '../src/paths.js';
import { bindingsOf, dedupValue, findLatest, plainValues, type RuleInput } from '../src/rules/evaluate.js';
import { loadRules } from '../src/rules/parse.js';
import type { CompiledRule } from '../src/rules/types.js';

// The rule layer converts each record to CEL values once and shares them among the rules
// that read it; @bufbuild/cel converts plain objects itself on every read. These tests pin
// that both give the same answer: the same value, or an error with the same message.

const ROOT = packageRoot();
const rules = loadRules(join(ROOT, 'rules'), [], { sourceNames: SOURCE_NAMES, cwd: ROOT });

/** Every snapshot of the built-in rule tests, by source. */
function snapshots(): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const file of readdirSync(join(ROOT, 'rules/tests'))) {
    const doc = parseYaml(readFileSync(join(ROOT, 'rules/tests', file), 'utf8')) as { tests?: Array<{ source: string; steps?: Array<{ snapshot?: unknown }> }> };
    for (const t of doc.tests ?? []) {
      for (const s of t.steps ?? []) if (s.snapshot !== undefined) out.set(t.source, [...(out.get(t.source) ?? []), s.snapshot]);
    }
  }
  return out;
}

/** A small deterministic generator, so a failure names a case that can be run again. */
function generator(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

const ODD: unknown[] = [null, 0, 1, 1.5, -3, 2 ** 40, '', 'x', 'Ok', 'Error', 'offline', true, false, [], {}, [1, 'a'], { status: 'offline' }, '2026-11-20', '2026-11-21T01:00:00Z'];

/** The value with some fields dropped, nulled, made odd (ints as doubles, numbers as strings) or mutated further down. */
function mutate(v: unknown, rnd: () => number): unknown {
  const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
  if (Array.isArray(v)) return v.map((x) => (rnd() < 0.3 ? mutate(x, rnd) : x)).filter(() => rnd() > 0.1);
  if (v !== null && typeof v === 'object') {
    const o: Record<string, unknown> = { ...(v as Record<string, unknown>) };
    for (const k of Object.keys(o)) {
      const r = rnd();
      if (r < 0.08) delete o[k];
      else if (r < 0.16) o[k] = pick(ODD);
      else if (r < 0.22 && typeof o[k] === 'number') o[k] = Number.isInteger(o[k]) ? (o[k] as number) + 0.5 : Math.round(o[k] as number);
      else if (r < 0.26 && typeof o[k] === 'number') o[k] = String(o[k]);
      else if (r < 0.4) o[k] = mutate(o[k], rnd);
    }
    return o;
  }
  return rnd() < 0.3 ? pick(ODD) : v;
}

/** The records a rule sees in a snapshot: the list's items, or the snapshot itself. */
function recordsOf(snapshot: unknown): unknown[] {
  if (Array.isArray(snapshot)) return snapshot;
  for (const v of Object.values((snapshot ?? {}) as Record<string, unknown>)) if (Array.isArray(v)) return [snapshot, ...v];
  return [snapshot];
}

/** A CEL result to compare: its value when plain, its message when an error, else its kind. */
function outcome(r: CelResult): unknown {
  if (isCelError(r)) return { error: r.message };
  if (r === null || typeof r !== 'object') return r;
  return { object: Symbol.iterator in r ? 'iterable' : 'other' };
}

/** The bindings @bufbuild/cel sees without shared conversion (what the rule layer passed before). */
function plainBindings(rule: CompiledRule, input: RuleInput, item?: unknown): Record<string, unknown> {
  return { ...plainValues(rule, input), now: celTimestamp(input.now), ...(item === undefined ? {} : { item }) };
}

const NOW = Date.parse('2026-11-23T12:00:00Z');

describe('records converted once for all rules', () => {
  it('give every built-in rule the same outcome as plain records, on the rule tests snapshots and many altered ones', () => {
    const rnd = generator(7);
    let compared = 0;
    for (const [source, list] of snapshots()) {
      const mine = rules.filter((r) => r.source === source);
      for (let round = 0; round < 40; round++) {
        const before = mutate(list[Math.floor(rnd() * list.length)], rnd);
        const after = round % 4 === 0 ? list[Math.floor(rnd() * list.length)] : mutate(list[Math.floor(rnd() * list.length)], rnd);
        const afters = recordsOf(after);
        const befores = recordsOf(before);
        afters.forEach((rec, i) => {
          const input: RuleInput = {
            subject: `s/${i}`,
            site: rnd() < 0.8 ? { id: 3, domain: 'c.example', labels: { team: 'web' } } : null,
            before: rnd() < 0.3 ? null : (befores[i] ?? null),
            after: rec,
            changes: [{ path: 'x', before: befores[i] ?? null, after: rec }],
            past: rnd() < 0.5 ? null : mutate(rec, rnd),
            now: NOW + Math.floor(rnd() * 1e10) - 5e9,
            items: Array.isArray(after) ? after : afters,
          };
          // Rules in a shuffled order on one input: what one rule converted, the next reuses.
          for (const rule of [...mine].sort(() => rnd() - 0.5)) {
            const programs = [rule.condition, rule.resolveWhen, rule.absence?.within].filter((p) => p != null);
            for (const program of programs) {
              expect(outcome(program(bindingsOf(rule, input))), `${rule.name} on ${JSON.stringify(input)}`).toEqual(outcome(program(plainBindings(rule, input))));
              compared++;
            }
            for (const item of rule.absence ? (input.items ?? []) : []) {
              const shared = { ...snapshotOf(bindingsOf(rule, input)), item: celValue(item) };
              for (const program of [rule.absence!.match, rule.absence!.time]) {
                expect(outcome(program(shared)), `${rule.name} item ${JSON.stringify(item)}`).toEqual(outcome(program(plainBindings(rule, input, item))));
                compared++;
              }
            }
          }
        });
      }
    }
    expect(compared).toBeGreaterThan(4000);
  });

  it('read nested maps and lists, ints and doubles, missing keys and nulls as plain objects do', () => {
    const exprs = [
      "after.disk.percent > 90.0",
      "after.disk.percent > 90",
      "after.tags.exists(t, t == 'x')",
      "size(after.tags) == 2 && after.tags[1] == 'y'",
      "has(after.disk.free) || after.disk.free == null",
      "after.disk == {'percent': 93, 'free': null}",
      "after.missing.deeper == 1",
      "after.list.all(e, e.n >= 1)",
      "after.list.map(e, e.n)[0] == 1",
      "'percent' in after.disk",
      "after.disk['percent'] + 1.0",
      "after.count + 1",
      "string(after.count) + after.name",
      "type(after.disk) == map && type(after.list) == list",
      "after.list[5]",
      "after.name.startsWith('a') ? after.disk : after.list",
    ];
    const values: unknown[] = [
      { disk: { percent: 93, free: null }, tags: ['x', 'y'], list: [{ n: 1 }, { n: 2.5 }], count: 3, name: 'a.example' },
      { disk: { percent: '93' }, tags: [], list: [{}, { n: null }], count: 3.5, name: null },
      { disk: null, tags: null, list: null },
      {},
    ];
    for (const expr of exprs) {
      const program = compileCel(expr);
      for (const after of values) {
        expect(outcome(program({ after: celValue(after) })), `${expr} on ${JSON.stringify(after)}`).toEqual(outcome(program({ after })));
      }
    }
  });

  it('leave a dedup key of records as the same JSON text as before', () => {
    const rule = { ...rules.find((r) => r.kind === 'change')!, dedupKey: compileCel('after.list'), dedupKeySource: 'after.list' };
    const input: RuleInput = { subject: 's', site: null, before: null, after: { list: [{ id: 1, tags: ['a'] }, 2n] }, changes: [], now: NOW };
    const plain = rule.dedupKey(plainBindings(rule, input));
    expect(dedupValue(rule, input)).toEqual({ key: JSON.stringify(plain, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) });
  });

  it('do not let an absence rule leave its item behind for the next rule', () => {
    const absence = rules.find((r) => r.absence !== null)!;
    const other: CompiledRule = { ...rules.find((r) => r.absence === null)!, condition: compileCel('item == null') };
    const input: RuleInput = { subject: 's', site: null, before: null, after: [], changes: [], now: NOW, items: [{ state: 'Ok', created_at: '2026-11-23T11:00:00Z' }] };
    findLatest(absence, input);
    const plain = outcome(other.condition(plainBindings(other, input)));
    expect(plain).toHaveProperty('error');
    expect(outcome(other.condition(bindingsOf(other, input)))).toEqual(plain);
  });
});

/** The shared bindings' variables as an own-property object (they are read lazily through getters). */
function snapshotOf(b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['before', 'after', 'past', 'changes', 'site', 'params', 'subject', 'now']) out[k] = b[k];
  return out;
}
