import type { Logger } from 'pino';
import type { HostwatchEvent } from '../events/types.js';
import type { Store } from '../store/db.js';
import type { DeliveryRepo } from '../store/delivery-repo.js';
import { toEventRow, type EventsRepo } from '../store/events-repo.js';
import type { SilencesRepo } from '../store/silences-repo.js';
import { dropOnRelease, inhibitionKey, type Decision, type DecideOptions, type Dispatcher, type DispatchView } from './dispatch.js';
import type { Silence } from './silences.js';

export interface NotifierDeps {
  store: Store;
  events: EventsRepo;
  delivery: DeliveryRepo;
  silences: Pick<SilencesRepo, 'active' | 'markSilenced'>;
  dispatcher: Dispatcher;
  log: Logger;
  now: () => number;
  /** Alert names with an open platform incident (default: none). */
  incidents?: () => ReadonlySet<string>;
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
   * Dispatch an event that was just stored (same transaction). `silences` are the active
   * ones, read once per commit by the caller.
   */
  dispatch(e: HostwatchEvent, now: number, silences: readonly Silence[]): void {
    const d = this.deps;
    const change = d.dispatcher.inhibitionChange(e);
    if (change && 'start' in change) d.delivery.startInhibition({ source: change.source, site_id: change.siteId, event_id: e.id, since: now });
    const view = this.view(now, silences);
    this.apply(e, d.dispatcher.decide(e, view), now);
    if (change && 'end' in change) {
      d.delivery.endInhibition(change.source, change.siteId);
      this.release(`inhibited:${change.end}`, view, { skipInhibition: change.end });
    }
  }

  /**
   * Decide again, without the hold that ended, every event still held by `heldBy`
   * (`incident:<alert>` when a platform incident ends). Runs in the caller's transaction.
   */
  releaseHeld(heldBy: string, opts: DecideOptions): void {
    const now = this.deps.now();
    this.release(heldBy, this.view(now, this.deps.silences.active(now)), opts);
  }

  /**
   * Inhibit for alerts that were already firing when this process started (an upgrade to a
   * version with inhibition, or an `inhibit:` pair added to the config): each firing event
   * starts the inhibition it would have started. Idempotent; one transaction.
   */
  resumeInhibitions(firing: readonly HostwatchEvent[]): void {
    const d = this.deps;
    const now = d.now();
    d.store.sqlite.transaction(() => {
      for (const e of firing) {
        const change = d.dispatcher.inhibitionChange(e);
        if (change && 'start' in change) d.delivery.startInhibition({ source: change.source, site_id: change.siteId, event_id: e.id, since: now });
      }
    })();
  }

  /** Store an event of hostwatch's own (an operator event) and dispatch it, in one transaction. False if it was stored already. */
  publish(e: HostwatchEvent): boolean {
    const now = this.deps.now();
    return this.deps.store.sqlite.transaction(() => {
      if (!this.deps.events.addEvent(toEventRow(e))) return false;
      this.dispatch(e, now, this.deps.silences.active(now));
      return true;
    })();
  }

  private view(now: number, silences: readonly Silence[]): DispatchView {
    const delivery = this.deps.delivery;
    return {
      now,
      silences,
      inhibitions: (siteId) => delivery.inhibitionSources(siteId).map((source) => inhibitionKey(source, siteId)),
      group: (channel, key) => delivery.group(channel, key),
      incidents: this.deps.incidents ?? (() => NO_INCIDENTS),
    };
  }

  private apply(e: HostwatchEvent, decision: Decision, now: number): void {
    const d = this.deps;
    switch (decision.action) {
      case 'silenced':
        d.silences.markSilenced(e.id, decision.silenceId);
        d.log.debug({ event: e.id, type: e.type, silence: decision.silenceId }, 'event silenced: stored, not delivered');
        return;
      case 'maintenance':
        d.delivery.hold(e.id, decision.window, 'suppressed');
        d.log.debug({ event: e.id, type: e.type, window: decision.window }, 'event in a maintenance window: stored, not delivered');
        return;
      case 'inhibited':
        d.delivery.hold(e.id, decision.by, null);
        d.log.debug({ event: e.id, type: e.type, by: decision.by }, 'event inhibited: stored, held until the inhibiting alert resolves');
        return;
      case 'queue':
        // A platform incident holds the human channels' rows; the machine ones go now.
        if (decision.heldBy) d.delivery.hold(e.id, decision.heldBy, null);
        for (const q of decision.deliveries) {
          d.events.enqueue({
            event_id: e.id,
            channel: q.channel,
            state: 'pending',
            attempts: 0,
            next_attempt_at: q.dueAt,
            last_error: null,
            created_at: now,
            updated_at: now,
            group_key: q.groupKey,
          });
        }
    }
  }

  /**
   * A hold ended (an inhibition, or a platform incident): its held events are decided again
   * without it. An alert that fired and resolved while held is dropped, both ends
   * (docs/routing.md). Rows already queued for machine channels are not queued twice.
   */
  private release(by: string, view: DispatchView, opts: DecideOptions): void {
    // Each held body is parsed once: for the drop decision and for deciding it again.
    const held = this.deps.delivery.held(by).map((h) => ({ ...h, event: JSON.parse(h.body) as HostwatchEvent }));
    const drop = dropOnRelease(held.map((h) => ({ ...h, repeat: (h.event.data['repeat'] ?? 0) !== 0 })));
    for (const h of held) {
      if (drop.has(h.id)) {
        this.deps.delivery.setHeldOutcome(h.id, 'dropped');
        continue;
      }
      const e = h.event;
      const decision = this.deps.dispatcher.decide(e, view, opts);
      this.apply(e, decision, view.now);
      // Held again by another inhibition or an incident: it waits for that one instead. Silenced
      // or in a maintenance window now: not sent, so not "released" (apply() marked the maintenance hold).
      if (decision.action === 'queue' && !decision.heldBy) this.deps.delivery.setHeldOutcome(h.id, 'released');
      else if (decision.action === 'silenced') this.deps.delivery.setHeldOutcome(h.id, 'suppressed');
    }
    if (held.length > 0) this.deps.log.info({ held_by: by, released: held.length - drop.size, dropped: drop.size }, 'hold ended: held events released');
  }
}
