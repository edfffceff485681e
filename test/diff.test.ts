import { describe, expect, it } from 'vitest';
import { canonicalJson, compileDiffOptions, contentHash, diff, DiffOptionsError, type Change } from '../src/diff/index.js';
import { mulberry32 } from '../src/simulator/random.js';

const health = () => ({
  site_id: 12,
  online: { status: 'online', label: 'Online' },
  integrity: { checked: '21 Nov 2026 13:55 UTC', status: 'ok', findings: [] as unknown[], problems: 0 },
});

describe('diff: objects', () => {
  it('reports a changed field with its dotted path', () => {
    const after = health();
    after.online.status = 'offline';
    expect(diff(health(), after)).toEqual<Change[]>([{ path: 'online.status', before: 'online', after: 'offline' }]);
  });

  it('returns no changes for deep-equal values that share no references', () => {
    expect(diff(health(), health())).toEqual([]);
  });

  it('reports an added field as a change from null and a removed field as a change to null', () => {
    expect(diff({ a: 1 }, { a: 1, b: { x: 1 } })).toEqual([{ path: 'b', before: null, after: { x: 1 } }]);
    expect(diff({ a: 1, b: 'gone' }, { a: 1 })).toEqual([{ path: 'b', before: 'gone', after: null }]);
  });

  it('treats a null field and a missing field as equal, in both directions', () => {
    expect(diff({ a: 1, bandwidth: null }, { a: 1 })).toEqual([]);
    expect(diff({ a: 1 }, { a: 1, bandwidth: null })).toEqual([]);
    expect(diff({ disk: { percent: 40 } }, { disk: { percent: 40, over: null } })).toEqual([]);
  });

  it('reports a field going from null to a value as a change from null, and back as a change to null', () => {
    expect(diff({ last_error: null }, { last_error: 'disk full' })).toEqual([{ path: 'last_error', before: null, after: 'disk full' }]);
    expect(diff({ last_error: 'disk full' }, { last_error: null })).toEqual([{ path: 'last_error', before: 'disk full', after: null }]);
  });

  it('treats an undefined field like a missing one', () => {
    expect(diff({ a: 1, b: undefined }, { a: 1 })).toEqual([]);
    expect(diff({ a: 1, b: undefined }, { a: 1, b: 2 })).toEqual([{ path: 'b', before: null, after: 2 }]);
  });

  it('reports a type change as one change at that path', () => {
    expect(diff({ bandwidth: { used: 1 } }, { bandwidth: 'n/a' })).toEqual([{ path: 'bandwidth', before: { used: 1 }, after: 'n/a' }]);
    expect(diff({ v: [1] }, { v: { 0: 1 } })).toEqual([{ path: 'v', before: [1], after: { 0: 1 } }]);
    expect(diff({ v: 1 }, { v: '1' })).toEqual([{ path: 'v', before: 1, after: '1' }]);
  });

  it('keeps an empty object distinct from a missing one', () => {
    expect(diff({}, { bandwidth: {} })).toEqual([{ path: 'bandwidth', before: null, after: {} }]);
  });

  it('compares top-level values and reports them at the empty path', () => {
    expect(diff(1, 2)).toEqual([{ path: '', before: 1, after: 2 }]);
    expect(diff(null, { a: 1 })).toEqual([{ path: '', before: null, after: { a: 1 } }]);
    expect(diff(undefined, null)).toEqual([]);
  });

  it('lists changes in the key order of after, then removed keys in the key order of before', () => {
    const before = { z: 1, gone1: 1, a: 1, gone2: 1 };
    const after = { new1: 1, a: 2, z: 2 };
    expect(diff(before, after).map((c) => c.path)).toEqual(['new1', 'a', 'z', 'gone1', 'gone2']);
  });
});

