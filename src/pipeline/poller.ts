import type { Logger } from 'pino';
import type { Ticket } from '../api/budget.js';
import type { ApiClient } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import { changeEventId } from '../events/envelope.js';
import { API_SUBJECT, operatorEvent, type OperatorRule } from '../events/operator.js';
import type { HostwatchEvent } from '../events/types.js';
import type { Notifier } from '../notify/notifier.js';
import type { CompiledRule } from '../rules/types.js';
import { EntityTable } from '../sources/entity-table.js';
import { checkShape, Fetcher } from '../sources/fetch.js';
import { recordVolatile } from '../sources/records.js';
import { reportClientsSource } from '../sources/families/visibility.js';
import { childrenOf, entityOf, pathOf, sitesSource, sourceByName, viewsOf } from '../sources/registry.js';
import type { EntityRef, SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { toEventRow } from '../store/events-repo.js';
import type { EvidenceRow } from '../store/history-repo.js';
import { repos, type Repos } from '../store/repos.js';
import type { PollStateRow, SnapshotRow } from '../store/snapshots-repo.js';
import type { SiteLabeler } from '../labels.js';
import type { IncidentTracker } from '../notify/incident-tracker.js';
import { listOf, planEvents, sourceRules, type PlanCall, type PlanOutput, type SourceRules } from './plan.js';
import { SiteDirectory } from './site-directory.js';

/** The client list of client reports: it feeds site labels (`{ from: client_reports }`). */
const REPORT_CLIENTS = reportClientsSource.name;

/** When `source.degraded` fires by default (config `degraded`). */
export const DEGRADED_DEFAULTS = { after_failures: 3, after_ms: 10 * 60_000 } as const;

/** Error codes that mean the panel was not reached at all (`api.unreachable`). */
const UNREACHABLE = new Set(['network', 'timeout', 'http_502', 'http_504']);

/** The API-wide operator alert a failed poll counts towards, if any. */
export function apiFailureKind(err: ApiError | undefined): 'api-unauthorized' | 'api-unreachable' | null {
  if (!err) return null;
  if (err.statusCode === 401) return 'api-unauthorized';
  if (err.statusCode === 502 || err.statusCode === 504) return 'api-unreachable';
  return apiFailureKindOfCode(err.code);
}

/** The same, from the error code a poll state row keeps. */
function apiFailureKindOfCode(code: string | null): 'api-unauthorized' | 'api-unreachable' | null {
  if (code === 'unauthorized') return 'api-unauthorized';
  return code !== null && UNREACHABLE.has(code) ? 'api-unreachable' : null;
}

const API_ALERTS = ['api-unauthorized', 'api-unreachable'] as const;

/**
 * Any error of a poll as the ApiError a failed poll records. A stack overflow is the reply's
 * fault (nested deeper than a recursive walk goes): `bad_response`, like any reply that
 * cannot be read. Anything else is hostwatch's own failure (`internal`), still a failed poll.
 */
export function pollError(endpoint: string, e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof RangeError && /call stack/i.test(e.message)) {
    return new ApiError({ code: 'bad_response', endpoint, message: `the reply could not be processed: it is nested too deeply (${e.message})` });
  }
  return new ApiError({ code: 'internal', endpoint, message: `processing the reply failed: ${e instanceof Error ? e.message : String(e)}` });
}

export interface PollerDeps {
  instance: string;
  client: ApiClient;
  /** Where snapshots, the change log, events, outbox rows and alert state go (one transaction per poll). */
  store: Store;
  rules: readonly CompiledRule[];
  /** Decides where a stored event goes (silences, maintenance, inhibition, routes) and queues it, in the poll's transaction. */
  notifier: Pick<Notifier, 'dispatch'>;
  now: () => number;
  log: Logger;
  /** Scrubs secrets from text before it is stored (error messages). */
  scrub: (text: string) => string;
  /** The watched sites ('all', or ids from config): events about other sites are dropped. */
  sites?: 'all' | readonly number[];
  /** Called after every poll (metrics). */
  onPoll?: (source: string, outcome: PollOutcome) => void;
  /** When `source.degraded` fires (config `degraded`); default DEGRADED_DEFAULTS. */
  degraded?: { after_failures: number; after_ms: number };
  /** The most sites a site list may hold (`sites.max`): a longer reply fails the poll. Default: no cap. */
  sitesMax?: number;
  /** The most events one poll of a source may emit (`sources.<name>.max_events`); default 100. */
  maxEvents?: (source: string) => number;
  /** Fetches entities (conditional requests, per-source options); default: a plain Fetcher over `client`. */
  fetcher?: Fetcher;
  /** The enabled sources; views among them are ingested from their origin's fetch. Default: none. */
  sources?: readonly SourceDef[];
  /** Called with every fetched value once it is committed (detail follow-ups, adaptive polling). */
  onFetched?: (ref: EntityRef, data: unknown) => void;
  /** Called after a commit that added events (wakes the outbox worker, feeds the demo). */
  onEvents?: (events: HostwatchEvent[]) => void;
  /** Site labels (config `site_labels`); default none. */
  labeler?: SiteLabeler;
  /** Platform incidents: told of every commit's alert events (in its transaction), settled when a cycle ends. */
  incidents?: Pick<IncidentTracker, 'onAlerts' | 'settle'>;
}

/** `not_applicable`: the API said the resource does not apply here (409 off the CDN); nothing written. */
export type PollStatus = 'baseline' | 'changed' | 'unchanged' | 'not_applicable' | 'failed';

/** How to take a per-record entity that has no snapshot yet. */
export interface PollOptions {
  /** Priority and deadline of its requests in the request budget (default: normal, due now). */
  ticket?: Ticket;
  /**
   * Compare the first snapshot with an empty list instead of making it a baseline: its
   * parent record is new since the last look, so everything in it is new (a new cron job's
   * first runs are reported).
   */
  fromEmpty?: boolean;
  /**
   * Called once the fetch is over, before the commit, with its error (null when it was
   * answered): the scheduler frees the poll's fetch slot then, so another poll fetches while
   * this one commits.
   */
  afterFetch?: (error: ApiError | null) => void;
}

export interface PollOutcome {
  entity: string;
  status: PollStatus;
  events: number;
  error?: ApiError;
  /** Fetch to commit, in milliseconds. */
  durationMs?: number;
}

interface PreparedSource {
  def: SourceDef;
  rules: SourceRules;
  whole: CompiledDiffOptions;
  record: CompiledDiffOptions;
  /** The enabled views that re-read this source's reply. */
  views: readonly SourceDef[];
}

/** What one transaction (one unit of the commit queue) shares between its steps. */
interface Unit {
  r: Repos;
  /** Events stored by this unit, announced after its commit. */
  added: HostwatchEvent[];
  /** API-wide alerts this unit found resolved (it resolved them, or another unit did): memory forgets them after the commit. */
  apiResolved: OperatorRule[];
}

