import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { Store } from '../store/db.js';
import { orderKey, toEventRow } from '../store/events-repo.js';
import { repos, type Repos } from '../store/repos.js';
import { dropOnRelease, inhibitionKey, type DecideOptions, type Decision, type Dispatcher, type DispatchView } from './dispatch.js';
import type { GroupState } from './grouping.js';
import type { Silence } from './silences.js';

export interface NotifierDeps {
  /** For the notifier's own transactions (publish, resumeInhibitions). */
  store: Store;
  dispatcher: Dispatcher;
  log: Logger;
  now: () => number;
  /** Alert names with an open platform incident, read with the caller's repositories (default: none). */
  incidents?: (r: Repos) => Promise<ReadonlySet<string>>;
}

const NO_INCIDENTS: ReadonlySet<string> = new Set();

/**
 * Applies dispatch decisions to the database, inside the caller's transaction: outbox rows
 * for events that go out; a mark on those held back (silence, maintenance, inhibition), so
 * nothing is lost; and the release of held events when an inhibiting alert resolves.
 */
export class Notifier {
  constructor(private readonly deps: NotifierDeps) {}

  /**
   * Dispatch an event that was just stored, with the repositories of the same transaction.
   * `silences` are the active ones, read once per commit by the caller.
   */
  async dispatch(r: Repos, e: HostwatchEvent, now: number, silences: readonly Silence[]): Promise<void> {
    const d = this.deps;
    const change = d.dispatcher.inhibitionChange(e);
    if (change && 'start' in change) await r.delivery.startInhibition({ source: change.source, site_id: change.siteId, event_id: e.id, since: now });
    await this.apply(r, e, await this.decide(r, e, now, silences), now);
    if (change && 'end' in change) {
      await r.delivery.endInhibition(change.source, change.siteId);
      await this.release(r, `inhibited:${change.end}`, now, silences, { skipInhibition: change.end });
    }
  }

  /**
   * Decide again, without the hold that ended, every event still held by `heldBy`
   * (`incident:<alert>` when a platform incident ends). Runs in the caller's transaction.
   */
  async releaseHeld(r: Repos, heldBy: string, opts: DecideOptions): Promise<void> {
    const now = this.deps.now();
    await this.release(r, heldBy, now, await r.silences.active(now), opts);
  }

  /**
   * Inhibit for alerts that were already firing when this process started (an upgrade to a
   * version with inhibition, or an `inhibit:` pair added to the config): each firing event
   * starts the inhibition it would have started. Idempotent; one transaction.
   */
  async resumeInhibitions(firing: readonly HostwatchEvent[]): Promise<void> {
    const d = this.deps;
    const now = d.now();
    const starts = firing.flatMap((e) => {
      const change = d.dispatcher.inhibitionChange(e);
      return change && 'start' in change ? [{ source: change.source, site_id: change.siteId, event_id: e.id, since: now }] : [];
    });
    if (starts.length === 0) return;
    await d.store.transaction(async (tx) => {
      const r = repos(tx);
      for (const row of starts) await r.delivery.startInhibition(row);
    });
  }

  /**
   * Store an event of hostwatch's own (an operator event) and dispatch it, in one
   * transaction; resolves after its commit (the caller then announces it). False if it was
   * stored already.
   */
  publish(e: HostwatchEvent): Promise<boolean> {
    return this.deps.store.transaction((tx) => this.publishIn(repos(tx), e));
  }

  /** publish(), in the caller's transaction (the caller announces it after the commit). */
  async publishIn(r: Repos, e: HostwatchEvent): Promise<boolean> {
    const now = this.deps.now();
    if (!(await r.events.addEvent(toEventRow(e)))) return false;
    // A shadow rule's event (its resolution at start, say) is stored and shown, never delivered.
    if (e.data['shadow'] !== true) await this.dispatch(r, e, now, await r.silences.active(now));
    return true;
  }

  /**
   * The dispatcher's decision for an event. The dispatcher is pure and synchronous; what its
   * view reads of the database (inhibitions in force for a site, a group's timing) is read
   * here: it decides over what was read so far (a value not read yet answers empty and is
   * noted), the noted values are read, and it decides again, until a round notes nothing.
   * That last round decided over the real state. The event's own site is read up front,
   * so most events take one round.
   */
  private async decide(r: Repos, e: HostwatchEvent, now: number, silences: readonly Silence[], opts?: DecideOptions): Promise<Decision> {
    const inhibitions = new Map<number, readonly string[]>();
    const groups = new Map<string, GroupState>();
    let incidents: ReadonlySet<string> | null = this.deps.incidents ? null : NO_INCIDENTS;
    const readSite = async (site: number): Promise<void> => {
      inhibitions.set(site, (await r.delivery.inhibitionSources(site)).map((source) => inhibitionKey(source, site)));
    };
    // Read up front only where an inhibition could ask (one query per event otherwise).
    if (e.data.site_id !== null && this.deps.dispatcher.inhibits) await readSite(e.data.site_id);
    for (;;) {
      const sites = new Set<number>();
      const wanted = new Map<string, [string, string]>();
      let wantIncidents = false;
      const view: DispatchView = {
        now,
        silences,
        inhibitions: (site) => inhibitions.get(site) ?? (sites.add(site), []),
        group: (channel, key) => groups.get(`${channel}\u0000${key}`) ?? (wanted.set(`${channel}\u0000${key}`, [channel, key]), { pendingDue: null, lastSent: null }),
        incidents: () => incidents ?? ((wantIncidents = true), NO_INCIDENTS),
      };
      const decision = this.deps.dispatcher.decide(e, view, opts);
      if (sites.size === 0 && wanted.size === 0 && !wantIncidents) return decision;
      for (const site of sites) await readSite(site);
      for (const [k, [channel, key]] of wanted) groups.set(k, await r.delivery.group(channel, key));
      if (wantIncidents) incidents = await this.deps.incidents!(r);
    }
  }