describe('diff: arrays of records', () => {
  const backups = () => [
    { id: 1, state: 'Ok', size_bytes: 100 },
    { id: 2, state: 'Creating', size_bytes: 0 },
    { id: 3, state: 'Ok', size_bytes: 300 },
  ];

  it('does not report reordered records', () => {
    expect(diff({ records: backups() }, { records: backups().reverse() })).toEqual([]);
  });

  it('reports an added record as one change carrying the whole item', () => {
    const after = [...backups(), { id: 12, state: 'Pending', size_bytes: 0 }];
    expect(diff({ records: backups() }, { records: after })).toEqual([
      { path: 'records[id=12]', before: null, after: { id: 12, state: 'Pending', size_bytes: 0 } },
    ]);
  });

  it('reports a removed record as one change carrying the whole item', () => {
    const after = backups().filter((b) => b.id !== 2);
    expect(diff({ records: backups() }, { records: after })).toEqual([
      { path: 'records[id=2]', before: { id: 2, state: 'Creating', size_bytes: 0 }, after: null },
    ]);
  });

  it('reports field-level changes inside a changed record, even when the list was reordered', () => {
    const after = backups().reverse();
    after[1]!.state = 'Ok';
    after[1]!.size_bytes = 200;
    expect(diff({ records: backups() }, { records: after })).toEqual([
      { path: 'records[id=2].state', before: 'Creating', after: 'Ok' },
      { path: 'records[id=2].size_bytes', before: 0, after: 200 },
    ]);
  });

  it('lists changed and added records in the order of after, then removed records', () => {
    const before = [{ id: 1, v: 1 }, { id: 2, v: 1 }, { id: 3, v: 1 }];
    const after = [{ id: 9, v: 1 }, { id: 3, v: 2 }, { id: 1, v: 1 }];
    expect(diff(before, after).map((c) => c.path)).toEqual(['[id=9]', '[id=3].v', '[id=2]']);
  });

  it('names records with string keys in the path', () => {
    expect(diff([{ id: 'abc', v: 1 }], [{ id: 'abc', v: 2 }])).toEqual([{ path: '[id=abc].v', before: 1, after: 2 }]);
  });

  it('matches records by the field named in opts.key', () => {
    const before = [{ keyword: 'hosting', position: 4 }, { keyword: 'vps', position: 9 }];
    const after = [{ keyword: 'vps', position: 12 }, { keyword: 'hosting', position: 4 }];
    expect(diff(before, after, { key: 'keyword' })).toEqual([{ path: '[keyword=vps].position', before: 9, after: 12 }]);
  });

  it('keys the items of a top-level list', () => {
    const before = [{ id: 12, domain: 'example.com', state: 'active' }, { id: 13, domain: 'example.org', state: 'active' }];
    const after = [{ id: 13, domain: 'example.org', state: 'active' }, { id: 12, domain: 'example.com', state: 'paused' }];
    expect(diff(before, after)).toEqual([{ path: '[id=12].state', before: 'active', after: 'paused' }]);
  });

  it('matches records inside records (nested keyed arrays)', () => {
    const before = { zones: [{ id: 1, records: [{ id: 10, value: 'a' }, { id: 11, value: 'b' }] }] };
    const after = { zones: [{ id: 1, records: [{ id: 11, value: 'B' }, { id: 10, value: 'a' }, { id: 12, value: 'c' }] }] };
    expect(diff(before, after)).toEqual([
      { path: 'zones[id=1].records[id=11].value', before: 'b', after: 'B' },
      { path: 'zones[id=1].records[id=12]', before: null, after: { id: 12, value: 'c' } },
    ]);
  });

  it('reports every record of a list that was empty as added', () => {
    expect(diff({ records: [] }, { records: [{ id: 1 }, { id: 2 }] })).toEqual([
      { path: 'records[id=1]', before: null, after: { id: 1 } },
      { path: 'records[id=2]', before: null, after: { id: 2 } },
    ]);
  });

  it('treats the number 12 and the string "12" as different keys', () => {
    expect(diff([{ id: 12 }], [{ id: '12' }])).toEqual([
      { path: '[id=12]', before: null, after: { id: '12' } },
      { path: '[id=12]', before: { id: 12 }, after: null },
    ]);
  });

  it('compares by position when a key repeats, because records cannot be matched', () => {
    const before = [{ id: 1, v: 'a' }, { id: 1, v: 'b' }, { id: 2, v: 'c' }];
    const after = [{ id: 2, v: 'c' }, { id: 1, v: 'a' }, { id: 1, v: 'b' }];
    expect(diff(before, after)).toEqual([
      { path: '[0].id', before: 1, after: 2 },
      { path: '[0].v', before: 'a', after: 'c' },
      { path: '[1].v', before: 'b', after: 'a' },
      { path: '[2].id', before: 2, after: 1 },
      { path: '[2].v', before: 'c', after: 'b' },
    ]);
  });
});

