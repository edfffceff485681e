/**
 * Reading a newest-first list from the top (reports, footprint reports, jobs, backups).
 * Such a list only grows at the top, so a poll reads pages until it reaches a record it
 * already holds and keeps the older ones it had: a poll costs one page whatever the length
 * of the history, and no list can hit `api.max_pages` by growing. Pure: the fetcher feeds it
 * the previous snapshot and the pages.
 */
import { isRecord } from '../is-record.js';
import { recordsAt } from './records.js';
import type { SourceDef } from './types.js';

/** How a newest-first list is read (SourceDef.newestFirst). */
export interface NewestFirst {
  /** How many of the newest records the snapshot keeps (at least every record read in one poll). */
  keep: number;
  /**
   * Records that may still change (a running job, a backup being made): while the kept list
   * holds one, reading goes on until it is reached again, so its end is seen.
   */
  open?: { field: string; values: readonly string[] };
}

/**
 * One top-down read of a newest-first list, against what the last poll kept. `until` says
 * when to stop; `merge` builds the new snapshot from the pages read and the older records kept.
 */
export class TopRead {
  private readonly known: Map<string, number>;
  private readonly open: Set<string>;
  private read = 0;
  private unknown = 0;
  private reachedKnown = false;
  /** Set when the first page ascends: the server lists oldest first, so the list is read whole. */
  oldestFirst = false;

  /** `previous`: the records of the last snapshot (null: none yet, a baseline). */
  constructor(
    private readonly source: SourceDef & { newestFirst: NewestFirst },
    private readonly previous: readonly Record<string, unknown>[] | null,
  ) {
    this.known = new Map((previous ?? []).map((r, i) => [keyOf(source, r), i]));
    const open = source.newestFirst.open;
    this.open = new Set(open ? (previous ?? []).filter((r) => open.values.includes(String(r[open.field]))).map((r) => keyOf(source, r)) : []);
  }

  /** After each page: true to stop reading. */
  until(items: readonly unknown[], page: number): boolean {
    if (page === 1 && ascends(items)) this.oldestFirst = true;
    if (this.oldestFirst) return false;
    for (const item of items) {
      this.read++;
      const key = isRecord(item) ? keyOf(this.source, item) : '';
      if (this.known.has(key)) this.reachedKnown = true;
      else this.unknown++;
      this.open.delete(key);
    }
    // No snapshot yet: the first page is the baseline (no events come of it anyway).
    if (this.previous === null) return true;
    if (this.reachedKnown && this.open.size === 0) return true;
    // Every record of the kept window that is still listed lies within the new ones plus
    // the window, so an open record not found by then was deleted: stop looking for it.
    return this.reachedKnown && this.read >= this.unknown + this.source.newestFirst.keep;
  }

  /**
   * The new snapshot's records: every record read, then the kept records older than the
   * last known one read (those newer than it but not read again were deleted), up to `keep`.
   * `partial`: the read stopped before the end of the list.
   */
  merge(read: readonly unknown[], partial: boolean): unknown[] {
    if (!partial || this.previous === null) return [...read];
    const seen = new Set<string>();
    let last = -1;
    for (const item of read) {
      if (!isRecord(item)) continue;
      const key = keyOf(this.source, item);
      seen.add(key);
      const at = this.known.get(key);
      if (at !== undefined && at > last) last = at;
    }
    const room = Math.max(0, this.source.newestFirst.keep - read.length);
    const older = this.previous.slice(last + 1).filter((r) => !seen.has(keyOf(this.source, r))).slice(0, room);
    return [...read, ...older];
  }
}

/** The records of a stored snapshot of a newest-first list (null when there is none). */
export function keptRecords(source: SourceDef, stored: unknown): Record<string, unknown>[] | null {
  if (stored === undefined || stored === null) return null;
  return recordsAt(source, stored).filter(isRecord);
}

function keyOf(source: SourceDef, r: Record<string, unknown>): string {
  return String(r[source.key ?? 'id']);
}

/**
 * True when a first page is in ascending order (oldest first), judged by `created_at` where
 * the records have it, else by a numeric `id`. A page of one record says nothing.
 */
function ascends(items: readonly unknown[]): boolean {
  const recs = items.filter(isRecord);
  if (recs.length < 2) return false;
  const first = recs[0]!;
  const last = recs[recs.length - 1]!;
  const a = orderOf(first);
  const b = orderOf(last);
  return a !== null && b !== null && a < b;
}

function orderOf(r: Record<string, unknown>): number | null {
  const at = r['created_at'];
  if (typeof at === 'string') {
    const t = Date.parse(at);
    if (!Number.isNaN(t)) return t;
  }
  return typeof r['id'] === 'number' ? r['id'] : null;
}