/** What a successful poll writes (see writeSuccess). */
interface Success {
  snapshot: SnapshotRow | null;
  events: HostwatchEvent[];
  alerts: AlertRow[];
  removedSites: number[];
  evidence: EvidenceRow[];
}

const NOTHING: Success = { snapshot: null, events: [], alerts: [], removedSites: [], evidence: [] };

/**
 * Polls entities: fetch → hash → one transaction (read state → plan → write). Owns the
 * in-memory site directory derived from the stored site list.
 *
 * All network IO (the fetch) is over before the transaction starts; inside it there are only
 * this store's reads and writes and the pure planner. The plan reads what it needs (alert
 * state, past values) in the transaction, so it plans on the state it commits against.
 */
export class Poller {
  private readonly prepared = new Map<string, PreparedSource>();
  private readonly ruleByName: Map<string, CompiledRule>;
  /**
   * The stored hash (its first 120 bits, see shortHash) and version of each entity polled
   * since this process started. Being here also means its alert conditions were checked in
   * this process. An unchanged poll is answered from this table without touching the
   * database (the common case). Each is one string (packHead): no object per entity.
   */
  private readonly heads = new EntityTable<string>();
  /**
   * The database held nothing about any entity when this poller opened it, and no other
   * process can write to it (Store.soleWriter). Then an entity this poller has not stored
   * since (not in `heads`, no other ingest of it under way) has no snapshot, change-log row
   * or alert state, and its first poll does not look for them: three reads fewer per entity
   * in a new install's first cycle (and one per `window` rule). Off for good once `heads`
   * forgets anything (removed sites, a cluster handover) or a commit fails.
   */
  private fresh = false;
  /** Ingests under way per entity (stateKey → how many): what they write is not in `heads` yet. */
  private readonly ingesting = new Map<string, number>();
  /**
   * Entities with an alert whose timer runs (`for`, `keep_firing_for`, `repeat`): an
   * unchanged poll of these is still planned, because time alone can fire, resolve or
   * re-send. Filled by each plan; after a restart the first poll of every entity plans.
   */
  private readonly timed = new Set<string>();
  private readonly directory: SiteDirectory;
  private readonly watched: ReadonlySet<number> | null;
  /** Entities whose last poll failed (so a success must write their recovery). */
  private readonly failing = new Set<string>();
  /** Sources with a firing source.scope_missing alert. */
  private readonly scopeMissing = new Set<string>();
  /** API-wide operator alerts firing now (api.unauthorized, api.unreachable). */
  private readonly apiFiring = new Set<OperatorRule>();
  /**
   * Since the last successful poll: the sources whose polls all failed the same API-wide way
   * (401, or not reaching the panel). One endpoint failing is that source's business
   * (source.degraded); the API as a whole is failing only when two sources' cycles do.
   */
  private apiStreak: { kind: OperatorRule; sources: Set<string> } | null = null;
  /** When a poll last succeeded in this process (start time until one does): /readyz reads it. */
  lastSuccessAt: number;
  /** The repositories on the store itself (reads outside a transaction). */
  private readonly r: Repos;
  private readonly fetcher: Fetcher;

  private constructor(private readonly deps: PollerDeps) {
    this.fetcher = deps.fetcher ?? new Fetcher(deps.client);
    this.ruleByName = new Map(deps.rules.map((r) => [r.name, r]));
    this.watched = deps.sites === undefined || deps.sites === 'all' ? null : new Set(deps.sites);
    this.directory = new SiteDirectory(deps.labeler);
    this.r = repos(deps.store);
    this.lastSuccessAt = deps.now();
  }

  /** A poller with its site directory, failing entities and firing operator alerts read from the store. */
  static async open(deps: PollerDeps): Promise<Poller> {
    const p = new Poller(deps);
    p.fresh = deps.store.soleWriter && (await p.r.snapshots.nothingStored());
    await p.directory.load(p.r.snapshots);
    for (const s of await p.r.snapshots.allFailing()) p.failing.add(`${s.source}\u0000${s.entity}`);
    for (const a of await p.r.alerts.firing()) {
      if (a.rule === 'source-scope-missing') p.scopeMissing.add(a.subject);
      if ((API_ALERTS as readonly string[]).includes(a.rule)) p.apiFiring.add(a.rule as OperatorRule);
    }
    return p;
  }

  /** The hash of the site list this instance last read or stored (cluster: refreshSites). */
  private sitesHash: string | null = null;

  /**
   * Read the stored site list again when another cluster member stored a new one (the
   * member that holds the site list's lease polls it; the others read what it stored).
   */
  async refreshSites(): Promise<void> {
    const head = await this.r.snapshots.head(sitesSource.name, sitesSource.name);
    if (head === undefined || head.hash === this.sitesHash) return;
    const row = await this.r.snapshots.get(sitesSource.name, sitesSource.name);
    if (!row) return;
    this.directory.setSites(JSON.parse(row.body));
    this.sitesHash = row.hash;
    const clients = await this.r.snapshots.get(REPORT_CLIENTS, entityOf(reportClientsSource, null).entity);
    if (clients) this.directory.setClients(JSON.parse(clients.body));
  }

  /** The sites known from the last stored site list, in id order (with their labels). */
  sites(): SiteInfo[] {
    return this.directory.all();
  }

  /** One known site (with its labels), or undefined. */
  site(id: number): SiteInfo | undefined {
    return this.directory.get(id);
  }

  /** Whether events about a site are kept (config `sites`). */
  isWatched(siteId: number): boolean {
    return this.watched === null || this.watched.has(siteId);
  }

  /** How many sites are watched now (config `sites`, among the known ones). */
  watchedCount(): number {
    if (this.watched === null) return this.directory.size;
    let n = 0;
    for (const id of this.directory.ids()) if (this.watched.has(id)) n++;
    return n;
  }

  /**
   * Poll one entity and commit what it caused. Any error of the poll, not only the API's
   * (a reply too deep to walk, a bug in a rule), is a failed poll: recorded in its poll
   * state and counted towards source.degraded, so a source that cannot be read never
   * looks healthy. It throws only when the failure itself cannot be recorded.
   */
  async poll(source: SourceDef, site: SiteInfo | null, recordKey?: string, opts: PollOptions = {}): Promise<PollOutcome> {
    const ref = entityOf(source, site, recordKey);
    const started = this.deps.now();
    try {
      return await this.pollEntity(ref, source, site, recordKey, opts, started);
    } catch (e) {
      // Nothing was committed for this reply: a later 304 must not stand for it.
      this.fetcher.forget(ref);
      return this.failed(ref, pollError(pathOf(source, ref.siteId, recordKey), e), started);
    }
  }