describe('diff: repeated keys', () => {
  it('compares by position when a key repeats only among the added records', () => {
    expect(diff([{ id: 1 }], [{ id: 2, v: 1 }, { id: 2, v: 2 }])).toEqual([
      { path: '[0].id', before: 1, after: 2 },
      { path: '[0].v', before: null, after: 1 },
      { path: '[1]', before: null, after: { id: 2, v: 2 } },
    ]);
  });

  it('hashes a list with a repeated key in its own order, as diff compares it', () => {
    const a = [{ id: 1, v: 'a' }, { id: 1, v: 'b' }, { id: 2, v: 'c' }];
    const b = [{ id: 2, v: 'c' }, { id: 1, v: 'a' }, { id: 1, v: 'b' }];
    expect(diff(a, b)).not.toEqual([]);
    expect(contentHash(a)).not.toBe(contentHash(b));
    expect(canonicalJson(b)).toBe('[{"id":2,"v":"c"},{"id":1,"v":"a"},{"id":1,"v":"b"}]');
  });
});

describe('diff: other arrays', () => {
  it('compares arrays of primitives as multisets: a reorder is no change', () => {
    expect(diff({ current: ['ns1.example.net', 'ns2.example.net'] }, { current: ['ns2.example.net', 'ns1.example.net'] })).toEqual([]);
    expect(diff({ over: [3, 'disk', true, null] }, { over: [null, true, 'disk', 3] })).toEqual([]);
  });

  it('reports a differing primitive array as one change with both whole arrays', () => {
    expect(diff({ over: ['disk'] }, { over: ['inodes', 'disk'] })).toEqual([{ path: 'over', before: ['disk'], after: ['inodes', 'disk'] }]);
    expect(diff({ over: [] }, { over: ['disk'] })).toEqual([{ path: 'over', before: [], after: ['disk'] }]);
  });

  it('counts repeats in primitive arrays', () => {
    expect(diff({ t: ['a', 'a', 'b'] }, { t: ['a', 'b', 'b'] })).toEqual([{ path: 't', before: ['a', 'a', 'b'], after: ['a', 'b', 'b'] }]);
    expect(diff({ t: [1, '1'] }, { t: ['1', 1] })).toEqual([]);
  });

  it('compares arrays of objects without a key by position', () => {
    const before = { findings: [{ x: 1 }, { x: 2 }] };
    const after = { findings: [{ x: 1 }, { x: 3 }, { x: 4 }] };
    expect(diff(before, after)).toEqual([
      { path: 'findings[1].x', before: 2, after: 3 },
      { path: 'findings[2]', before: null, after: { x: 4 } },
    ]);
    expect(diff(after, before)).toEqual([
      { path: 'findings[1].x', before: 3, after: 2 },
      { path: 'findings[2]', before: { x: 4 }, after: null },
    ]);
  });

  it('compares mixed arrays by position', () => {
    expect(diff({ m: [1, { a: 1 }, 'x'] }, { m: [1, { a: 2 }, 'y'] })).toEqual([
      { path: 'm[1].a', before: 1, after: 2 },
      { path: 'm[2]', before: 'x', after: 'y' },
    ]);
  });

  it('compares by position when one list is of records and the other is not', () => {
    expect(diff({ r: [{ id: 1, v: 1 }] }, { r: [{ v: 1 }] })).toEqual([{ path: 'r[0].id', before: 1, after: null }]);
  });

  it('names positions in nested arrays', () => {
    expect(diff({ grid: [[{ a: 1 }]] }, { grid: [[{ a: 2 }]] })).toEqual([{ path: 'grid[0][0].a', before: 1, after: 2 }]);
  });
});

