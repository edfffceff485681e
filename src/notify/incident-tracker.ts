import type { Logger } from 'pino';
import type { IncidentsConfig } from '../config/types.js';
import type { HostwatchEvent, Severity } from '../events/types.js';
import type { CompiledRule } from '../rules/types.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { repos, type Repos } from '../store/repos.js';
import type { Notifier } from './notifier.js';
import {
  alertSeverities,
  coveredAlerts,
  incidentEvent,
  incidentHeldChannels,
  incidentHold,
  incidentSubject,
  incidentThreshold,
  INCIDENT_RULE,
  stepIncident,
  type FiringSite,
} from './incidents.js';

// The stateful side of platform incidents. Their rules (incidents.ts) need no database, so
// the commands that only check a config load them without a database driver.

/** What the tracker needs of the rest of the program. */
export interface IncidentDeps {
  config: IncidentsConfig;
  rules: readonly CompiledRule[];
  /** Where `settle` runs its own transaction; everything else uses the caller's. */
  store: Store;
  notifier: Pick<Notifier, 'publishIn' | 'releaseHeld'>;
  /** The channels an incident about an alert holds its per-site alerts from (their pending rows are taken back): see incidentHeldChannels. */
  heldChannels: (alert: string) => readonly string[];
  /** How many sites are watched now (for a percentage threshold). */
  watched: () => number;
  /** Whether a site is watched (config `sites`): alerts of other sites never count. */
  isWatched: (siteId: number) => boolean;
  /** The domain of a site, for the incident's site list. */
  domainOf: (siteId: number) => string | null;
  instance: string;
  now: () => number;
  log: Logger;
}


/** Where a batch transaction keeps the incidents' rows (Repos.memo). */
const MEMO_KEY = 'incidents:rows';

/**
 * Opens, announces and ends platform incidents (the imperative shell around stepIncident).
 * `onAlerts` runs inside a poll's transaction (its repositories); `settle` in its own.
 */
export class IncidentTracker {
  private readonly rulesOf = new Map<string, string[]>();
  private readonly sourcesOf = new Map<string, Set<string>>();
  private readonly severityOf: Map<string, Severity>;
  private readonly covered: ReadonlySet<string>;

  constructor(private readonly deps: IncidentDeps) {
    for (const r of deps.rules) {
      if (r.kind !== 'alert') continue;
      this.rulesOf.set(r.event, [...(this.rulesOf.get(r.event) ?? []), r.name]);
      this.sourcesOf.set(r.event, (this.sourcesOf.get(r.event) ?? new Set()).add(r.source));
    }
    this.severityOf = alertSeverities(deps.rules);
    this.covered = coveredAlerts(deps.rules, deps.config.alerts);
  }

  /** Whether incidents are on at all. */
  get enabled(): boolean {
    return this.deps.config.enabled;
  }

  /**
   * After a poll stored alert events (same transaction): an alert that has its N-th site
   * firing within the window opens its incident, and the covered events' rows for human
   * channels that have not been tried yet are taken back (they are released later).
   */
  async onAlerts(r: Repos, events: readonly HostwatchEvent[]): Promise<HostwatchEvent[]> {
    if (!this.enabled) return [];
    const names = new Set<string>();
    for (const e of events) {
      if (e.data.status === 'firing' && e.data.site_id !== null && e.data['repeat'] === undefined && this.covers(e.data.name)) names.add(e.data.name);
    }
    const out: HostwatchEvent[] = [];
    for (const name of names) {
      const e = await this.check(r, name, false);
      if (e) out.push(e);
    }
    return out;
  }

  /**
   * A batch boundary (`sources`: the sources whose cycle or re-evaluation pass just ended)
   * or a clock tick (an empty set): announce open incidents (at once at a boundary of their
   * alert's source, otherwise once `wait` has passed), and at such a boundary cancel those
   * that fell below N and resolve those that ended. Returns the events it stored.
   */
  async settle(sources: ReadonlySet<string> | null): Promise<HostwatchEvent[]> {
    if (!this.enabled) return [];
    const active = (await repos(this.deps.store).alerts.ofRule(INCIDENT_RULE)).filter((r) => r.status === 'firing' || r.pending_since !== null);
    if (active.length === 0) return [];
    return this.deps.store.transaction(async (tx) => {
      const r = repos(tx);
      const out: HostwatchEvent[] = [];
      for (const row of active) {
        const name = row.subject.slice('incidents/'.length);
        const boundary = sources !== null && [...(this.sourcesOf.get(name) ?? [])].some((s) => sources.has(s));
        const e = await this.check(r, name, boundary);
        if (e) out.push(e);
      }
      return out;
    });
  }

  /** Alert names with an open or fired incident (their per-site events are held for people). */
  async active(r: Repos): Promise<Set<string>> {
    if (!this.enabled) return new Set();
    return new Set(
      (await this.rows(r)).filter((row) => row.status === 'firing' || row.pending_since !== null).map((row) => row.subject.slice('incidents/'.length)),
    );
  }

