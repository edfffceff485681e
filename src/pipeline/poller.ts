import type { Logger } from 'pino';
import type { ApiClient } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { compileDiffOptions, contentHash, type CompiledDiffOptions } from '../diff/index.js';
import { alertEventId, alertId, envelope } from '../events/envelope.js';
import type { HostwatchEvent, Severity } from '../events/types.js';
import type { Notifier } from '../notify/notifier.js';
import type { Silence } from '../notify/silences.js';
import type { CompiledRule } from '../rules/types.js';
import { checkShape, Fetcher } from '../sources/fetch.js';
import { recordVolatile } from '../sources/records.js';
import { entityOf, pathOf, sitesSource, viewsOf } from '../sources/registry.js';
import type { EntityRef, SiteInfo, SourceDef } from '../sources/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { toEventRow } from '../store/events-repo.js';
import type { EvidenceRow } from '../store/history-repo.js';
import { repos, type Repos } from '../store/repos.js';
import type { PollStateRow, SnapshotRow } from '../store/snapshots-repo.js';
import { listOf, planEvents, siteInfoFromRecord, sourceRules, type PlanOutput, type SourceRules } from './plan.js';

/** A source is degraded when an entity of it failed this many polls in a row. */
export const DEGRADED_AFTER = 3;

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
  /** Fetches entities (conditional requests, per-source options); default: a plain Fetcher over `client`. */
  fetcher?: Fetcher;
  /** The enabled sources; views among them are ingested from their origin's fetch. Default: none. */
  sources?: readonly SourceDef[];
  /** Called with every fetched value once it is committed (detail follow-ups, adaptive polling). */
  onFetched?: (ref: EntityRef, data: unknown) => void;
  /** Called after a commit that added events (wakes the outbox worker, feeds the demo). */
  onEvents?: (events: HostwatchEvent[]) => void;
}

/** `not_applicable`: the API said the resource does not apply here (409 off the CDN); nothing written. */
export type PollStatus = 'baseline' | 'changed' | 'unchanged' | 'not_applicable' | 'failed';

/** How to take a per-record entity that has no snapshot yet. */
export interface PollOptions {
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
  /** Names of the source's alert rules (whose state a plan reads). */
  alertRules: string[];
  /** The distinct `window` lengths of the source's rules (the past values a plan reads). */
  windows: number[];
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
  /** Active silences, read once per unit (at its first event), so a silence added by another process applies to the next commit. */
  silences: Silence[] | null;
}

/** What a successful poll writes (see writeSuccess). */
interface Success {
  first: boolean;
  snapshot: SnapshotRow | null;
  events: HostwatchEvent[];
  alerts: AlertRow[];
  removedSites: number[];
  evidence: EvidenceRow[];
}