describe('diff: volatile fields', () => {
  it('ignores a volatile field at the top level', () => {
    expect(diff({ busy: false, state: 'a' }, { busy: true, state: 'a' }, { volatile: ['busy'] })).toEqual([]);
    expect(diff({ state: 'a' }, { busy: true, state: 'a' }, { volatile: ['busy'] })).toEqual([]);
    expect(diff({ busy: true, state: 'a' }, { state: 'a' }, { volatile: ['busy'] })).toEqual([]);
  });

  it('ignores a nested volatile field and still reports its siblings', () => {
    const opts = { volatile: ['disk.measured_at'] };
    const before = { disk: { percent: 40, measured_at: '2026-11-21T12:00:00Z' } };
    const after = { disk: { percent: 91, measured_at: '2026-11-21T15:00:00Z' } };
    expect(diff(before, after, opts)).toEqual([{ path: 'disk.percent', before: 40, after: 91 }]);
  });

  it('ignores everything below a volatile object', () => {
    expect(diff({ stats: { a: 1, b: { c: 1 } } }, { stats: { a: 2, b: { c: 2 } } }, { volatile: ['stats'] })).toEqual([]);
  });

  it('ignores volatile fields inside the items of a top-level list', () => {
    const opts = compileDiffOptions({ volatile: ['[].updated_at'] });
    const before = [{ id: 1, state: 'ok', updated_at: 't1' }];
    const after = [{ id: 1, state: 'ok', updated_at: 't2' }];
    expect(diff(before, after, opts)).toEqual([]);
  });

  it('ignores volatile fields inside the records of a named array, matched by key', () => {
    const opts = compileDiffOptions({ volatile: ['records[].updated_at'] });
    const before = { records: [{ id: 1, value: 'a', updated_at: 't1' }, { id: 2, value: 'b', updated_at: 't1' }] };
    const after = { records: [{ id: 2, value: 'B', updated_at: 't2' }, { id: 1, value: 'a', updated_at: 't2' }] };
    expect(diff(before, after, opts)).toEqual([{ path: 'records[id=2].value', before: 'b', after: 'B' }]);
  });

  it('applies [] to the items of positional arrays too', () => {
    const opts = { volatile: ['findings[].seen_at'] };
    expect(diff({ findings: [{ x: 1, seen_at: 1 }] }, { findings: [{ x: 1, seen_at: 2 }] }, opts)).toEqual([]);
  });

  it('does not apply a volatile path anywhere else', () => {
    const opts = { volatile: ['disk.measured_at'] };
    expect(diff({ db: { measured_at: 1 } }, { db: { measured_at: 2 } }, opts)).toEqual([{ path: 'db.measured_at', before: 1, after: 2 }]);
    expect(diff({ measured_at: 1 }, { measured_at: 2 }, opts)).toEqual([{ path: 'measured_at', before: 1, after: 2 }]);
  });

  it('reports an added record whole, volatile fields included', () => {
    const opts = { volatile: ['[].updated_at'] };
    expect(diff([], [{ id: 1, updated_at: 't' }], opts)).toEqual([{ path: '[id=1]', before: null, after: { id: 1, updated_at: 't' } }]);
  });

  it('rejects volatile paths it cannot use, naming the path', () => {
    const bad = ['', 'a..b', 'a.', 'records[]', '[]', 'a[b]', 'x.[]y'];
    for (const path of bad) {
      expect(() => compileDiffOptions({ volatile: [path] }), path).toThrow(DiffOptionsError);
    }
    expect(() => compileDiffOptions({ volatile: ['records[]'] })).toThrow('volatile path "records[]" must end in a field name');
  });

  it('refuses to make the record key volatile', () => {
    expect(() => compileDiffOptions({ volatile: ['[].id'] })).toThrow('names the record key "id"');
    expect(() => compileDiffOptions({ key: 'uid', volatile: ['records[].uid'] })).toThrow('names the record key "uid"');
    expect(() => compileDiffOptions({ volatile: ['meta.id', '[].meta.id'] })).not.toThrow();
  });

  it('gives the same results for compiled and plain options', () => {
    const plain = { key: 'uid', volatile: ['[].t'] };
    const before = [{ uid: 1, t: 1, v: 1 }];
    const after = [{ uid: 1, t: 2, v: 2 }];
    expect(diff(before, after, plain)).toEqual(diff(before, after, compileDiffOptions(plain)));
    expect(contentHash(after, plain)).toBe(contentHash(after, compileDiffOptions(plain)));
  });
});

