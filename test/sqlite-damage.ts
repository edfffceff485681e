/** Real damage to a SQLite file, for tests of what hostwatch does with it. */
import { closeSync, openSync, writeSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';

/**
 * Write garbage over the first b-tree page of each table named, in the file itself (what a
 * bad disk block or a copy taken mid-write leaves). The file must be checkpointed (its
 * -wal holding none of those pages). Returns the page numbers.
 */
export function damagePages(dbPath: string, tables: readonly string[]): number[] {
  const reader = new BetterSqlite3(dbPath, { readonly: true });
  const size = reader.pragma('page_size', { simple: true }) as number;
  const find = reader.prepare("SELECT pageno FROM dbstat WHERE name = ? AND pagetype IN ('leaf', 'internal') ORDER BY pageno LIMIT 1").pluck();
  const pages = tables.map((t) => find.get(t) as number);
  reader.close();
  const fd = openSync(dbPath, 'r+');
  try {
    for (const page of pages) writeSync(fd, Buffer.alloc(size, 0xa5), 0, size, (page - 1) * size);
  } finally {
    closeSync(fd);
  }
  return pages;
}