  private async pollEntity(ref: EntityRef, source: SourceDef, site: SiteInfo | null, recordKey: string | undefined, opts: PollOptions, started: number): Promise<PollOutcome> {
    let got;
    // While the reply is on its way, other polls' results wait for this one to share their
    // commit; once it is in (and this poll knows whether it writes), they need not.
    const arrived = this.deps.store.expectWrite();
    try {
      got = await this.fetcher.fetch(ref, opts.ticket);
    } catch (e) {
      arrived();
      const err = e instanceof ApiError ? e : new ApiError({ code: 'bad_response', endpoint: ref.entity, message: String(e) });
      opts.afterFetch?.(err);
      // Given up while waiting its turn (shutdown): nothing was read, so nothing is recorded.
      if (err.code === 'aborted') return { entity: ref.entity, status: 'failed', events: 0, error: err };
      return this.failed(ref, err, started);
    }
    arrived();
    opts.afterFetch?.(null);
    if (got.kind === 'not_modified') {
      // A 304 is "unchanged"; but where an alert timer runs (for, keep_firing_for, repeat),
      // time alone can fire, resolve or re-send, so those entities (and views of the same
      // reply) are planned again on their stored snapshot.
      const outcome = await this.unchanged(ref, started, opts);
      for (const view of this.prepare(source).views) {
        const viewRef = entityOf(view, site, recordKey);
        this.observed(viewRef, await this.unchanged(viewRef, started, opts));
      }
      outcome.durationMs = this.deps.now() - started;
      return this.observed(ref, outcome);
    }
    if (got.kind !== 'data') {
      // "Not applicable here": a success that changes nothing and writes no snapshot.
      await this.recordSuccess(ref, started);
      return this.observed(ref, { entity: ref.entity, status: 'not_applicable', events: 0, durationMs: this.deps.now() - started });
    }
    const refused = await this.listProblem(ref, got.data);
    if (refused) {
      // Refused, not stored: the same reply again (a 304, the same digest) must be refused again.
      this.fetcher.forget(ref);
      return this.failed(ref, new ApiError({ code: 'bad_response', endpoint: pathOf(source, ref.siteId, recordKey), message: refused }), started);
    }
    const outcome = await this.ingest(ref, got.data, started, opts);
    const endpoint = pathOf(source, ref.siteId, recordKey);
    for (const view of this.prepare(source).views) {
      // A view that refused this reply must see it again, not a 304 read as "unchanged".
      if (!(await this.ingestView(view, site, recordKey, endpoint, got.data, started, opts))) this.fetcher.forget(ref);
    }
    // Detail follow-ups and adaptive polling see a reply only once it is committed.
    this.deps.onFetched?.(ref, got.data);
    outcome.durationMs = this.deps.now() - started;
    return this.observed(ref, outcome);
  }

  /**
   * A site list longer than `sites.max` is refused as a whole, before any diff: a hostile
   * or broken reply must not become a million `site.added` events and a huge database.
   * A list that comes back empty although it held records is refused once, when it is the
   * site list or a history (a newest-first list: jobs, backups, reports, A31): a reply that
   * drops every record at once is more often a fault upstream than every record deleted.
   * Taken as it came, it would remove every site (and resolve their alerts, which fire again
   * under new ids once the sites are back), or announce every backup again as new when the
   * list is back. The next poll that says the same is taken: the refusal is the entity's
   * last failure in the database, so a restart (`poll --once` from cron is one process a
   * poll) or another cluster member sees it too.
   */
  private async listProblem(ref: EntityRef, data: unknown): Promise<string | null> {
    const isSites = ref.source.name === sitesSource.name;
    if (!isSites && ref.source.newestFirst === undefined) return null;
    const n = listOf(ref.source, data).length;
    const max = this.deps.sitesMax;
    if (isSites && max !== undefined && n > max) return `the site list has ${n} sites, more than sites.max (${max}); the previous list is kept. Raise sites.max if this is real`;
    if (n > 0) return null;
    const known = isSites ? this.directory.size : await this.heldRecords(ref);
    if (known === 0) return null;
    const last = await this.r.snapshots.state(ref.source.name, ref.entity);
    if (last !== undefined && last.consecutive_failures > 0 && last.last_error?.includes(CAME_BACK_EMPTY) === true) return null;
    return isSites
      ? `the site list ${CAME_BACK_EMPTY} although ${known} ${known === 1 ? 'site was' : 'sites were'} known; the previous list is kept until the next poll of the site list says the same`
      : `the list ${CAME_BACK_EMPTY} although it held ${known} ${known === 1 ? 'record' : 'records'}; the previous list is kept until the next poll says the same`;
  }

  /** How many records an entity's stored snapshot holds (read only when a list comes back empty). */
  private async heldRecords(ref: EntityRef): Promise<number> {
    // A new database holds nothing this poller has not stored (`fresh`): no read.
    if (this.fresh && this.heads.get(ref) === undefined && !this.ingesting.has(`${ref.source.name}\u0000${ref.entity}`)) return 0;
    const stored = await this.r.snapshots.get(ref.source.name, ref.entity);
    return stored === undefined ? 0 : listOf(ref.source, JSON.parse(stored.body)).length;
  }

  /** An entity the server said is unchanged (304): replanned on its stored snapshot if a timer runs. */
  private async unchanged(ref: EntityRef, started: number, opts: PollOptions): Promise<PollOutcome> {
    const stored = this.timed.has(`${ref.source.name}\u0000${ref.entity}`) ? await this.r.snapshots.get(ref.source.name, ref.entity) : undefined;
    if (stored) return this.ingest(ref, JSON.parse(stored.body), started, opts);
    await this.recordSuccess(ref, started);
    return { entity: ref.entity, status: 'unchanged', events: 0 };
  }

  /**
   * A view re-reads its origin's reply as its own entity (own key, own volatile fields, own
   * rules). False when the reply does not have the view's shape (a failed poll of the view).
   */
  private async ingestView(view: SourceDef, site: SiteInfo | null, recordKey: string | undefined, endpoint: string, data: unknown, started: number, opts: PollOptions): Promise<boolean> {
    const ref = entityOf(view, site, recordKey);
    try {
      // A view has no request of its own: a bad reply is named by its origin's endpoint.
      checkShape(ref, endpoint, data);
    } catch (e) {
      await this.failed(ref, e as ApiError, started);
      return false;
    }
    this.observed(ref, await this.ingest(ref, data, started, opts));
    return true;
  }