describe('diff: untrusted keys', () => {
  it('diffs a __proto__ key from JSON as data, without touching any prototype', () => {
    const before = JSON.parse('{"__proto__": {"polluted": 1}, "a": 1}') as unknown;
    const after = JSON.parse('{"__proto__": {"polluted": 2}, "a": 1}') as unknown;
    expect(diff(before, after)).toEqual([{ path: '__proto__.polluted', before: 1, after: 2 }]);
    expect(diff({ a: 1 }, after)).toEqual([{ path: '__proto__', before: null, after: { polluted: 2 } }]);
    expect(diff(after, { a: 1 })).toEqual([{ path: '__proto__', before: { polluted: 2 }, after: null }]);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    expect(canonicalJson(after)).toBe('{"__proto__":{"polluted":2},"a":1}');
    expect(contentHash(after)).not.toBe(contentHash({ a: 1 }));
  });

  it('does not mistake inherited members such as toString or constructor for fields', () => {
    expect(diff({}, { toString: 'x', constructor: 'y' })).toEqual([
      { path: 'toString', before: null, after: 'x' },
      { path: 'constructor', before: null, after: 'y' },
    ]);
    expect(diff({ hasOwnProperty: 1 }, {})).toEqual([{ path: 'hasOwnProperty', before: 1, after: null }]);
    expect(diff([{ id: 1, constructor: 'a' }], [{ id: 1 }])).toEqual([{ path: '[id=1].constructor', before: 'a', after: null }]);
  });

  it('ignores inherited enumerable properties, like the hash does', () => {
    const withProto = Object.assign(Object.create({ inherited: 1 }) as Record<string, unknown>, { a: 1 });
    expect(diff({ a: 1 }, withProto)).toEqual([]);
    expect(diff(withProto, { a: 1 })).toEqual([]);
    expect(contentHash(withProto)).toBe(contentHash({ a: 1 }));
  });

  it('diffs objects without a prototype like plain ones', () => {
    const a = Object.assign(Object.create(null) as Record<string, unknown>, { toString: 1, v: 1 });
    const b = Object.assign(Object.create(null) as Record<string, unknown>, { v: 2, __x: null });
    expect(diff(a, b)).toEqual([
      { path: 'v', before: 1, after: 2 },
      { path: 'toString', before: 1, after: null },
    ]);
    expect(diff({}, b)).toEqual([{ path: 'v', before: null, after: 2 }]);
  });

  it('still reports own fields of objects with a custom prototype', () => {
    const a = Object.assign(Object.create({ v: 1 }) as Record<string, unknown>, { w: 1 });
    expect(diff(a, { v: 1, w: 1 })).toEqual([{ path: 'v', before: null, after: 1 }]);
    expect(diff({ v: 1, w: 2 }, a)).toEqual([
      { path: 'w', before: 2, after: 1 },
      { path: 'v', before: 1, after: null },
    ]);
  });

  it('does not match records by an inherited key', () => {
    // "constructor" is inherited by every object, so these are not records keyed by it.
    expect(diff([{ v: 1 }], [{ v: 2 }], { key: 'constructor' })).toEqual([{ path: '[0].v', before: 1, after: 2 }]);
  });
});