  /**
   * The incidents' alert rows, read once per batch transaction (every alert event of a
   * batch asks, through the notifier and onAlerts); only this tracker writes them, and it
   * forgets the batch's copy when it does (write()).
   */
  private async rows(r: Repos): Promise<readonly AlertRow[]> {
    const known = r.memo?.get(MEMO_KEY) as readonly AlertRow[] | undefined;
    if (known) return known;
    const rows = await r.alerts.ofRule(INCIDENT_RULE);
    r.memo?.set(MEMO_KEY, rows);
    return rows;
  }

  /** Write an incident's row (and forget the batch's copy of the rows). */
  private async write(r: Repos, row: AlertRow): Promise<void> {
    r.memo?.delete(MEMO_KEY);
    await r.alerts.put(row);
  }

  private covers(name: string): boolean {
    return this.covered.has(name);
  }

  /** Check one alert's incident with the repositories of the caller's transaction. Returns the event it stored, if any. */
  private async check(r: Repos, name: string, boundary: boolean): Promise<HostwatchEvent | null> {
    const d = this.deps;
    const now = d.now();
    const subject = incidentSubject(name);
    const row = (await this.rows(r)).find((x) => x.subject === subject);
    // Mid-cycle, a fired incident cannot end and an open one waits for `wait`: no need to
    // count the firing sites (which, in a 1,000-site outage, every commit would do).
    if (!boundary && row?.status === 'firing') return null;
    if (!boundary && row?.pending_since != null && now - row.pending_since < d.config.wait_ms) return null;
    const firing = await this.firingSites(r, name);
    const threshold = incidentThreshold(d.config, d.watched());
    const step = stepIncident(row, firing, now, threshold, d.config, boundary);
    if (step === null) return null;
    const base: AlertRow = row ?? {
      rule: INCIDENT_RULE,
      subject,
      site_id: null,
      status: 'resolved',
      seq: 0,
      since: now,
      last_event_id: null,
      pending_since: null,
      clear_since: null,
      last_sent_at: null,
      repeats: 0,
    };
    switch (step) {
      case 'open':
        await this.write(r, { ...base, pending_since: now });
        await this.takeBack(r, name, firing);
        r.afterCommit(() => d.log.info({ alert: name, sites: firing.length, threshold }, 'platform incident opened: per-site alerts are held for the human channels the incident reaches'));
        return null;
      case 'cancel':
        await this.write(r, { ...base, pending_since: null });
        await d.notifier.releaseHeld(r, incidentHold(name), { skipIncident: name });
        return null;
      case 'fire': {
        const seq = base.seq + 1;
        const e = this.event(name, subject, seq, 'firing', firing, threshold, now);
        await d.notifier.publishIn(r, e);
        await this.write(r, { ...base, status: 'firing', seq, since: now, pending_since: null, last_event_id: e.id, last_sent_at: now });
        return e;
      }
      case 'resolve': {
        const e = this.event(name, subject, base.seq, 'resolved', firing, threshold, now);
        await d.notifier.publishIn(r, e);
        await this.write(r, { ...base, status: 'resolved', since: now, last_event_id: e.id });
        await d.notifier.releaseHeld(r, incidentHold(name), { skipIncident: name });
        return e;
      }
    }
  }

  private async firingSites(r: Repos, name: string): Promise<FiringSite[]> {
    const bySite = new Map<number, FiringSite>();
    for (const rule of this.rulesOf.get(name) ?? []) {
      for (const a of await r.alerts.firingOfRule(rule)) {
        if (a.site_id === null || !this.deps.isWatched(a.site_id)) continue;
        const cur = bySite.get(a.site_id);
        if (!cur || a.since < cur.since) bySite.set(a.site_id, { site_id: a.site_id, since: a.since, event_id: a.last_event_id });
      }
    }
    return [...bySite.values()].sort((a, b) => a.site_id - b.site_id);
  }

  /** Take back the not-yet-tried rows of the covered events for the channels the incident holds, and mark them held. */
  private async takeBack(r: Repos, name: string, firing: readonly FiringSite[]): Promise<void> {
    const d = this.deps;
    for (const f of firing) {
      if (f.event_id === null) continue;
      if ((await r.delivery.retract(f.event_id, d.heldChannels(name))) > 0) await r.delivery.hold(f.event_id, incidentHold(name), null);
    }
  }

  private event(name: string, subject: string, seq: number, status: 'firing' | 'resolved', firing: readonly FiringSite[], threshold: number, now: number): HostwatchEvent {
    const d = this.deps;
    return incidentEvent({ instance: d.instance, alert: name, seq, status, sites: firing, threshold, now, severity: this.severityOf.get(name) ?? 'warning', domainOf: d.domainOf });
  }
}
