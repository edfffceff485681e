import { hash } from 'node:crypto';
import {
  arrayKind,
  comparePrimitives,
  PRIMITIVES,
  RECORDS,
  resolveDiffOptions,
  sortedPrimitives,
  type CompiledDiffOptions,
  type VolatileNode,
} from './diff.js';
import type { DiffOptions } from './types.js';

/*
 * The canonical form is the snapshot as diff() sees it, written as JSON: two values have
 * the same canonical form exactly when diff() finds no change between them (see the
 * header of diff.ts). So:
 * - absent, `null` and `undefined` fields are left out; volatile paths are left out;
 * - object keys are sorted (UTF-16 code unit order);
 * - record arrays (objects with a unique number/string key) are sorted by key; primitive
 *   arrays are sorted (null < booleans < numbers < strings); other arrays keep their order,
 *   and there `null`/`undefined` items are written as `null` because position matters.
 * It is built by hand into one string (no sorted copies of objects, no JSON.stringify of
 * the whole value), then hashed once.
 */

type Rec = Record<string, unknown>;

/** The canonical JSON that contentHash() hashes: volatile and null fields removed, keys and unordered arrays sorted. */
export function canonicalJson(value: unknown, opts?: CompiledDiffOptions | DiffOptions): string {
  const c = resolveDiffOptions(opts);
  return write(value, c.root === null ? undefined : c.root, c.key);
}

/** Hex SHA-256 of canonicalJson(value): equal exactly when diff() reports no change. */
export function contentHash(value: unknown, opts?: CompiledDiffOptions | DiffOptions): string {
  // crypto.hash is the one-shot form of createHash(): same digest, no Hash object.
  return hash('sha256', canonicalJson(value, opts), 'hex');
}

function write(v: unknown, node: VolatileNode | undefined, key: string): string {
  switch (typeof v) {
    case 'string':
      return quote(v);
    case 'number':
      // JSON numbers are finite; String() matches JSON.stringify for them (-0 → "0").
      return Number.isFinite(v) ? '' + v : 'null';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      if (v === null) return 'null';
      if (Array.isArray(v)) return writeArray(v, node === undefined || node.item === null ? undefined : node.item, key);
      return writeObject(v as Rec, node, key);
    case 'bigint':
      return '' + v;
    default:
      return 'null'; // undefined (and non-JSON values)
  }
}

function writeObject(o: Rec, node: VolatileNode | undefined, key: string): string {
  const fields = node === undefined ? null : node.fields;
  // Object.keys: own keys only, so "__proto__" from JSON is just another key.
  const shape = shapeOf(Object.keys(o));
  const sorted = shape.sorted;
  const labels = shape.labels;
  let s = '{';
  for (let i = 0; i < sorted.length; i++) {
    const k = sorted[i]!;
    const v = o[k];
    if (v === null || v === undefined) continue;
    let child: VolatileNode | undefined;
    if (fields !== null) {
      child = fields.get(k);
      if (child !== undefined && child.leaf) continue;
    }
    s += (s.length === 1 ? labels[i]! : ',' + labels[i]!) + write(v, child, key);
  }
  return s + '}';
}

/**
 * An object's key list in sorted order with its JSON labels (`"key":`). Snapshots repeat a
 * few shapes thousands of times (every record of a list, every poll), so shapes are
 * memoized: a hit costs one Map lookup and a pointer compare per key instead of a sort and
 * a quote per key. Bounded, and keyed by content, so it never changes a result.
 */
interface Shape {
  keys: readonly string[];
  sorted: readonly string[];
  labels: readonly string[];
}

const shapes = new Map<string, Shape[]>();
let shapeCount = 0;
const MAX_SHAPES = 4096;
const MAX_SHAPES_PER_FIRST_KEY = 8;
const MAX_SHAPE_KEYS = 64; // bigger objects are dictionaries (e.g. by host name): not a shape

function shapeOf(keys: string[]): Shape {
  const n = keys.length;
  if (n > MAX_SHAPE_KEYS) return makeShape(keys);
  const first = n === 0 ? '' : keys[0]!;
  let list = shapes.get(first);
  if (list !== undefined) {
    search: for (let s = 0; s < list.length; s++) {
      const cached = list[s]!;
      const ks = cached.keys;
      if (ks.length !== n) continue;
      for (let i = 0; i < n; i++) if (ks[i] !== keys[i]) continue search;
      return cached;
    }
  }
  const shape = makeShape(keys);
  if (shapeCount >= MAX_SHAPES) {
    shapes.clear();
    shapeCount = 0;
    list = undefined;
  }
  if (list === undefined) {
    list = [];
    shapes.set(first, list);
  }
  if (list.length >= MAX_SHAPES_PER_FIRST_KEY) list.shift();
  else shapeCount++;
  list.push(shape);
  return shape;
}

function makeShape(keys: string[]): Shape {
  const sorted = sortKeys(keys.slice());
  return { keys, sorted, labels: sorted.map((k) => quote(k) + ':') };
}

function writeArray(arr: readonly unknown[], item: VolatileNode | undefined, key: string): string {
  const kind = arrayKind(arr, key);
  let items: readonly unknown[] = arr;
  if (kind === PRIMITIVES) {
    items = sortedPrimitives(arr);
  } else if (kind === RECORDS) {
    const sorted = (arr as readonly Rec[]).slice().sort((x, y) => comparePrimitives(x[key], y[key]));
    // With a repeated key diff() compares by position, so keep the original order then.
    let unique = true;
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i - 1]![key] === sorted[i]![key]) {
        unique = false;
        break;
      }
    }
    if (unique) items = sorted;
  }
  let s = '[';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) s += ',';
    s += write(items[i], item, key);
  }
  return s + ']';
}

/**
 * Sorts in place by UTF-16 code units, like the default sort() but without its generic
 * comparator: insertion sort is several times faster for the short key lists of objects.
 */
function sortKeys(keys: string[]): string[] {
  if (keys.length > 32) return keys.sort(); // insertion sort is quadratic
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

/** JSON string literal; plain strings (the vast majority) skip JSON.stringify. */
function quote(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return '"' + s + '"';
}