describe('contentHash and canonicalJson', () => {
  it('writes sorted keys, drops null fields, sorts records by key and primitives by value', () => {
    const value = { b: [3, 'x', 1, null, true], a: null, c: [{ id: 2, z: 1, y: null }, { id: 1 }], d: [{ q: 2 }, { q: 1 }] };
    expect(canonicalJson(value)).toBe('{"b":[null,true,1,3,"x"],"c":[{"id":1},{"id":2,"z":1}],"d":[{"q":2},{"q":1}]}');
  });

  it('leaves volatile fields out of the canonical form', () => {
    const opts = compileDiffOptions({ volatile: ['disk.measured_at', '[].updated_at'] });
    expect(canonicalJson({ disk: { percent: 1, measured_at: 't' } }, opts)).toBe('{"disk":{"percent":1}}');
    expect(canonicalJson([{ id: 1, updated_at: 't' }], opts)).toBe('[{"id":1}]');
  });

  it('escapes strings as JSON does', () => {
    const s = 'quote " backslash \\ newline \n tab \t lone \ud800 emoji 😀';
    expect(JSON.parse(canonicalJson({ s }))).toEqual({ s });
    expect(canonicalJson({ [s]: 1 })).toBe(`{${JSON.stringify(s)}:1}`);
  });

  it('is the hex SHA-256 of the canonical form', async () => {
    const { createHash } = await import('node:crypto');
    const v = health();
    expect(contentHash(v)).toMatch(/^[0-9a-f]{64}$/);
    expect(contentHash(v)).toBe(createHash('sha256').update(canonicalJson(v)).digest('hex'));
  });

  it('does not change with key order, record order, null fields or volatile fields', () => {
    const opts = { volatile: ['[].updated_at'] };
    const a = [{ id: 1, name: 'a', tags: ['x', 'y'], updated_at: 't1' }, { id: 2, name: 'b', tags: [] }];
    const b = [{ tags: [], name: 'b', id: 2, note: null }, { updated_at: 't2', tags: ['y', 'x'], id: 1, name: 'a' }];
    expect(contentHash(a, opts)).toBe(contentHash(b, opts));
    expect(contentHash({ ...a[0], name: 'c' }, opts)).not.toBe(contentHash(a[0], opts));
  });

  it('keeps objects with many keys (dictionaries) in sorted order', () => {
    const keys = Array.from({ length: 100 }, (_, i) => `host${(i * 37) % 100}`);
    const dict = Object.fromEntries(keys.map((k) => [k, 1]));
    expect(Object.keys(JSON.parse(canonicalJson(dict)) as object)).toEqual([...keys].sort());
  });
});

// ---- property: contentHash(a) === contentHash(b) ⇔ diff(a, b) is empty -------------------