  private async apply(r: Repos, e: HostwatchEvent, decision: Decision, now: number): Promise<void> {
    const d = this.deps;
    switch (decision.action) {
      case 'silenced':
        await r.silences.markSilenced(e.id, decision.silenceId);
        d.log.debug({ event: e.id, type: e.type, silence: decision.silenceId }, 'event silenced: stored, not delivered');
        return;
      case 'maintenance':
        await r.delivery.hold(e.id, decision.window, 'suppressed');
        d.log.debug({ event: e.id, type: e.type, window: decision.window }, 'event in a maintenance window: stored, not delivered');
        return;
      case 'inhibited':
        await r.delivery.hold(e.id, decision.by, null);
        d.log.debug({ event: e.id, type: e.type, by: decision.by }, 'event inhibited: stored, held until the inhibiting alert resolves');
        return;
      case 'queue':
        // A platform incident holds the human channels' rows; the machine ones go now.
        if (decision.heldBy) await r.delivery.hold(e.id, decision.heldBy, null);
        await this.enqueue(r, e, decision.deliveries, now);
    }
  }

  /** Queue an event's deliveries (a row per channel; one already there stays as it is). */
  private async enqueue(r: Repos, e: HostwatchEvent, deliveries: Extract<Decision, { action: 'queue' }>['deliveries'], now: number): Promise<void> {
    // A channel.disabled goes to the other channels: the one it is about takes nothing.
    const about = e.data.name === 'channel.disabled' ? e.data['channel'] : undefined;
    for (const q of deliveries) {
      if (q.channel === about) continue;
      await r.events.enqueue({
        event_id: e.id,
        channel: q.channel,
        state: 'pending',
        attempts: 0,
        next_attempt_at: q.dueAt,
        last_error: null,
        created_at: now,
        updated_at: now,
        group_key: q.groupKey,
        order_key: orderKey(e),
      });
    }
  }

  /**
   * The channels that heard an alert fire: those that kept a row of its firing event when
   * a platform incident took the others back (a pager paged, a console printed, before the
   * incident opened). Its resolution is owed to them, whatever the hold decided.
   */
  private async heardFiring(r: Repos, e: HostwatchEvent): Promise<Set<string>> {
    const firing = e.data['alert_id'];
    if (e.data.status !== 'resolved' || typeof firing !== 'string') return new Set();
    return new Set((await r.events.outboxFor(firing)).map((row) => row.channel));
  }

  /**
   * A hold ended (an inhibition, or a platform incident): its held events are decided again
   * without it. An alert that fired and resolved while held is dropped, both ends
   * (docs/routing.md). Rows already queued for machine channels are not queued twice.
   */
  private async release(r: Repos, by: string, now: number, silences: readonly Silence[], opts: DecideOptions): Promise<void> {
    // Each held body is parsed once: for the drop decision and for deciding it again.
    const held = (await r.delivery.held(by)).map((h) => ({ ...h, event: JSON.parse(h.body) as HostwatchEvent }));
    const drop = dropOnRelease(held.map((h) => ({ ...h, repeat: (h.event.data['repeat'] ?? 0) !== 0 })));
    let dropped = 0;
    for (const h of held) {
      if (drop.has(h.id)) {
        // Fired and resolved while held: nobody it was held from heard either end. A channel
        // that heard the firing before the hold still gets the resolution.
        const heard = await this.heardFiring(r, h.event);
        // Not those that have it already (the machine channels, queued when it resolved).
        for (const row of heard.size > 0 ? await r.events.outboxFor(h.id) : []) heard.delete(row.channel);
        const decision = heard.size > 0 ? await this.decide(r, h.event, now, silences, opts) : null;
        const owed = decision?.action === 'queue' ? decision.deliveries.filter((q) => heard.has(q.channel)) : [];
        if (owed.length > 0) await this.enqueue(r, h.event, owed, now);
        else dropped++;
        await r.delivery.setHeldOutcome(h.id, owed.length > 0 ? 'released' : 'dropped');
        continue;
      }
      const e = h.event;
      // Decided on the state as each release leaves it (an earlier one may have queued to the same group).
      const decision = await this.decide(r, e, now, silences, opts);
      await this.apply(r, e, decision, now);
      // Held again by another inhibition or an incident: it waits for that one instead. Silenced
      // or in a maintenance window now: not sent, so not "released" (apply() marked the maintenance hold).
      if (decision.action === 'queue' && !decision.heldBy) await r.delivery.setHeldOutcome(h.id, 'released');
      else if (decision.action === 'silenced') await r.delivery.setHeldOutcome(h.id, 'suppressed');
    }
    if (held.length > 0) r.afterCommit(() => this.deps.log.info({ held_by: by, released: held.length - dropped, dropped }, 'hold ended: held events released'));
  }
}
