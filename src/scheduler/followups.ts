import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import { recordsAt, recordVolatile } from '../sources/records.js';
import { childrenOf, entityOf, sitesSource } from '../sources/registry.js';
import type { EntityRef, SourceDef } from '../sources/types.js';

/**
 * One detail to read: the parent record's key (or, for a per-site detail of an account list,
 * the site id), the site it belongs to, and whether it is new since the last look.
 */
export interface DetailTarget {
  key: string;
  /** The site of the detail: the parent's, or (details of an account list) the record's own. */
  siteId: number | null;
  /** The record was not in the parent's previous reply (its detail has no baseline to keep). */
  isNew: boolean;
  sig: string;
}

/** A per-site detail whose site no longer has records in the list: read once more, then forgotten. */
const GONE = '\u0000gone';

interface ParentView {
  /** Record key (or site id) → signature of its watched fields and its site, in list order. */
  records: Map<string, { sig: string; siteId: number | null }>;
}

/**
 * What a fetch implies for later fetches. Fed every fetched value (Poller `onFetched`);
 * answers which detail endpoints to read now (their list record moved, or their slow
 * schedule is due) and whether a source should be polled fast (a job is running).
 * A per-record detail follows one record of its parent; a per-site detail (cron jobs of a
 * site, read from the account's cron list) follows the parent's records of one site.
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

  /** The enabled detail sources (per record or per site) of `parent`. */
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
      const records = child.per === 'site' ? this.bySite(source, all) : this.byRecord(source, child, ref, all);
      const slot = `${child.name}\u0000${ref.entity}`;
      const prev = this.parents.get(slot);
      const fresh = this.fresh.get(slot) ?? new Set<string>();
      if (prev) {
        for (const [key, was] of prev.records) {
          if (records.has(key)) continue;
          if (child.per === 'site') {
            // The site's last records left the list: its detail is read once more, to see them go.
            records.set(key, { sig: GONE, siteId: was.siteId });
            continue;
          }
          // Forget what we read of records that are gone, so memory follows the lists.
          fresh.delete(key);
          this.fetched.delete(this.fetchedKey(child, was.siteId, key));
        }
        // Listed now, not before: everything in its detail is new (no baseline to keep).
        for (const [key, now] of records) if (!prev.records.has(key) && now.sig !== GONE) fresh.add(key);
      }
      this.parents.set(slot, { records });
      this.fresh.set(slot, fresh);
    }
  }

  /** Per-record children: one entry per record of the parent (or the first, for `pick: first`). */
  private byRecord(source: SourceDef, child: SourceDef, ref: EntityRef, all: Record<string, unknown>[]): Map<string, { sig: string; siteId: number | null }> {
    const list = child.pick === 'first' ? all.slice(0, 1) : all;
    const out = new Map<string, { sig: string; siteId: number | null }>();
    for (const rec of list) out.set(String(rec[source.key ?? 'id']), { sig: this.signature(source, child, rec), siteId: siteIdOf(source, ref, rec) });
    return out;
  }

  /** Per-site children: one entry per site with records in the parent's list, signed by all of them. */
  private bySite(source: SourceDef, all: Record<string, unknown>[]): Map<string, { sig: string; siteId: number | null }> {
    const sigs = new Map<number, string[]>();
    for (const rec of all) {
      const id = rec[source.siteField ?? 'site_id'];
      if (typeof id !== 'number') continue;
      const list = sigs.get(id) ?? [];
      list.push(`${String(rec[source.key ?? 'id'])}=${contentHash(rec, this.recordOptions.get(source.name)!)}`);
      sigs.set(id, list);
    }
    const out = new Map<string, { sig: string; siteId: number | null }>();
    for (const [id, list] of sigs) out.set(String(id), { sig: list.join(','), siteId: id });
    return out;
  }

  private signature(source: SourceDef, child: SourceDef, rec: Record<string, unknown>): string {
    return child.watch ? JSON.stringify(child.watch.map((f) => rec[f] ?? null)) : contentHash(rec, this.recordOptions.get(source.name)!);
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
    for (const [key, { sig, siteId }] of view.records) {
      const last = this.fetched.get(this.fetchedKey(child, siteId, key));
      if (last && last.sig === sig && now - last.at < everyMs) continue;
      out.push({ key, siteId, isNew: this.fresh.get(slot)?.has(key) === true, sig });
    }
    return out;
  }

  /** True for a target whose site's records left the list (read once to see them go). */
  static isGone(t: DetailTarget): boolean {
    return t.sig === GONE;
  }

  /** Record a successful read of the detail `key` of `child` under `parentRef`. */
  done(child: SourceDef, parentRef: EntityRef, key: string, sig: string, now: number): void {
    const slot = `${child.name}\u0000${parentRef.entity}`;
    const view = this.parents.get(slot);
    const siteId = view?.records.get(key)?.siteId ?? parentRef.siteId;
    const fetchedKey = this.fetchedKey(child, siteId, key);
    this.fresh.get(slot)?.delete(key);
    if (sig === GONE) {
      // Read once after its records left: nothing more to follow for this site.
      view?.records.delete(key);
      this.fetched.delete(fetchedKey);
      return;
    }
    this.fetched.set(fetchedKey, { sig, at: now });
  }

  /** Where the last read of a detail is kept: by the detail's entity. */
  private fetchedKey(child: SourceDef, siteId: number | null, key: string): string {
    const site = siteId === null ? null : { id: siteId, domain: '' };
    return `${child.name}\u0000${(child.per === 'site' ? entityOf(child, site) : entityOf(child, site, key)).entity}`;
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

/** The site a record's detail belongs to: the parent entity's site, or (account lists) the record's `siteField`. */
function siteIdOf(source: SourceDef, ref: EntityRef, rec: Record<string, unknown>): number | null {
  if (ref.siteId !== null) return ref.siteId;
  const id = source.siteField ? rec[source.siteField] : undefined;
  return typeof id === 'number' ? id : null;
}