/** Seeded, so every run uses the same data (the simulator's PRNG). */
const prng = mulberry32;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function generator(rnd: () => number) {
  const int = (n: number) => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const fieldNames = ['status', 'value', 'name', 'updated_at', 'meta', 'records', 'tags', 'seen_at', 'x', '__proto__'];
  const prim = (): Json => pick<Json>([null, true, false, 0, 1, 2, -1, 0.5, 'a', 'b', '1', '', 'x"y']);

  function value(depth: number): Json {
    const r = rnd();
    if (depth >= 3 || r < 0.35) return prim();
    if (r < 0.6) return object(depth);
    if (r < 0.75) return records(depth);
    if (r < 0.87) return Array.from({ length: int(5) }, prim);
    return Array.from({ length: int(4) }, () => (rnd() < 0.7 ? object(depth + 1) : prim()));
  }
  function object(depth: number): { [k: string]: Json } {
    const o = Object.create(null) as { [k: string]: Json };
    const n = 1 + int(4);
    for (let i = 0; i < n; i++) o[pick(fieldNames)] = value(depth + 1);
    return JSON.parse(JSON.stringify(o)) as { [k: string]: Json }; // a plain JSON object, as from the API
  }
  function records(depth: number): Json[] {
    const ids = new Set<number | string>();
    const n = int(5);
    while (ids.size < n) ids.add(rnd() < 0.8 ? int(20) : `k${int(20)}`);
    const out = [...ids].map((id) => ({ ...object(depth + 1), id }) as Json);
    if (rnd() < 0.2 && out.length > 1) (out[1] as { id: Json }).id = (out[0] as { id: Json }).id; // a repeated key
    return out;
  }

  // Every container in a value, so a mutation can pick one.
  function containers(v: Json, acc: Array<Json[] | { [k: string]: Json }> = []) {
    if (v !== null && typeof v === 'object') {
      acc.push(v);
      for (const c of Array.isArray(v) ? v : Object.values(v)) containers(c, acc);
    }
    return acc;
  }

  /** Sets an own property, as JSON.parse would; `o[k] = v` with k "__proto__" would set the prototype. */
  function put(o: { [k: string]: Json }, k: string, v: Json): void {
    Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
  }

  function shuffle<T>(xs: T[]): void {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [xs[i], xs[j]] = [xs[j]!, xs[i]!];
    }
  }

  /** Applies one random mutation in place (some are no-ops under the diff semantics). */
  function mutate(root: Json): Json {
    const cs = containers(root);
    if (cs.length === 0 || rnd() < 0.05) return value(0);
    const c = pick(cs);
    if (Array.isArray(c)) {
      switch (int(7)) {
        case 0:
          return shuffle(c), root; // reorder: no change for records and primitives
        case 5:
          // swap two items: a change only for positional arrays (and records with a repeated key)
          if (c.length > 1) [c[0], c[c.length - 1]] = [c[c.length - 1]!, c[0]!];
          return root;
        case 6:
          // a trailing null: position matters in positional arrays, so this is a change there
          if (c[c.length - 1] === null) c.pop();
          else c.push(null);
          return root;
        case 1:
          return c.push(rnd() < 0.5 ? prim() : { ...object(2), id: int(25) }), root;
        case 2:
          return c.splice(int(c.length + 1), 1), root;
        case 3:
          if (c.length > 0) c[int(c.length)] = value(2);
          return root;
        default: {
          const item = c[int(c.length + 1)];
          if (item !== null && typeof item === 'object' && !Array.isArray(item)) put(item, 'updated_at', `t${int(1000)}`); // volatile
          return root;
        }
      }
    }
    const keys = Object.keys(c);
    switch (int(6)) {
      case 0: {
        // Rebuild with the keys in another order: never a change.
        const entries = Object.entries(c);
        shuffle(entries);
        for (const k of keys) delete c[k];
        for (const [k, v] of entries) put(c, k, v);
        return root;
      }
      case 1:
        if (keys.length > 0) put(c, pick(keys), null); // null and missing are equal; from a value it is a change
        return root;
      case 2:
        if (keys.length > 0) delete c[pick(keys)];
        return root;
      case 3:
        put(c, pick(fieldNames), value(2));
        return root;
      case 4:
        put(c, rnd() < 0.5 ? 'updated_at' : 'seen_at', `t${int(1000)}`);
        return root;
      default:
        if (keys.length > 0) put(c, pick(keys), prim());
        return root;
    }
  }

  return { value, mutate };
}

describe('contentHash agrees with diff', () => {
  it('gives equal hashes exactly when diff finds no change, over 5000 seeded random pairs', () => {
    const rnd = prng(20261121);
    const gen = generator(rnd);
    const opts = compileDiffOptions({ volatile: ['updated_at', '[].updated_at', 'records[].updated_at', 'meta.seen_at', 'x[].seen_at'] });
    let equal = 0;
    let different = 0;
    for (let i = 0; i < 5000; i++) {
      const a = gen.value(0);
      let b = JSON.parse(JSON.stringify(a)) as Json;
      const mutations = Math.floor(rnd() * 4);
      for (let m = 0; m < mutations; m++) b = gen.mutate(b);
      const changes = diff(a, b, opts);
      const sameHash = contentHash(a, opts) === contentHash(b, opts);
      const context = `pair ${i}:\n${JSON.stringify(a)}\n${JSON.stringify(b)}\n${JSON.stringify(changes)}`;
      expect(sameHash, context).toBe(changes.length === 0);
      expect(diff(b, a, opts).length === 0, context).toBe(changes.length === 0);
      if (sameHash) equal++;
      else different++;
    }
    // Both outcomes must be common, or the property is not being exercised.
    expect(equal).toBeGreaterThan(1000);
    expect(different).toBeGreaterThan(1000);
  });

  it('finds no change between a value and a deep copy of it', () => {
    const gen = generator(prng(7));
    for (let i = 0; i < 500; i++) {
      const a = gen.value(0);
      expect(diff(a, JSON.parse(JSON.stringify(a)))).toEqual([]);
    }
  });
});