  private async failed(ref: EntityRef, err: ApiError, started: number): Promise<PollOutcome> {
    const kind = apiFailureKind(err);
    if (kind === null) this.apiStreak = null;
    else if (this.apiStreak?.kind !== kind) this.apiStreak = { kind, sources: new Set() };
    const outcome = (): PollOutcome => ({ entity: ref.entity, status: 'failed', events: 0, error: err, durationMs: this.deps.now() - started });
    try {
      await this.recordFailure(ref, err, started);
    } catch (e) {
      // Not even the failure could be stored (a full disk): still counted (the metrics, the
      // dashboard), then thrown, failing the cycle.
      this.observed(ref, outcome());
      throw e;
    }
    return this.observed(ref, outcome());
  }

  private observed(ref: EntityRef, o: PollOutcome): PollOutcome {
    this.deps.onPoll?.(ref.source.name, o);
    return o;
  }

  /**
   * Take a fetched value for an entity through hash, plan and commit.
   * Separate from poll() so benchmarks can measure the pipeline without the network.
   */
  async ingest(ref: EntityRef, data: unknown, started: number, opts: PollOptions = {}): Promise<PollOutcome> {
    const p = this.prepare(ref.source);
    const hash = contentHash(data, p.whole);
    const stateKey = `${ref.source.name}\u0000${ref.entity}`;
    const short = shortHash(hash);
    const packed = this.heads.get(ref);
    if (packed !== undefined && packed.startsWith(short) && !this.timed.has(stateKey)) {
      await this.recordSuccess(ref, started);
      return { entity: ref.entity, status: 'unchanged', events: 0 };
    }
    const cached = packed === undefined ? undefined : unpackHead(packed);
    const now = this.deps.now();
    // The API answered; the poll succeeds once what it read is stored.
    this.apiStreak = null;
    this.ingesting.set(stateKey, (this.ingesting.get(stateKey) ?? 0) + 1);
    try {
      const outcome = await this.ingestUnit(ref, data, opts, p, { hash, short, stateKey, cached, now, started });
      if (outcome.status !== 'failed') this.noteSuccess(started);
      return outcome;
    } catch (e) {
      // Its batch may have committed without becoming durable: what is stored is unknown.
      this.fresh = false;
      throw e;
    } finally {
      const left = this.ingesting.get(stateKey)! - 1;
      if (left === 0) this.ingesting.delete(stateKey);
      else this.ingesting.set(stateKey, left);
    }
  }

  /** The commit of an ingest (hash computed, not answered from memory), and what memory learns from it. */
  private async ingestUnit(
    ref: EntityRef,
    data: unknown,
    opts: PollOptions,
    p: PreparedSource,
    k: { hash: string; short: string; stateKey: string; cached: { hash: string; version: number } | undefined; now: number; started: number },
  ): Promise<PollOutcome> {
    const { hash, short, stateKey, cached, now, started } = k;
    const done = await this.commit(async (u) => {
      const { r } = u;
      // Asked in the unit: a unit before it in its batch may have removed sites.
      const unseen = cached === undefined && this.fresh && this.ingesting.get(stateKey) === 1;
      const head = cached ?? (unseen ? undefined : await r.snapshots.head(ref.source.name, ref.entity));
      const unchanged = head !== undefined && head.hash === (cached ? short : hash);
      const fromEmpty = head === undefined && opts.fromEmpty === true && ref.source.key !== undefined;
      const before =
        head === undefined ? (fromEmpty ? emptyOf(ref.source) : null) : unchanged ? data : JSON.parse((await r.snapshots.get(ref.source.name, ref.entity))!.body);
      // A baseline goes on from the change log's last version: a site that left the list and
      // came back must not reuse the ids (rule, subject, version) of its earlier change events.
      const version = unchanged ? head.version : (head?.version ?? (unseen ? null : await r.history.lastVersion(ref.source.name, ref.entity)) ?? 0) + 1;
      const plan = await this.plan(
        r,
        { source: ref.source, entity: ref.entity, siteId: ref.siteId, before, after: data, baseline: head === undefined && !fromEmpty, alertsOnly: unchanged, version, rules: p.rules },
        p,
        now,
        unseen,
      );
      const { events, evidence } = this.capChanges(r, ref, version, now, this.watchedOnly(plan.events), plan.evidence);
      const removedSites = ref.source.name === sitesSource.name && !unchanged ? this.removedSites(data) : [];
      // Their alerts are resolved under other entities' subjects, and `heads` forgets them.
      if (removedSites.length > 0) this.fresh = false;
      const snapshot: SnapshotRow | null = unchanged
        ? null
        : { source: ref.source.name, entity: ref.entity, site_id: ref.siteId, hash, body: JSON.stringify(data), version, changed_at: now };
      await this.writeSuccess(u, ref, started, { snapshot, events, alerts: plan.alerts, removedSites, evidence });
      const status: PollStatus = head === undefined ? 'baseline' : unchanged ? 'unchanged' : 'changed';
      return { plan, version, snapshot, removedSites, status, events: events.length, apiResolved: u.apiResolved };
    });
    // Committed: only now does memory move on (a failed commit leaves it as it was).
    this.afterPlan(stateKey, done.plan, true);
    this.afterSuccess(ref, done.removedSites, done.apiResolved);
    this.heads.set(ref, packHead(hash, done.version));
    if (done.snapshot && ref.source.name === sitesSource.name) this.directory.setSites(data);
    if (done.snapshot && ref.source.name === REPORT_CLIENTS) this.directory.setClients(data);
    return { entity: ref.entity, status: done.status, events: done.events };
  }

  /**
   * At most `max_events` change events from one poll; past it, one `source.mass_change`
   * event says how many more there were, and the snapshot (stored as usual, with its place
   * in the change log) keeps them for `rules backtest`. Alerts are never cut: each firing
   * has its state and its later resolution.
   */
  private capChanges(r: Repos, ref: EntityRef, version: number, at: number, events: HostwatchEvent[], evidence: EvidenceRow[]): { events: HostwatchEvent[]; evidence: EvidenceRow[] } {
    const max = this.deps.maxEvents?.(ref.source.name) ?? 100;
    const changes = events.filter((e) => e.data.status === undefined);
    if (changes.length <= max) return { events, evidence };
    const dropped = new Set(changes.slice(max).map((e) => e.id));
    const byEvent: Record<string, number> = {};
    for (const e of changes) byEvent[e.data.name] = (byEvent[e.data.name] ?? 0) + 1;
    const site = ref.siteId === null ? null : (this.directory.get(ref.siteId) ?? null);
    const summary = operatorEvent({
      rule: 'source-mass-change',
      instance: this.deps.instance,
      subject: ref.entity,
      at,
      id: changeEventId('source-mass-change', ref.entity, version),
      summary: `${ref.entity}: ${changes.length} changes in one poll; the first ${max} were sent as events, the other ${changes.length - max} are in the change log (hostwatch rules backtest shows them)`,
      extra: { site_id: ref.siteId, domain: site?.domain ?? null, source: ref.source.name, total: changes.length, sent: max, held: changes.length - max, by_event: byEvent, max_events: max },
    });
    // Logged once its summary is stored: the unit may be rolled back, or run again with its batch.
    r.afterCommit(() => this.deps.log.warn({ source: ref.source.name, entity: ref.entity, changes: changes.length, max_events: max }, 'mass change: events past max_events summed up in one source.mass_change'));
    return { events: [...events.filter((e) => !dropped.has(e.id)), summary], evidence: evidence.filter((r) => !dropped.has(r.event_id)) };
  }

