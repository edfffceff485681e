import type { EntityRef } from './types.js';

/**
 * A value per entity, kept small. With 10,000 sites × every per-site source there are
 * 130,000 entries (docs/benchmarks.md), so what each costs matters: a Map entry is about
 * 45 bytes (a 10,000-entry Map's backing store is 448 KB), a slot of a plain array 8.
 *
 * So the entities of which a site has one (its health, its usage: most of them) are columns:
 * every site gets a row, shared by all sources, and each source keeps its values in an
 * array indexed by row. Only the site id → row map is a Map, once for all sources. Other
 * entities (a site's records, the account's) are kept by entity name, one Map per source.
 */
export class EntityTable<V> {
  private readonly rowOf = new Map<number, number>();
  /** Rows of sites forgotten by every source, given to the next new site (memory stays flat as sites come and go). */
  private readonly freeRows: number[] = [];
  private rows = 0;
  private readonly columns = new Map<string, Array<V | undefined>>();
  private readonly named = new Map<string, Map<string, V>>();

  /** The value of an entity, if any. */
  get(ref: EntityRef): V | undefined {
    if (!isPerSite(ref)) return this.named.get(ref.source.name)?.get(ref.entity);
    const row = this.rowOf.get(ref.siteId);
    return row === undefined ? undefined : this.columns.get(ref.source.name)?.[row];
  }

  /** Set the value of an entity. */
  set(ref: EntityRef, value: V): void {
    if (!isPerSite(ref)) {
      let byName = this.named.get(ref.source.name);
      if (!byName) this.named.set(ref.source.name, (byName = new Map()));
      byName.set(ref.entity, value);
      return;
    }
    let row = this.rowOf.get(ref.siteId);
    if (row === undefined) this.rowOf.set(ref.siteId, (row = this.freeRows.pop() ?? this.rows++));
    let column = this.columns.get(ref.source.name);
    if (!column) this.columns.set(ref.source.name, (column = []));
    // Rows are handed out in order, so a column grows at its end and stays a packed array.
    while (column.length < row) column.push(undefined);
    column[row] = value;
  }

  /** Drop the value of an entity. */
  delete(ref: EntityRef): void {
    if (!isPerSite(ref)) {
      this.named.get(ref.source.name)?.delete(ref.entity);
      return;
    }
    const row = this.rowOf.get(ref.siteId);
    const column = this.columns.get(ref.source.name);
    if (row !== undefined && column && row < column.length) column[row] = undefined;
  }

  /** Drop every value of one source (its entities came from another cluster member). */
  forgetSource(source: string): void {
    this.columns.delete(source);
    this.named.delete(source);
  }

  /** Drop every value about these sites (they left the site list), of `sources` only when given. */
  forgetSites(siteIds: Iterable<number>, sources?: ReadonlySet<string>): void {
    const ids = new Set(siteIds);
    if (ids.size === 0) return;
    for (const id of ids) {
      const row = this.rowOf.get(id);
      if (row === undefined) continue;
      for (const [source, column] of this.columns) if ((!sources || sources.has(source)) && row < column.length) column[row] = undefined;
      if (sources) continue;
      // Gone from every source: the row is free for another site.
      this.rowOf.delete(id);
      this.freeRows.push(row);
    }
    for (const [source, byName] of this.named) {
      if (sources && !sources.has(source)) continue;
      // Records of a site (sites/12/backups/7): one pass over the keys, whatever the ids.
      for (const k of byName.keys()) if (ids.has(siteIdOf(k) ?? NaN)) byName.delete(k);
    }
  }
}

/** The site an entity name is about (`sites/12/...`), or null. */
function siteIdOf(entity: string): number | null {
  const m = /^sites\/(\d+)\//.exec(entity);
  return m ? Number(m[1]) : null;
}

/** Whether an entity is the one a site has of its source (kept in the site's row), not a record or the account's. */
function isPerSite(ref: EntityRef): ref is EntityRef & { siteId: number } {
  return ref.siteId !== null && ref.recordKey === undefined;
}
