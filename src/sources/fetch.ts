import type { Ticket } from '../api/budget.js';
import type { ApiClient, Validators } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { isRecord } from '../is-record.js';
import { EntityTable } from './entity-table.js';
import { keptRecords, TopRead } from './newest-first.js';
import { recordsAt, kindOf } from './records.js';
import { pathOf } from './registry.js';
import type { EntityRef, SourceDef } from './types.js';

/** What one fetch gave: new data, "unchanged since last time" (304), or "does not apply" (409 off the CDN). */
export type FetchResult = { kind: 'data'; data: unknown } | { kind: 'not_modified' } | { kind: 'not_applicable'; code: string };

/** Per-source options from config that change what is fetched (`files.paths`), for one site. */
export interface SourceOptions {
  paths?: readonly string[];
}

/** The options of a source for a site (null: the account). */
export type OptionsOf = (source: string, siteId: number | null) => SourceOptions;

/** What else a Fetcher may read besides the API. */
export interface FetcherDeps {
  /** Per-source options from config (`files.paths`); default none. */
  options?: OptionsOf;
  /** The stored snapshot value of an entity (undefined: none): newest-first lists stop at what it holds. */
  stored?: (ref: EntityRef) => unknown | Promise<unknown>;
  /** Told once per source when a newest-first list turns out to be served oldest first. */
  onOldestFirst?: (source: SourceDef) => void;
}

/**
 * Fetches entities. Remembers the ETag / Last-Modified of each entity's last good reply
 * (in memory: after a restart the first poll is unconditional) and sends them back, so
 * an unchanged resource costs the server a 304 and costs us no parsing. From a server that
 * sends neither, it remembers a digest of the reply instead: the same bytes again cost the
 * transfer, but no parsing either (ApiClient.getIfChanged).
 */
export class Fetcher {
  /**
   * The validators of each entity: the ETag alone (the usual case: one string the reply
   * made), else packed as `etag\nlast-modified`, or `\0digest` from a server without either.
   */
  private readonly validators = new EntityTable<string>();
  private readonly options: OptionsOf;
  private readonly warnedOldestFirst = new Set<string>();

  constructor(
    private readonly client: ApiClient,
    private readonly deps: FetcherDeps = {},
  ) {
    this.options = deps.options ?? (() => ({}));
  }

  /**
   * Fetch one entity and check the reply has the shape the source needs. Bad API data
   * becomes an ApiError `bad_response` naming the endpoint and what was wrong, so the poll
   * fails and the previous snapshot stays (invariant 3), rather than being diffed as a change.
   */
  async fetch(ref: EntityRef, ticket?: Ticket): Promise<FetchResult> {
    const { source } = ref;
    const path = pathOf(source, ref.siteId, ref.recordKey);
    try {
      if (source.each) return { kind: 'data', data: checkShape(ref, path, await this.fetchEach(ref, path, ticket)) };
      const prev = this.recall(ref);
      let value: unknown;
      let validators: Validators;
      let kinds = true;
      if (source.paged) {
        const top = this.topRead(ref);
        const r = await this.client.listIfChanged(path, source.query, source.pageSize, prev, { ticket, until: top?.until });
        if (r.notModified) return { kind: 'not_modified' };
        if (r.partial && top) {
          // The kinds of the pages read are checked here: the records the merge keeps from the
          // stored snapshot were judged when they were read, and must not fail the list for good.
          checkShape(ref, path, r.data);
          value = await top.merge(r.data);
          kinds = false;
        } else value = r.data;
        validators = r.validators;
      } else {
        const r = await this.client.getIfChanged(path, source.query, prev, { ticket });
        if (r.notModified) return { kind: 'not_modified' };
        value = r.data;
        validators = r.validators;
      }
      const data = checkShape(ref, path, value, { kinds });
      this.remember(ref, validators);
      return { kind: 'data', data };
    } catch (e) {
      if (e instanceof ApiError && source.notApplicable?.includes(e.code)) return { kind: 'not_applicable', code: e.code };
      throw e;
    }
  }

  /**
   * For a newest-first list: when to stop reading and how to merge, against the stored
   * snapshot (read only once a page came back, so a 304 costs no database read).
   */
  private topRead(ref: EntityRef): { until: (items: readonly unknown[], page: number) => Promise<boolean>; merge: (read: unknown[]) => Promise<unknown[]> } | null {
    const source = ref.source;
    if (!source.newestFirst) return null;
    const def = source as SourceDef & { newestFirst: NonNullable<SourceDef['newestFirst']> };
    let top: TopRead | null = null;
    const load = async (): Promise<TopRead> => (top ??= new TopRead(def, keptRecords(source, await this.deps.stored?.(ref))));
    return {
      until: async (items, page) => {
        const t = await load();
        const stop = t.until(items, page);
        if (t.oldestFirst && !this.warnedOldestFirst.has(source.name)) {
          this.warnedOldestFirst.add(source.name);
          this.deps.onOldestFirst?.(source);
        }
        return stop;
      },
      merge: async (read) => (await load()).merge(read, true),
    };
  }

  /** Forget the validators of an entity (its snapshot was not written, so a 304 would lie). */
  forget(ref: EntityRef): void {
    this.validators.delete(ref);
  }