  /**
   * Evaluate clock rules (`rules`, a subset of the source's) again on the stored snapshot of
   * an entity, at the present time, and commit what they decide: the re-evaluation that lets
   * `now` and absence rules fire and resolve without a poll. No request is made. An entity
   * whose last poll failed is skipped: its snapshot may be stale, and a failed fetch is not
   * a change (nor a reason to say "nothing arrived for 26 h"). Resolves with the events stored.
   */
  async reevaluate(source: SourceDef, entity: string, siteId: number | null, rules: SourceRules): Promise<number> {
    const key = `${source.name}\u0000${entity}`;
    if (this.failing.has(key)) return 0;
    const p = this.prepare(source);
    const now = this.deps.now();
    const done = await this.commit(async (u) => {
      const stored = await u.r.snapshots.get(source.name, entity);
      if (!stored) return null;
      const value: unknown = JSON.parse(stored.body);
      const plan = await this.plan(u.r, { source, entity, siteId, before: value, after: value, baseline: false, alertsOnly: true, reevaluation: true, version: stored.version, rules }, p, now);
      const events = this.watchedOnly(plan.events);
      if (events.length > 0 || plan.alerts.length > 0) await this.writeResult(u, events, plan.alerts, plan.evidence);
      return { plan, events: events.length };
    });
    if (!done) return 0;
    this.afterPlan(key, done.plan, false);
    return done.events;
  }

  /** Entities of a source that have a stored snapshot (for the re-evaluator). */
  storedEntities(source: SourceDef): Promise<Array<{ entity: string; site_id: number | null }>> {
    return this.r.snapshots.entitiesOf(source.name);
  }

  /**
   * Entities of a source whose last poll failed, as the store says: in a cluster another
   * member may have polled them (this one's memory knows only its own failures).
   */
  async failingEntities(source: SourceDef): Promise<Set<string>> {
    return new Set((await this.r.snapshots.failing(source.name, 1)).map((s) => s.entity));
  }

  /**
   * The planner over one snapshot pair (shared by polls and re-evaluations), in a unit.
   * What the plan may read of the store is read first (planReads), so the planner stays pure
   * and synchronous and plans on the state the unit commits against.
   */
  private async plan(r: Repos, call: PlanCall, p: PreparedSource, now: number, unseen = false): Promise<PlanOutput> {
    const { siteId, source, entity } = call;
    const reads = await this.planReads(r, call.rules, source, entity, call.before, call.after, now, unseen);
    // Every field named (no spreads): built once per changed poll, this object's spreads cost
    // about 30 µs of an alert's poll (CPU-only harness, docs/benchmarks.md run 18).
    return planEvents({
      instance: this.deps.instance,
      source,
      entity,
      entitySite: siteId === null ? null : (this.directory.get(siteId) ?? { id: siteId, domain: `site-${siteId}` }),
      siteLookup: (id) => this.directory.get(id) ?? null,
      before: call.before,
      after: call.after,
      baseline: call.baseline,
      alertsOnly: call.alertsOnly,
      reevaluation: call.reevaluation,
      version: call.version,
      rules: call.rules,
      recordDiff: p.record,
      alertState: reads.alertState,
      firingForSite: reads.firingForSite,
      pastValue: reads.pastValue,
      ruleByName: (name) => this.ruleByName.get(name),
      now: new Date(now),
    });
  }

  /**
   * What a plan of this entity may read of the store, read up front in the transaction: the
   * state of the rules' alerts about the entity and its records, the alerts firing for sites
   * a new site list drops, and the past values `window` rules see. A read the plan asks for
   * that was not made here is a bug, and throws. An `unseen` entity (see `fresh`) has no
   * alert state and no past in the store: neither is looked for.
   */
  private async planReads(r: Repos, rules: SourceRules, source: SourceDef, entity: string, before: unknown, after: unknown, now: number, unseen: boolean) {
    const alerts = new Map<string, AlertRow>();
    const alertRules = [...rules.alert, ...rules.entity].map((x) => x.name);
    if (!unseen) for (const a of await r.alerts.ofEntity(alertRules, entity)) alerts.set(`${a.rule}\u0000${a.subject}`, a);
    const firing = new Map<number, AlertRow[]>();
    if (source.name === sitesSource.name && before !== null) {
      const kept = new Set(listOf(sitesSource, after).map((rec) => rec['id']));
      for (const rec of listOf(sitesSource, before)) {
        const id = rec['id'];
        if (typeof id === 'number' && !kept.has(id)) firing.set(id, await r.alerts.firingForSite(id));
      }
    }
    const past = new Map<number, unknown>();
    for (const w of new Set([...rules.change, ...rules.alert, ...rules.entity].flatMap((x) => (x.windowMs === null ? [] : [x.windowMs])))) {
      const row = unseen ? undefined : await r.history.at(source.name, entity, now - w);
      past.set(now - w, row === undefined ? undefined : JSON.parse(row.body));
    }
    const unread = (what: string): never => {
      throw new Error(`plan of ${entity} read ${what}, which was not read before planning`);
    };
    return {
      alertState: (rule: string, subject: string) => alerts.get(`${rule}\u0000${subject}`),
      firingForSite: (id: number) => firing.get(id) ?? unread(`the alerts firing for site ${id}`),
      pastValue: (at: number) => (past.has(at) ? past.get(at) : unread(`a past value at ${at}`)),
    };
  }

  /** After a plan's commit: whether the entity's timers run, and its problems logged. */
  private afterPlan(stateKey: string, plan: PlanOutput, poll: boolean): void {
    if (plan.timed) this.timed.add(stateKey);
    else if (poll) this.timed.delete(stateKey);
    for (const problem of plan.problems) this.deps.log.warn({ source: stateKey.split('\u0000')[0] }, problem);
  }

  /** Events about sites outside config `sites` are dropped. */
  private watchedOnly(events: HostwatchEvent[]): HostwatchEvent[] {
    return this.watched ? events.filter((e) => e.data.site_id === null || this.watched!.has(e.data.site_id)) : events;
  }