const NOTHING: Success = { first: false, snapshot: null, events: [], alerts: [], removedSites: [], evidence: [] };

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
   * The stored hash and version of each entity polled since this process started. Being
   * here also means its alert conditions were checked in this process. An unchanged poll
   * is answered from this map without touching the database (the common case).
   */
  private readonly heads = new Map<string, { hash: string; version: number }>();
  /**
   * Entities with an alert whose timer runs (`for`, `keep_firing_for`, `repeat`): an
   * unchanged poll of these is still planned, because time alone can fire, resolve or
   * re-send. Filled by each plan; after a restart the first poll of every entity plans.
   */
  private readonly timed = new Set<string>();
  private directory = new Map<number, SiteInfo>();
  private readonly watched: ReadonlySet<number> | null;
  /** Entities whose last poll failed (so a success must write their recovery). */
  private readonly failing = new Set<string>();
  /** Sources with a firing source.scope_missing alert. */
  private readonly scopeMissing = new Set<string>();
  /** The repositories on the store itself (reads outside a transaction). */
  private readonly r: Repos;
  private readonly fetcher: Fetcher;

  private constructor(private readonly deps: PollerDeps) {
    this.fetcher = deps.fetcher ?? new Fetcher(deps.client);
    this.ruleByName = new Map(deps.rules.map((r) => [r.name, r]));
    this.watched = deps.sites === undefined || deps.sites === 'all' ? null : new Set(deps.sites);
    this.r = repos(deps.store);
  }

  /** A poller with its site directory, failing entities and missing scopes read from the store. */
  static async open(deps: PollerDeps): Promise<Poller> {
    const p = new Poller(deps);
    const row = await p.r.snapshots.get(sitesSource.name, sitesSource.name);
    if (row) p.setDirectory(JSON.parse(row.body));
    for (const s of await p.r.snapshots.allFailing()) p.failing.add(`${s.source}\u0000${s.entity}`);
    for (const a of await p.r.alerts.firing()) if (a.rule === 'source-scope-missing') p.scopeMissing.add(a.subject);
    return p;
  }

  /** The sites known from the last stored site list, in id order. */
  sites(): SiteInfo[] {
    return [...this.directory.values()].sort((a, b) => a.id - b.id);
  }

  /** Poll one entity and commit what it caused. Never throws for API failures. */
  async poll(source: SourceDef, site: SiteInfo | null, recordKey?: string, opts: PollOptions = {}): Promise<PollOutcome> {
    const ref = entityOf(source, site, recordKey);
    const started = this.deps.now();
    let got;
    try {
      got = await this.fetcher.fetch(ref);
    } catch (e) {
      const err = e instanceof ApiError ? e : new ApiError({ code: 'bad_response', endpoint: ref.entity, message: String(e) });
      opts.afterFetch?.(err);
      return this.failed(ref, err, started);
    }
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
    let outcome: PollOutcome;
    try {
      outcome = await this.ingest(ref, got.data, started, opts);
      const endpoint = pathOf(source, ref.siteId, recordKey);
      for (const view of this.prepare(source).views) await this.ingestView(view, site, recordKey, endpoint, got.data, started, opts);
      // Detail follow-ups and adaptive polling see a reply only once it is committed.
      this.deps.onFetched?.(ref, got.data);
    } catch (e) {
      // Nothing was committed for this reply: a later 304 must not stand for it.
      this.fetcher.forget(ref);
      throw e;
    }
    outcome.durationMs = this.deps.now() - started;
    return this.observed(ref, outcome);
  }

  /** An entity the server said is unchanged (304): replanned on its stored snapshot if a timer runs. */
  private async unchanged(ref: EntityRef, started: number, opts: PollOptions): Promise<PollOutcome> {
    const stored = this.timed.has(`${ref.source.name}\u0000${ref.entity}`) ? await this.r.snapshots.get(ref.source.name, ref.entity) : undefined;
    if (stored) return this.ingest(ref, JSON.parse(stored.body), started, opts);
    await this.recordSuccess(ref, started);
    return { entity: ref.entity, status: 'unchanged', events: 0 };
  }

  /** A view re-reads its origin's reply as its own entity (own key, own volatile fields, own rules). */
  private async ingestView(view: SourceDef, site: SiteInfo | null, recordKey: string | undefined, endpoint: string, data: unknown, started: number, opts: PollOptions): Promise<void> {
    const ref = entityOf(view, site, recordKey);
    try {
      // A view has no request of its own: a bad reply is named by its origin's endpoint.
      checkShape(ref, endpoint, data);
    } catch (e) {
      await this.failed(ref, e as ApiError, started);
      return;
    }
    this.observed(ref, await this.ingest(ref, data, started, opts));
  }

  private async failed(ref: EntityRef, err: ApiError, started: number): Promise<PollOutcome> {
    await this.recordFailure(ref, err, started);
    return this.observed(ref, { entity: ref.entity, status: 'failed', events: 0, error: err, durationMs: this.deps.now() - started });
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
    const cached = this.heads.get(stateKey);
    if (cached !== undefined && cached.hash === hash && !this.timed.has(stateKey)) {
      await this.recordSuccess(ref, started);
      return { entity: ref.entity, status: 'unchanged', events: 0 };
    }
    const now = new Date(this.deps.now());
    const done = await this.commit(async (u) => {
      const { r } = u;
      const head = cached ?? (await r.snapshots.head(ref.source.name, ref.entity));
      const unchanged = head !== undefined && head.hash === hash;
      const fromEmpty = head === undefined && opts.fromEmpty === true && ref.source.key !== undefined;
      const before =
        head === undefined ? (fromEmpty ? emptyOf(ref.source) : null) : unchanged ? data : JSON.parse((await r.snapshots.get(ref.source.name, ref.entity))!.body);
      // A baseline goes on from the change log's last version: a site that left the list and
      // came back must not reuse the ids (rule, subject, version) of its earlier change events.
      const version = unchanged ? head.version : (head?.version ?? (await r.history.lastVersion(ref.source.name, ref.entity)) ?? 0) + 1;
      const reads = await this.planReads(r, p, ref, before, data, now.getTime());
      const plan = planEvents({
        instance: this.deps.instance,
        source: ref.source,
        entity: ref.entity,
        entitySite: ref.siteId === null ? null : (this.directory.get(ref.siteId) ?? { id: ref.siteId, domain: `site-${ref.siteId}` }),
        siteLookup: (id) => this.directory.get(id) ?? null,
        before,
        after: data,
        baseline: head === undefined && !fromEmpty,
        alertsOnly: unchanged,
        version,
        rules: p.rules,
        recordDiff: p.record,
        ...reads,
        ruleByName: (name) => this.ruleByName.get(name),
        now,
      });
      const events = this.watched ? plan.events.filter((e) => e.data.site_id === null || this.watched!.has(e.data.site_id)) : plan.events;
      const removedSites = ref.source.name === sitesSource.name && !unchanged ? this.removedSites(data) : [];
      const snapshot: SnapshotRow | null = unchanged
        ? null
        : { source: ref.source.name, entity: ref.entity, site_id: ref.siteId, hash, body: JSON.stringify(data), version, changed_at: now.getTime() };
      await this.writeSuccess(u, ref, started, { first: head === undefined, snapshot, events, alerts: plan.alerts, removedSites, evidence: plan.evidence });
      const status: PollStatus = head === undefined ? 'baseline' : unchanged ? 'unchanged' : 'changed';
      return { plan, version, snapshot, removedSites, status, events: events.length };
    });
    // Committed: only now does memory move on (a failed commit leaves it as it was).
    this.afterPlan(stateKey, done.plan);
    this.afterSuccess(ref, done.removedSites);
    this.heads.set(stateKey, { hash, version: done.version });
    if (done.snapshot && ref.source.name === sitesSource.name) this.setDirectory(data);
    return { entity: ref.entity, status: done.status, events: done.events };
  }

  /**
   * What the plan of this entity may read of the store, read up front in the transaction so
   * the planner stays pure and synchronous: the state of the source's alerts about the entity,
   * the alerts firing for sites a new site list drops, and the past values `window` rules see.
   * A read the plan asks for that was not made here is a bug, and throws.
   */
  private async planReads(r: Repos, p: PreparedSource, ref: EntityRef, before: unknown, after: unknown, now: number) {
    const alerts = new Map<string, AlertRow>();
    for (const a of await r.alerts.ofEntity(p.alertRules, ref.entity)) alerts.set(`${a.rule}\u0000${a.subject}`, a);
    const firing = new Map<number, AlertRow[]>();
    if (ref.source.name === sitesSource.name && before !== null) {
      const kept = new Set(listOf(sitesSource, after).map((rec) => rec['id']));
      for (const rec of listOf(sitesSource, before)) {
        const id = rec['id'];
        if (typeof id === 'number' && !kept.has(id)) firing.set(id, await r.alerts.firingForSite(id));
      }
    }
    const past = new Map<number, unknown>();
    for (const w of p.windows) {
      const row = await r.history.at(ref.source.name, ref.entity, now - w);
      past.set(now - w, row === undefined ? undefined : JSON.parse(row.body));
    }
    const unread = (what: string): never => {
      throw new Error(`plan of ${ref.entity} read ${what}, which was not read before planning`);
    };
    return {
      alertState: (rule: string, subject: string) => alerts.get(`${rule}\u0000${subject}`),
      firingForSite: (id: number) => firing.get(id) ?? unread(`the alerts firing for site ${id}`),
      pastValue: (at: number) => (past.has(at) ? past.get(at) : unread(`a past value at ${at}`)),
    };
  }

  private afterPlan(stateKey: string, plan: PlanOutput): void {
    if (plan.timed) this.timed.add(stateKey);
    else this.timed.delete(stateKey);
    for (const problem of plan.problems) this.deps.log.warn({ source: stateKey.split('\u0000')[0] }, problem);
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
      });
      await this.degradedAlert(u, source);
    });
  }

  /** Fire or resolve a source's `source.degraded` from the per-entity failure counts. */
  private async degradedAlert(u: Unit, source: SourceDef): Promise<void> {
    // A missing scope has its own operator event; it must not also count as degraded.
    const failing = (await u.r.snapshots.failing(source.name, DEGRADED_AFTER)).filter((r) => r.last_error_code !== 'scope_missing');
    const subject = `sources/${source.name}`;
    const state = await u.r.alerts.get('source-degraded', subject);
    const firing = state?.status === 'firing';
    if (failing.length > 0 && !firing) {
      const sample = failing[0]!;
      await this.operatorAlert(u, 'source-degraded', 'source.degraded', 'warning', subject, 'firing', state, {
        summary: `${source.name}: ${failing.length} ${failing.length === 1 ? 'entity' : 'entities'} failed ${DEGRADED_AFTER}+ polls in a row (last error: ${sample.last_error_code})`,
        source: source.name,
        failing: failing.length,
        last_error: sample.last_error,
      });
    } else if (failing.length === 0 && firing) {
      await this.operatorAlert(u, 'source-degraded', 'source.degraded', 'warning', subject, 'resolved', state, {
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
    const failures = await this.commit(async (u) => {
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
      });
      if (err.code === 'scope_missing') {
        const subject = `sources/${ref.source.name}`;
        const state = await u.r.alerts.get('source-scope-missing', subject);
        if (state?.status !== 'firing') {
          scopeFired = subject;
          const required = err.requiredScope ?? ref.source.scope;
          await this.operatorAlert(u, 'source-scope-missing', 'source.scope_missing', 'critical', subject, 'firing', state, {
            summary: `the API key lacks the scope ${required} that source ${ref.source.name} needs`,
            source: ref.source.name,
            required,
          });
        }
      }
      return (prev?.consecutive_failures ?? 0) + 1;
    });
    if (scopeFired) this.scopeMissing.add(scopeFired);
    // Warn when an entity starts failing; repeats go to debug, so an API outage over
    // thousands of sites is one warning each, then the cycle summaries and source.degraded.
    this.deps.log[failures > 1 ? 'debug' : 'warn'](
      { source: ref.source.name, entity: ref.entity, code: err.code, status: err.statusCode, endpoint: err.endpoint, failures },
      `poll failed: ${message}`,
    );
  }

  /**
   * A success that brought no data to store (unchanged, not applicable): it writes only a
   * recovery (poll state of a failing entity, a resolved missing scope), so an unchanged
   * poll of a healthy entity touches no database at all.
   */
  private async recordSuccess(ref: EntityRef, at: number): Promise<void> {
    if (!this.failing.has(`${ref.source.name}\u0000${ref.entity}`) && !this.scopeMissing.has(`sources/${ref.source.name}`)) return;
    await this.commit((u) => this.writeSuccess(u, ref, at, NOTHING));
    this.afterSuccess(ref, []);
  }

  /**
   * Write a successful poll (inside its transaction): snapshot and change-log row, forgotten
   * sites, events (with their outbox rows), alert state, evidence and poll state, together
   * or not at all (invariant 4). Poll state is written on the first success and on recovery.
   */
  private async writeSuccess(u: Unit, ref: EntityRef, at: number, s: Success): Promise<void> {
    const { r } = u;
    if (s.snapshot) {
      await r.snapshots.put(s.snapshot);
      const { source, entity, site_id, version, changed_at, body } = s.snapshot;
      await r.history.add({ source, entity, site_id, version, at: changed_at, body });
    }
    for (const id of s.removedSites) await r.snapshots.forgetSite(id);
    for (const e of s.events) if (await this.addEvent(u, e)) u.added.push(e);
    for (const a of s.alerts) await r.alerts.put(a);
    for (const ev of s.evidence) await r.history.putEvidence(ev);
    if (s.first || this.failing.has(`${ref.source.name}\u0000${ref.entity}`)) {
      const row: PollStateRow = {
        source: ref.source.name,
        entity: ref.entity,
        site_id: ref.siteId,
        last_attempt_at: at,
        last_success_at: at,
        consecutive_failures: 0,
        last_error_code: null,
        last_error: null,
      };
      await r.snapshots.putState(row);
    }
    const scopeSubject = `sources/${ref.source.name}`;
    if (this.scopeMissing.has(scopeSubject)) {
      const scope = await r.alerts.get('source-scope-missing', scopeSubject);
      // Another poll of the source may have resolved it in this batch already.
      if (scope?.status === 'firing') {
        await this.operatorAlert(u, 'source-scope-missing', 'source.scope_missing', 'critical', scopeSubject, 'resolved', scope, {
          summary: `source ${ref.source.name} can read again`,
          source: ref.source.name,
          required: ref.source.scope,
        });
      }
    }
  }

  /** After a committed success: the entity no longer fails, its scope is back, removed sites leave memory. */
  private afterSuccess(ref: EntityRef, removedSites: number[]): void {
    this.scopeMissing.delete(`sources/${ref.source.name}`);
    this.failing.delete(`${ref.source.name}\u0000${ref.entity}`);
    if (removedSites.length === 0) return;
    for (const id of removedSites) this.fetcher.forgetSite(id);
    // One pass over the in-memory state for all removed sites (not one per site).
    const gone = new Set(removedSites.map(String));
    const isGone = (key: string): boolean => {
      const m = /\u0000sites\/(\d+)\//.exec(key);
      return m !== null && gone.has(m[1]!);
    };
    for (const k of [...this.failing]) if (isGone(k)) this.failing.delete(k);
    for (const k of [...this.heads.keys()]) if (isGone(k)) this.heads.delete(k);
    for (const k of [...this.timed]) if (isGone(k)) this.timed.delete(k);
  }

  /**
   * Run `writes` as one unit of the store's commit queue (one transaction, shared with other
   * polls that finish close by); the events it adds are announced (outbox worker, bus, SSE,
   * metrics) only after the real COMMIT, so nothing leaves the process for a commit that
   * could still roll back. Callers update in-memory state after this resolves.
   */
  private async commit<T>(writes: (u: Unit) => Promise<T>): Promise<T> {
    let unit: Unit | null = null;
    const result = await this.deps.store.transaction(async (tx) => {
      unit = { r: repos(tx), added: [], silences: null };
      return writes(unit);
    });
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
    // Resolutions are matched like firings (docs/silences.md).
    u.silences ??= await u.r.silences.active(now);
    await this.deps.notifier.dispatch(u.r, e, now, u.silences);
    return true;
  }

  /** The two operator events (source.*) are the only ones not defined in rule files. */
  private async operatorAlert(
    u: Unit,
    rule: string,
    name: string,
    severity: Severity,
    subject: string,
    status: 'firing' | 'resolved',
    state: AlertRow | undefined,
    extra: Record<string, unknown> & { summary: string },
  ): Promise<void> {
    const seq = status === 'firing' ? (state?.seq ?? 0) + 1 : (state?.seq ?? 1);
    const id = alertEventId(rule, subject, seq, status);
    const now = new Date(this.deps.now());
    const { summary, ...rest } = extra;
    const event = envelope({
      id,
      instance: this.deps.instance,
      subject,
      time: now,
      data: { name, severity, status, alert_id: alertId(rule, subject, seq), summary, site_id: null, domain: null, changes: [], rule, observed_at: now.toISOString(), ...rest },
    });
    if (await this.addEvent(u, event)) u.added.push(event);
    const t = now.getTime();
    await u.r.alerts.put({ rule, subject, site_id: null, status, seq, since: t, last_event_id: id, pending_since: null, clear_since: null, last_sent_at: t, repeats: 0 });
  }

  private prepare(def: SourceDef): PreparedSource {
    let p = this.prepared.get(def.name);
    if (!p) {
      const rules = sourceRules(this.deps.rules, def.name);
      const windows = new Set([...rules.change, ...rules.alert].flatMap((r) => (r.windowMs === null ? [] : [r.windowMs])));
      p = {
        def,
        rules,
        alertRules: rules.alert.map((r) => r.name),
        windows: [...windows],
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
    return [...this.directory.keys()].filter((id) => !now.has(id));
  }

  private setDirectory(data: unknown): void {
    const next = new Map<number, SiteInfo>();
    for (const rec of listOf(sitesSource, data)) {
      if (typeof rec['id'] === 'number') next.set(rec['id'], siteInfoFromRecord(rec));
    }
    this.directory = next;
  }
}

export { recordVolatile };

/** The value a keyed source has when it holds no records yet. */
function emptyOf(source: SourceDef): unknown {
  return source.listField === undefined ? [] : {};
}
