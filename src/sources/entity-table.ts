import type { EntityRef } from './types.js';

/**
 * A value per entity, kept small: one map per source, keyed by the site id where one entity
 * per site (a number: no key string per entity), else by the entity name. With 10,000
 * sites × every per-site source that is 130,000 entries, so the key matters
 * (docs/benchmarks.md).
 */
export class EntityTable<V> {
  private readonly bySource = new Map<string, Map<number | string, V>>();

  /** The value of an entity, if any. */
  get(ref: EntityRef): V | undefined {
    return this.bySource.get(ref.source.name)?.get(slotOf(ref));
  }

  /** Set the value of an entity. */
  set(ref: EntityRef, value: V): void {
    let bySlot = this.bySource.get(ref.source.name);
    if (!bySlot) this.bySource.set(ref.source.name, (bySlot = new Map()));
    bySlot.set(slotOf(ref), value);
  }

  /** Drop the value of an entity. */
  delete(ref: EntityRef): void {
    this.bySource.get(ref.source.name)?.delete(slotOf(ref));
  }

  /** Drop every value of one source (its entities came from another cluster member). */
  forgetSource(source: string): void {
    this.bySource.delete(source);
  }

  /** Drop every value about these sites (they left the site list), of `sources` only when given. */
  forgetSites(siteIds: Iterable<number>, sources?: ReadonlySet<string>): void {
    const ids = new Set(siteIds);
    if (ids.size === 0) return;
    for (const [source, bySlot] of this.bySource) {
      if (sources && !sources.has(source)) continue;
      for (const id of ids) bySlot.delete(id);
      // Records of a site (sites/12/backups/7): one pass over the keys, whatever the ids.
      for (const k of bySlot.keys()) if (typeof k === 'string' && ids.has(siteIdOf(k) ?? NaN)) bySlot.delete(k);
    }
  }
}

/** The site an entity name is about (`sites/12/...`), or null. */
function siteIdOf(entity: string): number | null {
  const m = /^sites\/(\d+)\//.exec(entity);
  return m ? Number(m[1]) : null;
}

/** The key of an entity within its source: the site id when that names it, else the entity. */
function slotOf(ref: EntityRef): number | string {
  return ref.siteId !== null && ref.recordKey === undefined ? ref.siteId : ref.entity;
}
