/**
 * Cursor paging over arrays kept ascending by id. The cursor names the last id served
 * (not an offset), so a site added or removed between two pages never makes a walk skip
 * or repeat an item; it also carries the page number, which page-scoped faults match on.
 */

export interface Cursor {
  /** 1-based number of the page this cursor asks for. */
  page: number;
  /** Id of the last item of the previous page. */
  after: number;
}

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
  has_more: boolean;
}

/** Opaque to clients: base64url of "<page>.<after id>". */
export function encodeCursor(cursor: Cursor): string {
  return Buffer.from(`${cursor.page}.${cursor.after}`).toString('base64url');
}

/** The cursor, or undefined when the string is not one we issued. */
export function decodeCursor(raw: string): Cursor | undefined {
  const m = /^(\d{1,9})\.(-?\d{1,15})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  if (!m) return undefined;
  const page = Number(m[1]);
  return page >= 2 ? { page, after: Number(m[2]) } : undefined;
}

/**
 * One page of `items` (ascending by id), walked ascending or newest-first, optionally
 * filtered. Costs O(log n + page) without a filter.
 */
export function pageOf<T extends { id: number }>(
  items: readonly T[],
  opts: { limit: number; cursor?: Cursor | undefined; order: 'asc' | 'desc'; filter?: (item: T) => boolean },
): Page<T> {
  const { limit, cursor, order, filter } = opts;
  const data: T[] = [];
  let hasMore = false;
  // One walk in either direction; the cursor names the last id served.
  const step = order === 'asc' ? 1 : -1;
  let i =
    order === 'asc'
      ? cursor ? lowerBound(items, cursor.after + 1) : 0
      : cursor ? lowerBound(items, cursor.after) - 1 : items.length - 1;
  for (; i >= 0 && i < items.length; i += step) {
    const item = items[i] as T;
    if (filter && !filter(item)) continue;
    if (data.length === limit) {
      hasMore = true;
      break;
    }
    data.push(item);
  }
  const last = data[data.length - 1];
  const next = hasMore && last ? encodeCursor({ page: (cursor?.page ?? 1) + 1, after: last.id }) : null;
  return { data, next_cursor: next, has_more: hasMore };
}

/** Index of the first item whose id is >= id, in an array sorted ascending by id. */
export function lowerBound(items: readonly { id: number }[], id: number): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((items[mid] as { id: number }).id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
