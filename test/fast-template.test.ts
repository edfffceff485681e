import { join } from 'node:path';
import { Liquid, type Template } from 'liquidjs';
import { describe, expect, it } from 'vitest';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { compileTemplate as compileChannelTemplate, renderTemplate } from '../src/notify/templates.js';
import { packageRoot } from '../src/paths.js';
import { compileTemplate, GIVE_UP, templateRenderer } from '../src/rules/fast-template.js';
import { liquid, liquidTemplates, loadRules } from '../src/rules/parse.js';
import { mulberry32 } from '../src/simulator/random.js';
import { siteEvent } from './events-fixture.js';

// The fast path (src/rules/fast-template.ts) renders part of Liquid itself and hands the
// rest to liquidjs. These tests pin that a text it renders is liquidjs's text, that it gives
// up wherever liquidjs would throw, and that it does render the built-in summaries.

type Outcome = { text: string } | { throws: string };

/** What liquidjs makes of a scope: its text, or the message it throws. */
function slow(t: Template[], scope: Record<string, unknown>, engine: Liquid = liquid): Outcome {
  try {
    return { text: String(engine.renderSync(t, scope)) };
  } catch (e) {
    return { throws: (e as Error).message };
  }
}

/** The same through the renderer the rules use (fast path, else liquidjs). */
function viaRenderer(t: Template[], scope: Record<string, unknown>): Outcome {
  try {
    return { text: liquidTemplates.render(t, scope) };
  } catch (e) {
    return { throws: (e as Error).message };
  }
}

/** A value's name in a failure message. */
function label(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x === undefined ? '(undefined)' : typeof x === 'number' && !Number.isFinite(x) ? String(x) : x)) ?? String(v);
  } catch {
    return Object.prototype.toString.call(v);
  }
}

const TIMES = ['2026-11-20T10:00:00Z', '2026-11-23T12:00:00.000Z', '2026-12-01', '2025-01-01T00:00:00+02:00', 'not a time', ''];

/** Leaf values: what the fast path prints, what it must give up on, and what only liquidjs reads. */
const VALUES: unknown[] = [
  'resolved', 'firing', 'expired', 'blocked', 'Ok', '', ' ', ' \n\t', 'x', 'é😀 ünïcödé', '<b>&"\'</b>', '{{ a }}', ...TIMES,
  0, -1, 1, 1.5, 42, 1e21, -0, 1e-7, 2 ** 53, NaN, Infinity, 7n,
  true, false, null, undefined,
  {}, { id: 1 }, { name: 'n', state: 'Ok' }, { size: 3, first: 'f' }, { length: 2 }, { toLiquid: () => 'drop' },
  [], ['disk', 'inodes'], ['a'], [1, null, true, 'x'], [{}], [['a', 'b'], 'c'], ['x'.repeat(10)],
  new Date(0), new Map([['a', 1]]), Object.create(null) as unknown, () => 'f',
];

/** A trie of the variable paths a template reads (`after.online.status` …). */
interface Shape {
  [key: string]: Shape;
}

function shapeOf(t: Template[]): Shape {
  const root: Shape = {};
  for (const segments of liquid.globalVariableSegmentsSync(t)) {
    let node = root;
    for (const s of segments) node = node[String(s)] ??= {};
  }
  return root;
}

/**
 * A scope for the paths of `shape`: mostly objects along the paths with a random value at
 * each end, sometimes a key left out, or a value (null, text, a list…) where an object was
 * expected.
 */
function scopeFor(shape: Shape, rand: () => number): Record<string, unknown> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const fill = (node: Shape, key: string): unknown => {
    if (key === 'now') return pick(TIMES);
    if (key === 'status' && rand() < 0.5) return pick(['resolved', 'firing', null]);
    const keys = Object.keys(node);
    if (keys.length === 0 || rand() < 0.2) return pick(VALUES);
    const out: Record<string, unknown> = {};
    for (const k of keys) if (rand() > 0.06) out[k] = fill(node[k]!, k);
    return out;
  };
  const scope: Record<string, unknown> = {};
  for (const k of Object.keys(shape)) if (rand() > 0.03) scope[k] = fill(shape[k]!, k);
  return scope;
}

