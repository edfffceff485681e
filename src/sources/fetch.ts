import type { ApiClient } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { isRecord } from '../is-record.js';
import { pathOf } from './registry.js';
import type { EntityRef } from './types.js';

/**
 * Fetch one entity and check the reply has the shape the source needs. Bad API data
 * becomes an ApiError `bad_response` naming the endpoint and what was wrong, so the poll
 * fails and the previous snapshot stays (invariant 3), rather than being diffed as a change.
 */
export async function fetchEntity(client: ApiClient, ref: EntityRef): Promise<unknown> {
  const { source } = ref;
  const path = pathOf(source, ref.siteId);
  const data = source.paged ? await client.list(path, source.query, source.pageSize) : await client.get(path, source.query);
  return checkShape(ref, path, data);
}

/** Validate a reply against the source's expectations; returns the snapshot value. */
export function checkShape(ref: EntityRef, path: string, data: unknown): unknown {
  const { source } = ref;
  const fail = (message: string): never => {
    throw new ApiError({ code: 'bad_response', endpoint: path, message });
  };
  let value = data;
  if (source.listField !== undefined) {
    if (!isRecord(value)) return fail(`expected an object with "${source.listField}", got ${kind(value)}`);
    value = value[source.listField];
  }
  if (source.key === undefined) {
    if (!isRecord(value)) fail(`expected an object, got ${kind(value)}`);
    return data;
  }
  if (!Array.isArray(value)) return fail(`expected a list, got ${kind(value)}`);
  const seen = new Set<string>();
  value.forEach((item, i) => {
    if (!isRecord(item)) return fail(`item ${i} is ${kind(item)}, not an object`);
    const k = item[source.key!];
    if (typeof k !== 'number' && typeof k !== 'string') return fail(`item ${i} has no "${source.key}"`);
    const ks = String(k);
    if (seen.has(ks)) return fail(`"${source.key}" ${ks} appears twice`);
    seen.add(ks);
  });
  return data;
}


function kind(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v;
}