  /**
   * After a cycle of a source: record the source's own poll state (one row per source,
   * entity ''), and fire or resolve its `source.degraded` operator alert from the
   * per-entity failure counts.
   */
  async finishCycle(source: SourceDef, outcomes: readonly PollOutcome[] = []): Promise<void> {
    const now = this.deps.now();
    const failures = outcomes.filter((o) => o.status === 'failed');
    const allFailed = outcomes.length > 0 && failures.length === outcomes.length;
    const firstError = failures[0]?.error;
    await this.commit(async (u) => {
      const prev = await u.r.snapshots.state(source.name, '');
      await u.r.snapshots.putState({
        source: source.name,
        entity: '',
        site_id: null,
        last_attempt_at: now,
        last_success_at: allFailed || outcomes.length === 0 ? (prev?.last_success_at ?? null) : now,
        consecutive_failures: allFailed ? (prev?.consecutive_failures ?? 0) + 1 : 0,
        last_error_code: firstError?.code ?? null,
        last_error: firstError ? this.deps.scrub(firstError.message) : null,
        failing_since: allFailed ? (prev?.failing_since ?? now) : null,
      });
      // The API-wide alert first: the failures it says are not also this source's degraded.
      if (allFailed) await this.apiAlert(u, source, failures);
      await this.degradedAlert(u, source);
    });
    // The end of a cycle is a batch boundary: an incident it opened is announced now, with
    // every site the cycle found (docs/routing.md, "Platform incidents").
    const settled = (await this.deps.incidents?.settle(new Set([source.name]))) ?? [];
    if (settled.length) this.deps.onEvents?.(settled);
  }

  /**
   * Every request of a cycle refused (401) or not reaching the panel, and no poll of any
   * source succeeded since another source's cycle failed the same way: fire the API-wide
   * alert at once. It resolves with the next successful poll of any source (writeSuccess).
   */
  private async apiAlert(u: Unit, source: SourceDef, failures: readonly PollOutcome[]): Promise<void> {
    const kind = apiFailureKind(failures[0]?.error);
    if (kind === null || !failures.every((o) => apiFailureKind(o.error) === kind)) return;
    if (this.apiStreak?.kind !== kind) return;
    this.apiStreak.sources.add(source.name);
    if (this.apiStreak.sources.size < 2) return;
    const state = await u.r.alerts.get(kind, API_SUBJECT);
    // Known as firing here too, whoever raised it, so that a success here resolves it.
    this.apiFiring.add(kind);
    if (state?.status === 'firing') return;
    const err = failures[0]!.error!;
    const summary =
      kind === 'api-unauthorized'
        ? `the Hosting Control API refuses the API key (401 on every request of ${[...this.apiStreak.sources].join(', ')}); check api.key`
        : `the Hosting Control API cannot be reached (${err.code} on every request of ${[...this.apiStreak.sources].join(', ')}); check api.base_url and the network`;
    const sources = [...this.apiStreak.sources];
    await this.operatorAlert(u, kind, API_SUBJECT, 'firing', state, { summary, source: source.name, sources, code: err.code, endpoint: err.endpoint, last_error: this.deps.scrub(err.message) });
  }

  /** Fire or resolve a source's `source.degraded` from the per-entity failure counts. */
  private async degradedAlert(u: Unit, source: SourceDef): Promise<void> {
    // A missing scope has its own operator event; it must not also count as degraded.
    // Degraded: N failed polls in a row, or at least two over `after` (a long interval
    // must not stretch the wait to N intervals).
    // Nor does a failure that a firing api.unauthorized / api.unreachable already says (a
    // revoked key fails every source: one alert, not one per source). It does not resolve a
    // source.degraded that fired before, either: the source is not polling normally.
    const { after_failures, after_ms } = this.deps.degraded ?? DEGRADED_DEFAULTS;
    const now = this.deps.now();
    const apiDown = new Set<string>();
    for (const kind of API_ALERTS) if ((await u.r.alerts.get(kind, API_SUBJECT))?.status === 'firing') apiDown.add(kind);
    const failed = (await u.r.snapshots.failing(source.name, Math.min(2, after_failures)))
      .filter((r) => r.last_error_code !== 'scope_missing')
      .filter((r) => r.consecutive_failures >= after_failures || (r.failing_since !== null && now - r.failing_since >= after_ms));
    const failing = failed.filter((r) => !apiDown.has(apiFailureKindOfCode(r.last_error_code) ?? ''));
    const subject = `sources/${source.name}`;
    const state = await u.r.alerts.get('source-degraded', subject);
    const firing = state?.status === 'firing';
    if (failing.length > 0 && !firing) {
      const sample = failing[0]!;
      await this.operatorAlert(u, 'source-degraded', subject, 'firing', state, {
        summary: `${source.name}: ${failing.length} ${failing.length === 1 ? 'entity' : 'entities'} failing (${sample.consecutive_failures} ${sample.consecutive_failures === 1 ? 'poll' : 'polls'} in a row, since ${new Date(sample.failing_since ?? now).toISOString()}; last error: ${sample.last_error_code})`,
        source: source.name,
        failing: failing.length,
        last_error: sample.last_error,
      });
    } else if (failed.length === 0 && firing) {
      await this.operatorAlert(u, 'source-degraded', subject, 'resolved', state, {
        summary: `${source.name} is polling normally again`,
        source: source.name,
        failing: 0,
      });
    }
  }

  private async recordFailure(ref: EntityRef, err: ApiError, at: number): Promise<void> {
    this.failing.add(`${ref.source.name}\u0000${ref.entity}`);
    const message = this.deps.scrub(err.message);
    let scopeFired: string | null = null;
    const { failures, same } = await this.commit(async (u) => {
      const prev = await u.r.snapshots.state(ref.source.name, ref.entity);
      await u.r.snapshots.putState({
        source: ref.source.name,
        entity: ref.entity,
        site_id: ref.siteId,
        last_attempt_at: at,
        last_success_at: prev?.last_success_at ?? null,
        consecutive_failures: (prev?.consecutive_failures ?? 0) + 1,
        last_error_code: err.code,
        last_error: message,
        failing_since: prev && prev.consecutive_failures > 0 ? (prev.failing_since ?? at) : at,
      });
      if (err.code === 'scope_missing') {
        const subject = `sources/${ref.source.name}`;
        const state = await u.r.alerts.get('source-scope-missing', subject);
        // Firing already (raised by another cluster member, or before a restart): this one
        // must know it too, to resolve it with the next success.
        scopeFired = subject;
        if (state?.status !== 'firing') {
          const required = err.requiredScope ?? ref.source.scope;
          await this.operatorAlert(u, 'source-scope-missing', subject, 'firing', state, {
            summary: `the API key lacks the scope ${required} that source ${ref.source.name} needs`,
            source: ref.source.name,
            required,
          });
        }
      }
      const count = (prev?.consecutive_failures ?? 0) + 1;
      // The same failure as the last poll's: its code, and for bad data what was wrong with it.
      const repeat = count > 1 && prev?.last_error_code === err.code && (err.code !== 'bad_response' || sameFault(prev.last_error, message));
      return { failures: count, same: repeat };
    });
    if (scopeFired) this.scopeMissing.add(scopeFired);
    // Warn when an entity starts failing, or fails in another way; repeats go to debug, so
    // an API outage over thousands of sites is one warning each, then the cycle summaries
    // and source.degraded.
    this.deps.log[same ? 'debug' : 'warn'](
      { source: ref.source.name, entity: ref.entity, code: err.code, status: err.statusCode, endpoint: err.endpoint, failures },
      `poll failed: ${message}`,
    );
  }

