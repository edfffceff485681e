/**
 * One difference between two snapshots of the same thing.
 * `path` is dotted (`online.status`); items of arrays of records are named by key
 * (`records[id=12].value`), items of other arrays by position (`findings[0]`).
 * An added field or item has `before: null`; a removed one has `after: null`.
 */
export interface Change {
  path: string;
  before: unknown;
  after: unknown;
}

/** Options shared by diff() and contentHash(), so "equal hash" and "no change" agree. */
export interface DiffOptions {
  /** Field that identifies the records of an array (default `id`). */
  key?: string;
  /**
   * Fields ignored by the diff and the hash: dotted paths where `[]` stands for
   * "any item of an array", e.g. `disk.measured_at`, `[].updated_at`, `records[].updated_at`.
   */
  volatile?: readonly string[];
}