  /** Drop what is kept for these sites (of `sources` only when given). */
  forgetSites(siteIds: Iterable<number>, sources?: ReadonlySet<string>): void {
    this.validators.forgetSites(siteIds, sources);
  }

  /** Drop what is kept for every entity of one source. */
  forgetSource(source: string): void {
    this.validators.forgetSource(source);
  }

  private recall(ref: EntityRef): Validators | undefined {
    const packed = this.validators.get(ref);
    if (packed === undefined) return undefined;
    // A digest (a server without validators) follows a NUL, which no header value holds.
    if (packed.charCodeAt(0) === 0) return { digest: packed.slice(1) };
    // A header value never holds a newline: without one, the value is the ETag.
    if (!packed.includes('\n')) return { etag: packed };
    const [etag, lastModified] = packed.split('\n');
    return { ...(etag ? { etag } : {}), ...(lastModified ? { lastModified } : {}) };
  }

  private remember(ref: EntityRef, v: Validators): void {
    if (v.etag || v.lastModified) this.validators.set(ref, v.lastModified ? `${v.etag ?? ''}\n${v.lastModified}` : v.etag!);
    // Written out flat (a 17-byte string), not as a concatenation that points at its parts.
    else if (v.digest) this.validators.set(ref, Buffer.from(`\u0000${v.digest}`, 'latin1').toString('latin1'));
    else this.validators.delete(ref);
  }

  /** One request per configured value; `not_found` is a record saying the value does not exist. */
  private async fetchEach(ref: EntityRef, path: string, ticket: Ticket | undefined): Promise<unknown[]> {
    const each = ref.source.each!;
    const values = this.options(ref.source.name, ref.siteId)[each.option] ?? [];
    const out: unknown[] = [];
    for (const value of values) {
      try {
        const data = await this.client.get(path, { ...ref.source.query, [each.param]: value }, { ticket });
        if (!isRecord(data)) throw new ApiError({ code: 'bad_response', endpoint: path, message: `expected an object, got ${kindOf(data)}` });
        // The key is the configured value, so a server that normalizes paths cannot make a record vanish.
        out.push({ ...data, [each.param]: value, exists: true });
      } catch (e) {
        if (e instanceof ApiError && e.code === 'not_found') out.push({ [each.param]: value, exists: false });
        else throw e;
      }
    }
    return out;
  }
}

/** Validate a reply against the source's expectations; returns the snapshot value. */
export function checkShape(ref: EntityRef, path: string, data: unknown, opts: { kinds?: boolean } = {}): unknown {
  const { source } = ref;
  const fail = (message: string): never => {
    throw new ApiError({ code: 'bad_response', endpoint: path, message });
  };
  // `kinds: false`: records kept from the stored snapshot are not judged again (see fetch()).
  const types = opts.kinds === false ? null : typedFields(source);
  if (source.key === undefined) {
    if (!isRecord(data)) fail(`expected an object, got ${kindOf(data)}`);
    const problem = types && kindProblem(types, data as Record<string, unknown>);
    if (problem) fail(problem);
    return data;
  }
  const list = recordsAt(source, data, fail);
  const seen = new Set<string>();
  list.forEach((item, i) => {
    if (!isRecord(item)) return fail(`item ${i} is ${kindOf(item)}, not an object`);
    const k = item[source.key!];
    if (typeof k !== 'number' && typeof k !== 'string') return fail(`item ${i} has no "${source.key}"`);
    const ks = String(k);
    if (source.keyShape && !source.keyShape.test(ks)) return fail(`item ${i}: "${source.key}" ${JSON.stringify(k)} is not ${source.keyShape.what}`);
    if (seen.has(ks)) return fail(`"${source.key}" ${ks} appears twice`);
    seen.add(ks);
    const problem = types && kindProblem(types, item);
    if (problem) fail(`item ${i} ("${source.key}" ${ks}): ${problem}`);
  });
  return data;
}

type TypedField = { path: string; parts: readonly string[]; kind: 'string' | 'boolean' };
const typedCache = new WeakMap<SourceDef, readonly TypedField[] | null>();

/** A source's `types`, split once. */
function typedFields(source: SourceDef): readonly TypedField[] | null {
  let fields = typedCache.get(source);
  if (fields === undefined) {
    fields = source.types ? Object.entries(source.types).map(([path, kind]) => ({ path, parts: path.split('.'), kind })) : null;
    typedCache.set(source, fields);
  }
  return fields;
}

/**
 * The first declared field (SourceDef.types) present with another kind, or null. A declared
 * field that is null is taken out of its record, which then reads as if the field were
 * missing: the API's "not measured or not set" (spec, convention 5), which a rule that reads
 * it reports and keeps its alert's state for, instead of `null == 'offline'` being false.
 */
function kindProblem(fields: readonly TypedField[], record: Record<string, unknown>): string | null {
  for (const f of fields) {
    let parent: Record<string, unknown> = record;
    let v: unknown = record;
    for (const part of f.parts) {
      if (!isRecord(v) || !Object.hasOwn(v, part)) {
        v = undefined;
        break;
      }
      parent = v;
      v = v[part];
    }
    if (v === null) delete parent[f.parts.at(-1)!];
    else if (v !== undefined && typeof v !== f.kind) return `"${f.path}" is ${kindOf(v)}, not a ${f.kind}`;
  }
  return null;
}