  /**
   * A poll succeeded (whatever it brings), what it read stored where there was anything to
   * store: /readyz's last success, and the end of an API-wide failure streak.
   */
  private noteSuccess(at: number): void {
    this.lastSuccessAt = Math.max(this.lastSuccessAt, at);
    this.apiStreak = null;
  }

  /**
   * A success that brought no data to store (unchanged, not applicable): it writes only a
   * recovery (poll state of a failing entity, a resolved missing scope or API-wide alert), so
   * an unchanged poll of a healthy entity touches no database at all.
   */
  private async recordSuccess(ref: EntityRef, at: number): Promise<void> {
    if (!this.failing.has(`${ref.source.name}\u0000${ref.entity}`) && !this.scopeMissing.has(`sources/${ref.source.name}`) && this.apiFiring.size === 0) {
      this.noteSuccess(at);
      return;
    }
    this.apiStreak = null;
    const resolved = await this.commit(async (u) => {
      await this.writeSuccess(u, ref, at, NOTHING);
      return u.apiResolved;
    });
    this.noteSuccess(at);
    this.afterSuccess(ref, [], resolved);
  }

  /**
   * Write a successful poll (inside its transaction): snapshot and change-log row, forgotten
   * sites, events (with their outbox rows), alert state, evidence and poll state, together
   * or not at all (invariant 4). An entity's poll state is written on recovery only: its
   * row holds a failure streak, so an entity that never failed has none (the source's own
   * row, written when a cycle ends, holds the last success; the row a first poll used to
   * write for every entity was read by nothing). A missing scope and API-wide alerts firing
   * resolve.
   */
  private async writeSuccess(u: Unit, ref: EntityRef, at: number, s: Success): Promise<void> {
    const { r } = u;
    if (s.snapshot) {
      await r.snapshots.put(s.snapshot);
      const { source, entity, site_id, version, changed_at, body } = s.snapshot;
      await r.history.add({ source, entity, site_id, version, at: changed_at, body });
    }
    for (const id of s.removedSites) await r.snapshots.forgetSite(id);
    await this.writeResult(u, s.events, s.alerts, s.evidence);
    if (this.failing.has(`${ref.source.name}\u0000${ref.entity}`)) {
      const row: PollStateRow = {
        source: ref.source.name,
        entity: ref.entity,
        site_id: ref.siteId,
        last_attempt_at: at,
        last_success_at: at,
        consecutive_failures: 0,
        last_error_code: null,
        last_error: null,
        failing_since: null,
      };
      await r.snapshots.putState(row);
    }
    // One request got through: the key works and the panel answers. (Another poll of this
    // batch may have resolved them already: the state is read in the transaction.)
    for (const kind of this.apiFiring) {
      u.apiResolved.push(kind);
      const state = await r.alerts.get(kind, API_SUBJECT);
      if (state?.status !== 'firing') continue;
      await this.operatorAlert(u, kind, API_SUBJECT, 'resolved', state, {
        summary: kind === 'api-unauthorized' ? 'the Hosting Control API accepts the API key again' : 'the Hosting Control API can be reached again',
        source: ref.source.name,
      });
    }
    const scopeSubject = `sources/${ref.source.name}`;
    if (this.scopeMissing.has(scopeSubject)) {
      const scope = await r.alerts.get('source-scope-missing', scopeSubject);
      if (scope?.status === 'firing') {
        await this.operatorAlert(u, 'source-scope-missing', scopeSubject, 'resolved', scope, {
          summary: `source ${ref.source.name} can read again`,
          source: ref.source.name,
          required: ref.source.scope,
        });
      }
    }
  }

  /**
   * Write what a plan decided (inside the caller's transaction): events (stored and
   * dispatched), alert state and evidence; then tell platform incidents of the alert events.
   */
  private async writeResult(u: Unit, events: HostwatchEvent[], alerts: AlertRow[], evidence: EvidenceRow[]): Promise<void> {
    const fresh: HostwatchEvent[] = [];
    for (const e of events) if (await this.addEvent(u, e)) fresh.push(e);
    u.added.push(...fresh);
    for (const a of alerts) await u.r.alerts.put(a);
    for (const ev of evidence) await u.r.history.putEvidence(ev);
    if (this.deps.incidents && fresh.some((e) => e.data.status === 'firing')) u.added.push(...(await this.deps.incidents.onAlerts(u.r, fresh)));
  }

  /** After a committed success: the entity no longer fails, its scope is back, API-wide alerts resolved, removed sites leave memory. */
  private afterSuccess(ref: EntityRef, removedSites: number[], apiResolved: readonly OperatorRule[]): void {
    this.scopeMissing.delete(`sources/${ref.source.name}`);
    for (const kind of apiResolved) this.apiFiring.delete(kind);
    this.failing.delete(`${ref.source.name}\u0000${ref.entity}`);
    if (removedSites.length === 0) return;
    this.fetcher.forgetSites(removedSites);
    this.heads.forgetSites(removedSites);
    // One pass over the in-memory state for all removed sites (not one per site).
    const gone = new Set(removedSites.map(String));
    const isGone = (key: string): boolean => {
      const m = /\u0000sites\/(\d+)\//.exec(key);
      return m !== null && gone.has(m[1]!);
    };
    for (const k of [...this.failing]) if (isGone(k)) this.failing.delete(k);
    for (const k of [...this.timed]) if (isGone(k)) this.timed.delete(k);
  }