/** The ends of a shape's paths. */
function leaves(shape: Shape, prefix: string[] = []): string[][] {
  return Object.entries(shape).flatMap(([k, s]) => (Object.keys(s).length === 0 ? [[...prefix, k]] : leaves(s, [...prefix, k])));
}

/** A copy of `scope` with the value at `path` replaced (objects made along the way). */
function withValue(scope: Record<string, unknown>, path: string[], v: unknown): Record<string, unknown> {
  const [head, ...rest] = path;
  const here = scope[head!];
  const inner = rest.length === 0 ? v : withValue(typeof here === 'object' && here !== null && !Array.isArray(here) ? (here as Record<string, unknown>) : {}, rest, v);
  return { ...scope, [head!]: inner };
}

describe('the Liquid fast path', () => {
  it('renders every built-in summary and description as liquidjs does, on generated scopes, and compiles all but the one with a loop', () => {
    const root = packageRoot();
    const rules = loadRules(join(root, 'rules'), [], { sourceNames: SOURCE_NAMES, cwd: root });
    const templates: Array<[string, Template[]]> = rules.flatMap((r) => [
      [`${r.name} summary`, r.summary] as [string, Template[]],
      ...(r.description ? [[`${r.name} description`, r.description] as [string, Template[]]] : []),
    ]);
    const notCompiled = templates.filter(([, t]) => liquidTemplates.compiled(t) === null).map(([name]) => name);
    // `{% for %}` is outside the subset; every other built-in template is compiled.
    expect(notCompiled).toEqual(['local-profile-changed description']);
    expect(templates.length).toBeGreaterThan(60);

    const rand = mulberry32(20261127); // seeded: a failure is the same failure the next time
    let compared = 0;
    let fastTexts = 0;
    const check = (name: string, t: Template[], scope: Record<string, unknown>): void => {
      const want = slow(t, scope);
      const fast = liquidTemplates.compiled(t);
      const got = fast === null ? GIVE_UP : fast(scope);
      if (got !== GIVE_UP) {
        expect({ text: got }, `fast ${name} on ${label(scope)}`).toEqual(want);
        fastTexts++;
      }
      expect(viaRenderer(t, scope), `${name} on ${label(scope)}`).toEqual(want);
      compared++;
    };
    for (const [name, t] of templates) {
      const shape = shapeOf(t);
      for (let i = 0; i < 400; i++) check(name, t, scopeFor(shape, rand));
      // Every value at every end of a path, the rest of the scope an ordinary one.
      const typical = scopeFor(shape, () => 0.5);
      for (const path of leaves(shape)) for (const v of VALUES) check(name, t, withValue(typical, path, v));
    }
    expect(compared).toBeGreaterThan(40_000);
    // Not vacuous: a good part of the renders are the fast path's own (the rest are mostly
    // values it gives up on by design: objects printed, NaN, dates, missing keys)…
    expect(fastTexts).toBeGreaterThan(compared / 4);
    // …and every compiled template renders an ordinary scope itself (text at every end).
    for (const [name, t] of templates) {
      const fast = liquidTemplates.compiled(t);
      if (fast === null) continue;
      const shape = shapeOf(t);
      const ordinary = leaves(shape).reduce((s, path) => withValue(s, path, path.at(-1) === 'now' ? TIMES[0] : 'v'), {});
      expect({ text: fast(ordinary) }, name).toEqual(slow(t, ordinary));
    }
  });

  it('renders each operator and filter as liquidjs does, for every kind of value and pair of kinds', () => {
    const sources = [
      '{{ a }}', '{{ a.b }}', '{{ a.size }}', '{{ a | size }}', '{{ a | join }}', "{{ a | join: ', ' }}", '{{ a | upcase }}', '{{ a | downcase }}',
      '{{ a | default: b }}', "{{ a | default: 'd' }}", '{{ a | age: b }}', '{{ a | days_until: b }}',
      '{% if a %}T{% else %}F{% endif %}', '{% unless a %}U{% elsif b %}B{% else %}E{% endunless %}',
      '{% if a == b %}T{% else %}F{% endif %}', '{% if a != b %}T{% else %}F{% endif %}', "{% if a == 'x' %}T{% endif %}", '{% if 1 == a %}T{% endif %}',
      '{% if a == nil %}T{% endif %}', '{% if a != null %}T{% endif %}', '{% if a == blank %}T{% endif %}', '{% if blank != a %}T{% endif %}',
      '{% if a == empty %}T{% endif %}', '{% if a == true %}T{% endif %}', '{% if a == false %}T{% endif %}',
      '{% if a and b %}T{% endif %}', '{% if a or b %}T{% endif %}', '{% if a and b or a %}T{% endif %}', '{% if a == b or b and a != nil %}T{% endif %}',
    ];
    let compared = 0;
    let fastTexts = 0;
    for (const src of sources) {
      const t = liquid.parse(src);
      const fast = liquidTemplates.compiled(t);
      expect(fast, src).not.toBeNull();
      for (const a of VALUES) {
        for (const b of VALUES) {
          const scope: Record<string, unknown> = { a, b };
          const want = slow(t, scope);
          const got = fast!(scope);
          if (got !== GIVE_UP) {
            expect({ text: got }, `${src} with a=${label(a)} b=${label(b)}`).toEqual(want);
            fastTexts++;
          }
          compared++;
        }
      }
    }
    expect(fastTexts).toBeGreaterThan(compared / 3);
  });

  it('renders each feature of the subset exactly as liquidjs does', () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['plain text, <b>&amp;</b> "as is"', {}, 'plain text, <b>&amp;</b> "as is"'],
      ['', {}, ''],
      ['a  \n {{- x -}} \n b {%- if x -%}\n c {%- endif %}', { x: 'X' }, 'aXbc'],
      ['{{ a.b.c }}|{{ a["b"].c }}|{{ a.b["c"] }}', { a: { b: { c: 'deep' } } }, 'deep|deep|deep'],
      ['[{{ a.b.c }}]', { a: null }, '[]'],
      ['[{{ a.b }}]', { a: { b: null } }, '[]'],
      ['{{ n }} {{ z }} {{ big }} {{ f }} {{ t }} {{ no }}', { n: -1, z: -0, big: 1e21, f: 1.5, t: true, no: false }, '-1 0 1e+21 1.5 true false'],
      ['{{ s }}', { s: '<&"\'> é😀' }, '<&"\'> é😀'],
      ['{{ o.size }} {{ o.first }}', { o: { size: 3, first: 'f' } }, '3 f'],
      ["{{ xs | join: ', ' }}", { xs: ['a', 1, null, true] }, 'a, 1, , true'],
      ['{{ xs | join }}|{{ s | join: "-" }}|{{ nothing | join: "," }}', { xs: ['a', 'b'], s: 'one', nothing: null }, 'a b|one|'],
      ['{{ s | size }} {{ xs | size }} {{ n | size }} {{ nothing | size }} {{ t | size }}', { s: 'abc', xs: [1, 2], n: 5, nothing: null, t: true }, '3 2 0 0 0'],
      ['{{ s | upcase }} {{ s | downcase }} {{ n | upcase }} {{ nothing | upcase }}', { s: 'Straße ÉI', n: 1.5, nothing: null }, 'STRASSE ÉI straße éi 1.5 '],
      ['{{ a | default: "x" }}|{{ b | default: "x" }}|{{ c | default: 0 }}|{{ d | default: e }}|{{ f | default: "x" }}', { a: '', b: false, c: null, d: [], e: 'E', f: 0 }, 'x|x|0|E|0'],
      ['{{ t | age: now }} / {{ d | days_until: now }} / {{ bad | age: now }}', { t: '2026-11-19T08:30:00Z', d: '2026-12-01', bad: 'later', now: '2026-11-20T10:00:00Z' }, '25 h 30 min / 10 / later'],
      ["{% if s == 'resolved' %}R{% elsif s == 'firing' %}F{% else %}E{% endif %}", { s: 'firing' }, 'F'],
      ["{% if s == 'resolved' %}R{% elsif s == 'firing' %}F{% else %}E{% endif %}", { s: null }, 'E'],
      ['{% if a %}T{% endif %}{% if b %}T{% endif %}{% if c %}T{% endif %}{% if d %}T{% endif %}{% if e %}T{% endif %}', { a: 0, b: '', c: [], d: null, e: false }, 'TTT'],
      ['{% unless a %}U{% elsif b %}B{% else %}E{% endunless %}', { a: true, b: 1 }, 'B'],
      ['{% unless a %}U{% else %}E{% endunless %}', { a: null }, 'U'],
      ['{% if n == 1 %}1{% endif %}{% if n == "1" %}s{% endif %}{% if n != 2 %}!2{% endif %}{% if 1 == n %}L{% endif %}', { n: 1 }, '1!2L'],
      ['{% if a == nil %}n{% endif %}{% if a == null %}N{% endif %}{% if b != null %}B{% endif %}{% if nil == a %}L{% endif %}', { a: null, b: false }, 'nNBL'],
      ['{% if o == null %}null{% else %}object{% endif %}', { o: {} }, 'object'],
      ['{% if t == true %}T{% endif %}{% if f == false %}F{% endif %}{% if n == false %}0{% endif %}', { t: true, f: false, n: 0 }, 'TF'],
      ['{% if a == blank %}a{% endif %}{% if b == blank %}b{% endif %}{% if c == blank %}c{% endif %}{% if d == blank %}d{% endif %}{% if e == blank %}e{% endif %}{% if f != blank %}f{% endif %}{% if g == blank %}g{% endif %}', { a: ' \n', b: false, c: null, d: [], e: {}, f: 0, g: true }, 'abcdef'],
      ['{% if a == empty %}a{% endif %}{% if b == empty %}b{% endif %}{% if c == empty %}c{% endif %}{% if d == empty %}d{% endif %}{% if e == empty %}e{% endif %}', { a: '', b: ' ', c: null, d: [], e: {} }, 'ade'],
      ['{% if a == b %}same{% else %}not{% endif %}', { a: 'x', b: 'x' }, 'same'],
      ['{% if a == b %}same{% else %}not{% endif %}', { a: {}, b: {} }, 'not'],
      ['{% if xs == "a" %}eq{% else %}ne{% endif %}', { xs: ['a'] }, 'ne'],
      // Right to left, no precedence: a and (b or c), not (a and b) or c.
      ['{% if a and b or c %}yes{% else %}no{% endif %}', { a: false, b: false, c: true }, 'no'],
      ['{% if a or b and c %}yes{% else %}no{% endif %}', { a: true, b: false, c: false }, 'yes'],
      ['{% if a == 1 or b == 2 and c != nil %}yes{% else %}no{% endif %}', { a: 1, b: 3, c: null }, 'yes'],
      ['{% if a and nil %}1{% endif %}{% if a and blank %}2{% endif %}{% if a and empty %}3{% endif %}', { a: true }, '23'],
    ];
    for (const [src, scope, text] of cases) {
      const t = liquid.parse(src);
      const fast = liquidTemplates.compiled(t);
      expect(fast, src).not.toBeNull();
      expect(slow(t, scope), src).toEqual({ text });
      expect(fast!(scope), src).toBe(text);
    }
  });

  it('gives up wherever liquidjs throws or reads a value its own way, and liquidjs renders it', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['{{ a }}', {}],
      ['{{ a.b }}', { a: {} }],
      ['{{ a.b }}', { a: { b: undefined } }],
      ['{{ a.b.c }}', { a: { b: 5 } }],
      ['{% if a %}x{% endif %}', {}],
      ['{% if a == 1 or b %}x{% endif %}', { a: 1 }],
      ['{% if a == nil %}x{% endif %}', {}],
      ['{{ toString }}', {}],
      ['{{ a.constructor }}', { a: {} }],
      ['{% if a.__proto__ %}x{% endif %}', { a: {} }],
      ['{{ s.size }} {{ s.length }}', { s: 'abc' }],
      ['{{ xs.first }} {{ xs.size }}', { xs: ['a', 'b'] }],
      ['{{ o }}', { o: { a: 1 } }],
      ['{{ xs }}', { xs: ['a', 'b'] }],
      ['{{ d }}', { d: new Date(0) }],
      ['{{ n }}', { n: 7n }],
      ['{{ n }}', { n: NaN }],
      ['{{ f }}', { f: () => 'called' }],
      ['{{ o.x }}', { o: { toLiquid: () => ({ x: 'drop' }) } }],
      ['{{ m.a }}', { m: new Map([['a', 1]]) }],
      ['{% if a == b %}same{% endif %}', { a: ['x'], b: ['x'] }],
      ['{% if a == b %}same{% endif %}', { a: { equals: () => true, gt: () => false, geq: () => false, lt: () => false, leq: () => false }, b: 1 }],
      ['{{ xs | join: "," }}', { xs: [{}, 'a'] }],
      ['{{ xs | join: "," }}', { xs: [['a', 'b']] }],
      ['{{ o | size }}', { o: { length: 4 } }],
      ['{{ t | age: now }}', { t: '2026-11-19T08:30:00Z' }],
      ['{{ t | age: now }}', { t: { at: 1 }, now: '2026-11-20T10:00:00Z' }],
      // liquidjs's memory limit (1,000,000) is charged by join, upcase and downcase together.
      ['{{ xs | join: "," }}', { xs: ['x'.repeat(600_000), 'y'.repeat(600_000)] }],
      ['{{ s | upcase }}{{ s | downcase }}', { s: 'x'.repeat(600_000) }],
    ];
    for (const [src, scope] of cases) {
      const t = liquid.parse(src);
      const fast = liquidTemplates.compiled(t);
      expect(fast, src).not.toBeNull();
      expect(fast!(scope), `${src} on ${label(scope)}`).toBe(GIVE_UP);
      expect(viaRenderer(t, scope), src).toEqual(slow(t, scope));
    }
    // The limit is liquidjs's: it throws, and so does the renderer, with its message.
    expect(viaRenderer(liquid.parse('{{ s | upcase }}{{ s | downcase }}'), { s: 'x'.repeat(600_000) })).toEqual({ throws: expect.stringMatching(/memory alloc limit exceeded/) as unknown as string });
    // A property of a string: liquidjs's own reading (size and length), not an error.
    expect(viaRenderer(liquid.parse('{{ s.size }} {{ s.length }}'), { s: 'abc' })).toEqual({ text: '3 3' });
  });

  it('does not compile what is outside the subset, and liquidjs still renders it', () => {
    const scope = { a: 'x', xs: ['p', 'q'], n: 3, t: '2026-11-20T10:00:00Z' };
    const outside = [
      '{% for x in xs %}{{ x }}{% endfor %}',
      '{% assign y = a %}{{ y }}',
      '{{ t | date: "%Y" }}',
      '{{ a | append: "!" }}',
      '{{ xs | join: a }}',
      '{{ a | default: "d", allow_false: true }}',
      "{{ 'literal' }}",
      '{{ xs[0] }}',
      '{{ xs[n] }}',
      '{% if n > 1 %}big{% endif %}',
      "{% if xs contains 'p' %}has{% endif %}",
      '{% if not a %}no{% endif %}',
      '{% if a | size %}x{% endif %}',
      '{% if nil == blank %}x{% endif %}',
      '{% case a %}{% when "x" %}X{% endcase %}',
      '{% comment %}c{% endcomment %}x',
      '{% raw %}{{ a }}{% endraw %}',
      '{% capture c %}{{ a }}{% endcapture %}{{ c }}',
      '{% increment k %}',
      '{% echo a %}',
    ];
    for (const src of outside) {
      const t = liquid.parse(src);
      expect(liquidTemplates.compiled(t), src).toBeNull();
      expect(viaRenderer(t, { ...scope }), src).toEqual(slow(t, { ...scope }));
    }
    expect(viaRenderer(liquid.parse('{% for x in xs %}{{ x }}{% endfor %}'), scope)).toEqual({ text: 'pq' });
  });

  it('compiles only for an engine with the rules engine\'s semantics, and only the filters that engine has built in', () => {
    const src = '{{ a | join: ", " }}';
    const strict = { strictVariables: true, ownPropertyOnly: true };
    expect(compileTemplate(liquid.parse(src), liquid)).not.toBeNull();
    for (const opts of [{ ...strict, strictVariables: false }, { ...strict, ownPropertyOnly: false }, { ...strict, jsTruthy: true }, { ...strict, lenientIf: true }, { ...strict, keepOutputType: true }, { ...strict, outputEscape: 'escape' as const }]) {
      const engine = new Liquid(opts);
      expect(compileTemplate(engine.parse(src), engine), JSON.stringify(opts)).toBeNull();
    }
    // A filter registered under a built-in's name is that filter, not the built-in.
    const own = new Liquid(strict);
    own.registerFilter('join', (v: unknown) => `joined ${String(v)}`);
    expect(compileTemplate(own.parse(src), own)).toBeNull();
    // A filter of the engine is called only when the caller says it is pure; one that throws gives up.
    const shout = (v: unknown): unknown => {
      if (v === 'boom') throw new Error('no shouting');
      return `${String(v)}!`;
    };
    own.registerFilter('shout', shout);
    const t = own.parse('{{ a | shout }}');
    expect(compileTemplate(t, own)).toBeNull();
    const fast = compileTemplate(t, own, [shout])!;
    expect(fast({ a: 'hi' })).toBe('hi!');
    expect(fast({ a: 'boom' })).toBe(GIVE_UP);
    const renderer = templateRenderer(own, [shout]);
    expect(renderer.render(t, { a: 'hi' })).toBe('hi!');
    expect(() => renderer.render(t, { a: 'boom' })).toThrow(/no shouting/);
  });


  it('renders a chat channel\'s template through the fast path, and a missing label still throws liquidjs\'s error', () => {
    const chat = compileChannelTemplate('{{ data.domain }} — {{ data.name }}: {{ data.summary | upcase }} ({{ data.status | default: "change" }}){% if data.labels.team %} team {{ data.labels.team }}{% endif %}');
    expect(liquidTemplates.compiled(chat)).not.toBeNull();
    const e = siteEvent('k1', 7, { summary: 'Disk <full> & "slow"', status: 'firing' });
    expect(renderTemplate(chat, { ...e, data: { ...e.data, labels: { team: 'ops' } } })).toBe('site7.example.com — backup.failed: DISK <FULL> & "SLOW" (firing) team ops');
    // No status (a change event): null, so the default; labels always there, possibly empty.
    expect(() => renderTemplate(chat, siteEvent('k2', 7))).toThrow(/undefined variable: data\.labels\.team/);
    const plain = compileChannelTemplate('{{ data.summary }} [{{ data.status | default: "change" }}]');
    expect(renderTemplate(plain, siteEvent('k2', 7, { summary: 's' }))).toBe('s [change]');
    // A webhook body with json: not compiled, liquidjs renders it.
    const body = compileChannelTemplate('{"text": {{ data.summary | json }}, "site": {{ data.site_id }}}');
    expect(liquidTemplates.compiled(body)).toBeNull();
    expect(renderTemplate(body, siteEvent('k3', 9, { summary: 'a "b"' }))).toBe('{"text": "a \\"b\\"", "site": 9}');
  });
});
