import type { NewestFirst } from './newest-first.js';

/**
 * A source is data, not a class: what to fetch, with which scope, how to key its records
 * and which fields are volatile. Adding a source is one small declaration plus its rules.
 */
export interface SourceDef {
  /** Config key and rule `source:` name. */
  name: string;
  /** The API scope a key needs for this source (`hostwatch scopes` prints these). */
  scope: string;
  /**
   * `account`: one fetch per cycle; `site`: one fetch per watched site per cycle;
   * `record`: one fetch per record of the `parent` source's snapshot (a detail endpoint),
   * only when the parent record says something may have changed or `every` has passed.
   */
  per: 'account' | 'site' | 'record';
  /**
   * Path after /api/v1; `{site_id}` is replaced for per-site sources, `{id}` with the
   * parent record's key for per-record sources. Empty for views (`from`).
   */
  path: string;
  /** Read every page of a paged list (`data`, `next_cursor`, `has_more`). */
  paged: boolean;
  pageSize?: number;
  /**
   * A paged list served newest first: read from the top and stopped at the first page that
   * reaches a record already held (newest-first.ts), instead of every page.
   */
  newestFirst?: NewestFirst;
  /**
   * Present when the snapshot is a list of records: the field that identifies a record.
   * Rules then run per record, and each record has its own event subject.
   */
  key?: string;
  /**
   * For list replies wrapped in an object (`{records: [...], publishing: {...}}`): where the
   * records are. A dotted path (`rules.http_ratelimit`); `[]` flattens a list of lists
   * (`groups[].keywords`: every keyword of every group); several paths are concatenated.
   * Absent: `data` itself is the list.
   */
  listField?: string | readonly string[];
  /**
   * For account-wide lists: the record field holding the site id its events are about
   * (`id` for the site list itself, `site_id` for jobs).
   */
  siteField?: string;
  /** Fields ignored by diff and hash (see DiffOptions.volatile). */
  volatile: readonly string[];
  /**
   * Default poll interval in milliseconds. For per-record sources: the slow schedule, the
   * longest a detail goes without being fetched even when its list record did not move.
   */
  defaultEveryMs: number;
  /** Extra query parameters for every request. */
  query?: Record<string, string | number>;
  /**
   * Entity name template (the subject prefix): `{site_id}` and `{id}` are replaced.
   * Default: the name for account sources, `sites/{site_id}/<name>` for per-site ones.
   */
  entity?: string;
  /** Per-record sources: the source whose records this one details. */
  parent?: string;
  /** Per-record sources: `first` fetches the detail of the first (newest) record only. */
  pick?: 'all' | 'first';
  /**
   * Per-record sources: the parent record fields whose change means "fetch the detail now"
   * (default: every field of the record that is not volatile in the parent).
   */
  watch?: readonly string[];
  /**
   * A view: no request of its own, it re-reads what `from` fetched, keyed or filtered
   * differently, so one reply can feed per-record rules and whole-object rules.
   */
  from?: string;
  /**
   * Error codes that mean "this resource does not apply to this site" (409 for a site not
   * on the CDN): the poll succeeds, nothing is written and nothing is a change.
   */
  notApplicable?: readonly string[];
  /** False for opt-in sources: polled only when the config names them. Default true. */
  defaultEnabled?: boolean;
  /**
   * Adaptive polling: while any record has `field` in `values`, poll every `everyMs`
   * instead of the normal interval (jobs while something is running).
   */
  fast?: { field: string; values: readonly string[]; everyMs: number };
  /**
   * One request per configured value (`sources.<name>.<option>` in config), each sent as
   * query parameter `param`; the replies form a list keyed by `param`. A `not_found` reply
   * is a record `{<param>: value, exists: false}` rather than a failure.
   */
  each?: { option: 'paths'; param: string };
  /**
   * Fields whose kind the rules rely on, by dotted path in each record (sources with `key`)
   * or in the object: states the rules compare with `==` (`online.status`) and flags
   * (`frozen`). A present value of another kind is bad data (A32 in
   * docs/api-assumptions.md): the poll fails with `bad_response` naming the field, and the
   * previous snapshot stays. A null one is taken out, so it reads as missing, which is no
   * error here: the rules that read it report it and keep their alert's state. Compared as
   * it came, `null == 'offline'` would be false, and a firing alert would resolve ("back
   * online") on a reply that says nothing.
   */
  types?: Readonly<Record<string, 'string' | 'boolean'>>;
  /**
   * What every record's `key` must look like, as text (`what` names it in the error): the
   * site list's ids go into request paths, so only positive integers are ids there. A record
   * that does not is bad data, and the whole reply fails like any other bad reply.
   */
  keyShape?: { test: (key: string) => boolean; what: string };
}

/** Where one fetch of a source lands: the entity whose snapshot it replaces. */
export interface EntityRef {
  source: SourceDef;
  /** Stable entity name, also the subject prefix: `sites`, `jobs`, `sites/12/health`. */
  entity: string;
  siteId: number | null;
  /** Per-record sources: the parent record's key (`{id}` in the path). */
  recordKey?: string;
}

/** The site fields rules and events use; read from the `sites` snapshot. */
export interface SiteInfo {
  id: number;
  domain: string;
  /** Labels of the site (config `site_labels`), copied into `data.labels` of its events. */
  labels?: Readonly<Record<string, string>>;
}
