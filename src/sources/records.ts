import { isRecord } from '../is-record.js';
import type { SourceDef } from './types.js';

/** The `listField` paths of a source (none: the value itself is the list). */
function listPaths(source: SourceDef): readonly string[] | null {
  const lf = source.listField;
  if (lf === undefined) return null;
  return typeof lf === 'string' ? [lf] : lf;
}

/**
 * The records of a snapshot value, following `listField` (dotted paths, `[]` flattening a
 * list of lists, several paths concatenated). A missing list is empty; anything that is
 * not a list where one is expected is reported through `fail` (default: ignored).
 */
export function recordsAt(source: SourceDef, value: unknown, fail: (message: string) => void = () => {}): unknown[] {
  const paths = listPaths(source);
  if (paths === null) {
    if (Array.isArray(value)) return value;
    fail(`expected a list, got ${kindOf(value)}`);
    return [];
  }
  if (!isRecord(value)) {
    fail(`expected an object with "${paths.join('", "')}", got ${kindOf(value)}`);
    return [];
  }
  const out: unknown[] = [];
  for (const path of paths) walk(value, path.split('.'), path, out, fail);
  return out;
}

function walk(value: unknown, steps: string[], path: string, out: unknown[], fail: (m: string) => void): void {
  if (value === null || value === undefined) return; // absent: no records (a null reading)
  const [step, ...rest] = steps;
  if (step === undefined) {
    if (Array.isArray(value)) out.push(...value);
    else fail(`"${path}" is ${kindOf(value)}, not a list`);
    return;
  }
  const flatten = step.endsWith('[]');
  const field = flatten ? step.slice(0, -2) : step;
  if (!isRecord(value)) return fail(`"${path}": expected an object at "${field}", got ${kindOf(value)}`);
  const next = value[field];
  if (!flatten) return walk(next, rest, path, out, fail);
  if (next === null || next === undefined) return;
  if (!Array.isArray(next)) return fail(`"${path}": "${field}" is ${kindOf(next)}, not a list`);
  for (const item of next) walk(item, rest, path, out, fail);
}

/** How a value is named in messages. */
export function kindOf(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v;
}

/** Volatile paths of a list source, relative to one record (`[].updated_at` → `updated_at`). */
export function recordVolatile(def: SourceDef): string[] {
  if (def.key === undefined) return [...def.volatile];
  const prefixes = (listPaths(def) ?? ['']).map((p) => `${p}[].`);
  const out: string[] = [];
  for (const v of def.volatile) {
    const prefix = prefixes.find((p) => v.startsWith(p));
    if (prefix !== undefined) out.push(v.slice(prefix.length));
  }
  return out;
}
