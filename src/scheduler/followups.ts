import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import { recordsAt, recordVolatile } from '../sources/records.js';
import { childrenOf, entityOf, sitesSource } from '../sources/registry.js';
import type { EntityRef, SourceDef } from '../sources/types.js';

/** One detail to read: the parent record's key and whether the record is new since the last look. */
export interface DetailTarget {
  key: string;
  /** The record was not in the parent's previous reply (its detail has no baseline to keep). */
  isNew: boolean;
  sig: string;
}

interface ParentView {
  /** Record key → signature of its watched fields, in list order. */
  records: Map<string, string>;
}

/**
 * What a fetch implies for later fetches. Fed every fetched value (Poller `onFetched`);
 * answers which detail endpoints to read now (their list record moved, or their slow
 * schedule is due) and whether a source should be polled fast (a job is running).
 * In memory only: after a restart every detail is read once, which is the catch-up.
 */
export class Followups {
  private readonly children = new Map<string, SourceDef[]>();
  /** Per parent source: its record-level volatile fields, compiled once (signatures of unwatched children). */
  private readonly recordOptions = new Map<string, CompiledDiffOptions>();
  /** `${child}\0${parentEntity}` → what the parent's last reply listed. */
  private readonly parents = new Map<string, ParentView>();
  /** `${child}\0${childEntity}` → signature and time of the last successful detail read. */
  private readonly fetched = new Map<string, { sig: string; at: number }>();
  private readonly busy = new Map<string, boolean>();
  /** `${child}\0${parentEntity}` → keys listed since the previous look whose detail is not read yet. */
  private readonly fresh = new Map<string, Set<string>>();

  /** `enabled`: the enabled sources (disabled children are never read). */
  constructor(enabled: readonly SourceDef[]) {
    for (const s of enabled) {
      const kids = childrenOf(s, enabled);
      if (kids.length === 0) continue;
      this.children.set(s.name, kids);
      this.recordOptions.set(s.name, compileDiffOptions({ key: s.key ?? 'id', volatile: recordVolatile(s) }));
    }
  }

  /** The enabled per-record sources that detail `parent`. */
  childrenOf(parent: SourceDef): readonly SourceDef[] {
    return this.children.get(parent.name) ?? [];
  }

  /** Take note of a fetched value of any source. */
  observe(ref: EntityRef, data: unknown): void {
    const { source } = ref;
    const kids = this.childrenOf(source);
    if (source.name !== sitesSource.name && !source.fast && kids.length === 0) return;
    const all = recordsAt(source, data) as Record<string, unknown>[];
    if (source.name === sitesSource.name) this.keepSites(all);
    if (source.fast) {
      const { field, values } = source.fast;
      this.busy.set(source.name, all.some((r) => values.includes(String(r?.[field]))));
    }
    for (const child of kids) {
      const list = child.pick === 'first' ? all.slice(0, 1) : all;
      const records = new Map<string, string>();
      const volatile = this.recordOptions.get(source.name)!;
      for (const rec of list) {
        const key = String(rec[source.key ?? 'id']);
        const sig = child.watch ? JSON.stringify(child.watch.map((f) => rec[f] ?? null)) : contentHash(rec, volatile);
        records.set(key, sig);
      }
      const slot = `${child.name}\u0000${ref.entity}`;
      const prev = this.parents.get(slot);
      const fresh = this.fresh.get(slot) ?? new Set<string>();
      if (prev) {
        // Forget what we read of records that are gone, so memory follows the lists.
        for (const key of prev.records.keys()) {
          if (records.has(key)) continue;
          fresh.delete(key);
          this.fetched.delete(`${child.name}\u0000${entityOf(child, siteOf(ref), key).entity}`);
        }
        // Listed now, not before: everything in its detail is new (no baseline to keep).
        for (const key of records.keys()) if (!prev.records.has(key)) fresh.add(key);
      }
      this.parents.set(slot, { records });
      this.fresh.set(slot, fresh);
    }
  }

  /**
   * The details of `child` under the parent entity `parentRef` to read now: those whose
   * record signature moved since the last successful read, whose last read is older than
   * `everyMs`, or that were never read.
   */
  due(child: SourceDef, parentRef: EntityRef, now: number, everyMs: number): DetailTarget[] {
    const slot = `${child.name}\u0000${parentRef.entity}`;
    const view = this.parents.get(slot);
    if (!view) return [];
    const out: DetailTarget[] = [];
    for (const [key, sig] of view.records) {
      const last = this.fetched.get(`${child.name}\u0000${entityOf(child, siteOf(parentRef), key).entity}`);
      if (last && last.sig === sig && now - last.at < everyMs) continue;
      out.push({ key, isNew: this.fresh.get(slot)?.has(key) === true, sig });
    }
    return out;
  }

  /** Record a successful read of the detail `key` of `child` under `parentRef`. */
  done(child: SourceDef, parentRef: EntityRef, key: string, sig: string, now: number): void {
    this.fetched.set(`${child.name}\u0000${entityOf(child, siteOf(parentRef), key).entity}`, { sig, at: now });
    this.fresh.get(`${child.name}\u0000${parentRef.entity}`)?.delete(key);
  }

  /** Forget what was kept for sites gone from the site list, so memory follows the list. */
  private keepSites(sites: unknown[]): void {
    const live = new Set(sites.map((r) => String((r as Record<string, unknown>)?.['id'])));
    const gone = (key: string): boolean => {
      const m = /\u0000sites\/(\d+)\//.exec(key);
      return m !== null && !live.has(m[1]!);
    };
    for (const map of [this.parents, this.fresh, this.fetched]) for (const key of [...map.keys()]) if (gone(key)) map.delete(key);
  }

  /** True while the source's last reply had a record in a "busy" state (`fast`). */
  isBusy(source: SourceDef): boolean {
    return this.busy.get(source.name) === true;
  }
}

function siteOf(ref: EntityRef): { id: number; domain: string } | null {
  return ref.siteId === null ? null : { id: ref.siteId, domain: '' };
}
