/**
 * A source is data, not a class: what to fetch, with which scope, how to key its records
 * and which fields are volatile. Adding a source is one small declaration plus its rules.
 */
export interface SourceDef {
  /** Config key and rule `source:` name. */
  name: string;
  /** The API scope a key needs for this source (`hostwatch scopes` prints these). */
  scope: string;
  /** `account`: one fetch per cycle; `site`: one fetch per watched site per cycle. */
  per: 'account' | 'site';
  /** Path after /api/v1; `{site_id}` is replaced for per-site sources. */
  path: string;
  /** Read every page of a paged list (`data`, `next_cursor`, `has_more`). */
  paged: boolean;
  pageSize?: number;
  /**
   * Present when the snapshot is a list of records: the field that identifies a record.
   * Rules then run per record, and each record has its own event subject.
   */
  key?: string;
  /**
   * For list replies wrapped in an object (`{records: [...], publishing: {...}}`): the
   * field holding the list. Absent: `data` itself is the list.
   */
  listField?: string;
  /**
   * For account-wide lists: the record field holding the site id its events are about
   * (`id` for the site list itself, `site_id` for jobs).
   */
  siteField?: string;
  /** Fields ignored by diff and hash (see DiffOptions.volatile). */
  volatile: readonly string[];
  /** Default poll interval in milliseconds. */
  defaultEveryMs: number;
  /** Extra query parameters for every request. */
  query?: Record<string, string | number>;
}

/** Where one fetch of a source lands: the entity whose snapshot it replaces. */
export interface EntityRef {
  source: SourceDef;
  /** Stable entity name, also the subject prefix: `sites`, `jobs`, `sites/12/health`. */
  entity: string;
  siteId: number | null;
}

/** The site fields rules and events use; read from the `sites` snapshot. */
export interface SiteInfo {
  id: number;
  domain: string;
}