  /**
   * Entities of `source` for these sites (null: the account) come back to this instance
   * from another cluster member, which may have polled and stored them meanwhile: what this
   * instance kept in memory about them (the last hash and version, conditional-request
   * validators, pending timers) may be stale, so it is dropped and read again from the
   * database on the next poll. Their detail records go with them.
   */
  handedOver(source: string, siteIds: ReadonlyArray<number | null>): void {
    this.fresh = false;
    const sites = siteIds.filter((id): id is number => id !== null);
    const account = siteIds.includes(null);
    const def = sourceByName(source);
    // Only this source's entities (and its details and views) changed hands: the other
    // sources of these sites keep their heads and validators.
    const handed = new Set([source, ...(def ? [...childrenOf(def), ...viewsOf(def)].map((s) => s.name) : [])]);
    this.fetcher.forgetSites(sites, handed);
    this.heads.forgetSites(sites, handed);
    if (account) {
      this.fetcher.forgetSource(source);
      this.heads.forgetSource(source);
    }
    const ids = new Set(sites.map(String));
    const stale = (key: string): boolean => {
      const m = /\u0000sites\/(\d+)(\/|$)/.exec(key);
      if (m) return ids.has(m[1]!);
      return account && key.startsWith(`${source}\u0000`);
    };
    for (const k of [...this.timed]) if (stale(k)) this.timed.delete(k);
    // What another member failed is known only to the store: counted as maybe failing, the
    // next success here writes the poll state (and resolves source.degraded) once.
    if (def) for (const id of siteIds) this.failing.add(`${source}\u0000${entityOf(def, id === null ? null : { id, domain: '' }).entity}`);
  }

  /**
   * Run `writes` as one unit of the store's commit queue (one transaction, shared with other
   * polls that finish close by); the events it adds are announced (outbox worker, bus, SSE,
   * metrics) only after the real COMMIT, so nothing leaves the process for a commit that
   * could still roll back. Callers update in-memory state after this resolves.
   *
   * `writes` may run more than once (the store runs it again if another unit of its batch
   * failed): it must read what it needs in the transaction and keep its results in the unit
   * or its return value, which belong to the run that committed. What it changes outside
   * (a set it adds to) must come out the same when done twice; a log line about what it
   * wrote goes through `u.r.afterCommit`, which runs once, for the run that committed.
   */
  private async commit<T>(writes: (u: Unit) => Promise<T>): Promise<T> {
    let unit: Unit | null = null;
    // Patient: a poll's result may wait a little for others to share its commit.
    // Repeatable: its batch needs no savepoints (CommitQueue).
    const result = await this.deps.store.transaction(
      async (tx) => {
        unit = { r: repos(tx), added: [], apiResolved: [] };
        return writes(unit);
      },
      { patient: true, repeatable: true },
    );
    const added = (unit as Unit | null)?.added ?? [];
    if (added.length) this.deps.onEvents?.(added);
    return result;
  }

  /**
   * Store an event and hand it to the notifier (same transaction), which queues it for its
   * channels or records why it is held back. False when it was already stored.
   */
  private async addEvent(u: Unit, e: HostwatchEvent): Promise<boolean> {
    if (!(await u.r.events.addEvent(toEventRow(e)))) return false;
    // A shadow rule's event is stored and shown, never delivered (and so never silenced).
    if (e.data['shadow'] === true) return true;
    const now = this.deps.now();
    // Resolutions are matched like firings (docs/silences.md). Read once per batch, at its
    // first event: a silence added by another process applies to the next commit.
    await this.deps.notifier.dispatch(u.r, e, now, await u.r.silences.active(now));
    return true;
  }

  /** Fire or resolve an operator alert (src/events/operator.ts): its event and its alert row, in the unit's transaction. */
  private async operatorAlert(
    u: Unit,
    rule: OperatorRule,
    subject: string,
    status: 'firing' | 'resolved',
    state: AlertRow | undefined,
    extra: Record<string, unknown> & { summary: string },
  ): Promise<void> {
    const seq = status === 'firing' ? (state?.seq ?? 0) + 1 : (state?.seq ?? 1);
    const at = this.deps.now();
    const { summary, ...rest } = extra;
    const event = operatorEvent({ rule, instance: this.deps.instance, subject, at, summary, alert: { seq, status }, extra: rest });
    if (await this.addEvent(u, event)) u.added.push(event);
    await u.r.alerts.put({ rule, subject, site_id: null, status, seq, since: at, last_event_id: event.id, pending_since: null, clear_since: null, last_sent_at: at, repeats: 0 });
  }

  private prepare(def: SourceDef): PreparedSource {
    let p = this.prepared.get(def.name);
    if (!p) {
      p = {
        def,
        rules: sourceRules(this.deps.rules, def.name),
        whole: compileDiffOptions({ key: def.key ?? 'id', volatile: def.volatile }),
        record: compileDiffOptions({ key: 'id', volatile: recordVolatile(def) }),
        views: viewsOf(def, this.deps.sources ?? []),
      };
      this.prepared.set(def.name, p);
    }
    return p;
  }

  /** Ids in the current directory that are missing from a new site list. */
  private removedSites(data: unknown): number[] {
    const now = new Set(listOf(sitesSource, data).map((r) => r['id']));
    return [...this.directory.ids()].filter((id) => !now.has(id));
  }
}

export { recordVolatile };

/** How a refused empty list is told, and found again in its poll state (listProblem). */
const CAME_BACK_EMPTY = 'came back empty';

/** Two bad-data messages tell of the same fault: equal but for the numbers in them (an item's index, a byte count, a position). */
function sameFault(a: string | null, b: string): boolean {
  const shape = (m: string): string => m.replace(/\d+/g, '#');
  return a !== null && shape(a) === shape(b);
}

/**
 * The first 120 bits of a content hash as 20 base64url characters, in a string of its own
 * (a slice of the hex would keep all 64 characters alive): what the head cache compares.
 * Equal full hashes give equal short ones; a false "unchanged" needs a 2^-120 collision.
 */
function shortHash(hex: string): string {
  return Buffer.from(hex.slice(0, 30), 'hex').toString('base64url');
}

/** Bytes of a packed head: the short hash's 15, then the version's 6 (versions count changes: 2^48 is never reached). */
const HEAD_HASH_BYTES = 15;
const HEAD_BYTES = HEAD_HASH_BYTES + 6;

/**
 * A head as the poller keeps it: the short hash and the version in one flat string of 28
 * base64url characters, which starts with shortHash(hex) (15 bytes are 20 whole characters).
 * One string per entity instead of an object and a string (130,000 of them at 10,000 sites).
 */
function packHead(hex: string, version: number): string {
  const b = Buffer.allocUnsafe(HEAD_BYTES);
  b.write(hex.slice(0, HEAD_HASH_BYTES * 2), 0, HEAD_HASH_BYTES, 'hex');
  b.writeUIntBE(version, HEAD_HASH_BYTES, HEAD_BYTES - HEAD_HASH_BYTES);
  return b.toString('base64url');
}

/** The short hash and the version of a packed head (packHead). */
function unpackHead(packed: string): { hash: string; version: number } {
  const b = Buffer.from(packed, 'base64url');
  return { hash: b.toString('base64url', 0, HEAD_HASH_BYTES), version: b.readUIntBE(HEAD_HASH_BYTES, HEAD_BYTES - HEAD_HASH_BYTES) };
}

/** The value a keyed source has when it holds no records yet. */
function emptyOf(source: SourceDef): unknown {
  return source.listField === undefined ? [] : {};
}
