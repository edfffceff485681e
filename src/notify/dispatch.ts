import type { CelProgram } from '../cel.js';
import type { ChannelConfig, Config, InhibitConfig } from '../config/types.js';
import type { HostwatchEvent, Severity } from '../events/types.js';
import { DIGEST_GROUP, groupDueAt, groupKey, nextDigestAt, type GroupState } from './grouping.js';
import { INCIDENT_EVENT, incidentHeldChannels, incidentHold } from './incidents.js';
import type { MaintenanceCalendar } from './maintenance.js';
import { compileMatch, compileRoutes, matches, routeBindings, type RouteTarget } from './routing.js';
import { SilenceMatcher, type Silence } from './silences.js';

/**
 * The dispatch decision for one stored event (docs/routing.md), as a pipeline of small
 * stages: silence → maintenance → inhibition → routing → grouping. Pure: everything it
 * needs of the database comes in through DispatchView, and notifier.ts applies the result.
 */

/**
 * Channel types that send a group of events as one message: the ones people read. Pagers
 * (PagerDuty, Opsgenie) open one incident per alert, keyed by its id, so they take each
 * event on its own, as soon as it is committed, like webhooks (docs/routing.md).
 */
export const GROUPING_TYPES: ReadonlySet<string> = new Set(['email', 'slack', 'teams', 'discord', 'telegram', 'ntfy']);

/**
 * Channel types read by programs, not people: they get every event, one request each,
 * even while a platform incident holds the per-site alerts it covers. Every other channel
 * type (e-mail, Slack, console, and the chat and paging types) is a human channel. This is
 * the one place that says so.
 */
export const MACHINE_CHANNEL_TYPES: ReadonlySet<string> = new Set(['webhook']);

/** True for a channel type people read (held back during a platform incident). */
export function isHumanChannel(type: string): boolean {
  return !MACHINE_CHANNEL_TYPES.has(type);
}

/** One outbox row to write. */
export interface Delivery {
  channel: string;
  /** null: sent on its own. */
  groupKey: string | null;
  dueAt: number;
}

/** What happens to an event. */
export type Decision =
  | { action: 'silenced'; silenceId: string }
  | { action: 'maintenance'; window: string }
  | { action: 'inhibited'; by: string }
  /** `heldBy`: a platform incident held back the rows of the human channels it reaches; `deliveries` are the others. */
  | { action: 'queue'; deliveries: Delivery[]; heldBy?: string };

/** What the decision reads of the present state. */
export interface DispatchView {
  now: number;
  /** Silences active now. */
  silences: readonly Silence[];
  /** Inhibition keys in force for a site (see inhibitionKey). */
  inhibitions(siteId: number): readonly string[];
  group(channel: string, key: string): GroupState;
  /** Alert names with an open platform incident (their per-site events are held for people). */
  incidents(): ReadonlySet<string>;
}

/** An inhibition's key: the source event's name and the site. */
export function inhibitionKey(source: string, siteId: number): string {
  return `${source}:${siteId}`;
}

/** How an event changes the inhibitions in force: a source alert starts or ends one. */
export type InhibitionChange = { start: string; source: string; siteId: number } | { end: string; source: string; siteId: number } | null;

interface CompiledInhibit {
  source: string;
  /** null: every alert-kind event of the site (never a change event). */
  target: CelProgram | null;
}

/** Options of the stages after silencing; the skips are used when releasing held events. */
export interface DecideOptions {
  skipInhibition?: string;
  /** The incident (its alert name) that is ending: it no longer holds anything. */
  skipIncident?: string;
}

/** The compiled dispatch configuration. */
export class Dispatcher {
  private readonly route: (e: HostwatchEvent) => RouteTarget[];
  private readonly channels: ReadonlyMap<string, ChannelConfig>;
  private readonly inhibit: CompiledInhibit[];
  private readonly silenceMatcher = new SilenceMatcher();
  private readonly incidentHoldsOf = new Map<string, ReadonlySet<string>>();

  /** `severities`: each alert's severity, which its platform incident takes (alertSeverities of the rules). */
  constructor(
    config: Pick<Config, 'routes' | 'channels' | 'inhibit'>,
    private readonly maintenance: MaintenanceCalendar | null = null,
    private readonly severities: ReadonlyMap<string, Severity> = new Map(),
  ) {
    this.route = compileRoutes(config.routes, config.channels);
    this.channels = new Map(config.channels.map((c) => [c.name, c]));
    this.inhibit = compileInhibit(config.inhibit);
  }

  /** Does this event start or end an inhibition? (Checked before it is silenced: a silenced outage still holds its site back.) */
  inhibitionChange(e: HostwatchEvent): InhibitionChange {
    const site = e.data.site_id;
    if (site === null || e.data.status === undefined) return null;
    if (!this.inhibit.some((i) => i.source === e.data.name)) return null;
    const key = inhibitionKey(e.data.name, site);
    return e.data.status === 'firing' ? { start: key, source: e.data.name, siteId: site } : { end: key, source: e.data.name, siteId: site };
  }

  /** Decide what happens to a stored event. */
  decide(e: HostwatchEvent, view: DispatchView, opts: DecideOptions = {}): Decision {
    const silence = this.silenceMatcher.first(e, view.silences);
    if (silence) return { action: 'silenced', silenceId: silence.id };
    const window = this.maintenance?.covering(e, view.now) ?? null;
    if (window) return { action: 'maintenance', window: `maintenance:${window}` };
    const by = this.inhibitedBy(e, view, opts.skipInhibition);
    if (by) return { action: 'inhibited', by: `inhibited:${by}` };
    const deliveries = this.deliveries(e, view);
    if (this.coveredByIncident(e, view, opts.skipIncident)) {
      const held = this.incidentHolds(e.data.name);
      const rest = deliveries.filter((d) => !held.has(d.channel));
      if (rest.length < deliveries.length) return { action: 'queue', deliveries: rest, heldBy: incidentHold(e.data.name) };
    }
    return { action: 'queue', deliveries };
  }

  /**
   * The channels a platform incident about `alert` holds its per-site alerts from: the human
   * channels its own event is routed to (incidentHeldChannels), decided once per alert.
   */
  incidentHolds(alert: string): ReadonlySet<string> {
    let held = this.incidentHoldsOf.get(alert);
    if (held === undefined) {
      // The severity the incident event will carry (IncidentTracker's default too).
      const route = (e: HostwatchEvent): string[] => this.route(e).map((t) => t.channel);
      held = new Set(incidentHeldChannels(alert, this.severities.get(alert) ?? 'warning', route, (c) => this.isHuman(c)));
      this.incidentHoldsOf.set(alert, held);
    }
    return held;
  }

  private isHuman(channel: string): boolean {
    const c = this.channels.get(channel);
    return c !== undefined && isHumanChannel(c.type);
  }

  /** A per-site alert (firing, repeat or resolution) whose name has an open incident. */
  private coveredByIncident(e: HostwatchEvent, view: DispatchView, skip: string | undefined): boolean {
    if (e.data.status === undefined || e.data.site_id === null || e.data.name === INCIDENT_EVENT || e.data.name === skip) return false;
    return view.incidents().has(e.data.name);
  }

  /** The outbox rows of an event that goes out: one per routed channel, with its group and due time. */
  deliveries(e: HostwatchEvent, view: DispatchView): Delivery[] {
    return this.route(e).map((t) => {
      const channel = this.channels.get(t.channel);
      if (!channel || !GROUPING_TYPES.has(channel.type)) return { channel: t.channel, groupKey: null, dueAt: view.now };
      const digest = 'digest' in channel ? channel.digest : null;
      if (digest && e.data.severity === 'info') {
        const g = view.group(t.channel, DIGEST_GROUP);
        return { channel: t.channel, groupKey: DIGEST_GROUP, dueAt: g.pendingDue ?? nextDigestAt(view.now, digest) };
      }
      const key = groupKey(e, t.route, t.group_by);
      return { channel: t.channel, groupKey: key, dueAt: groupDueAt(view.now, view.group(t.channel, key), t.group_wait_ms, t.group_interval_ms) };
    });
  }

  /** Inhibition rules are configured (else no event asks for its site's inhibiting alerts). */
  get inhibits(): boolean {
    return this.inhibit.length > 0;
  }

  private inhibitedBy(e: HostwatchEvent, view: DispatchView, skip: string | undefined): string | null {
    const site = e.data.site_id;
    if (site === null || this.inhibit.length === 0) return null;
    const active = view.inhibitions(site).filter((k) => k !== skip);
    if (active.length === 0) return null;
    const bindings = routeBindings(e);
    for (const rule of this.inhibit) {
      // An inhibiting alert never holds back itself (its own firing and resolution).
      if (rule.source === e.data.name) continue;
      // Inhibition holds symptoms, not causes: without a target, only alerts are held. A
      // change (a DNS record, a firewall rule, a file) may be why the site is down, and
      // must reach people at once; a pair's `target` can still name changes to hold.
      if (rule.target === null && e.data.status === undefined) continue;
      const key = inhibitionKey(rule.source, site);
      if (active.includes(key) && matches(rule.target, bindings)) return key;
    }
    return null;
  }
}

function compileInhibit(list: readonly InhibitConfig[]): CompiledInhibit[] {
  return list.map((i, n) => ({ source: i.source, target: compileMatch(`inhibit[${n}].target`, i.target) }));
}

/** A held event, as the release step sees it. */
export interface HeldEvent {
  id: string;
  rule: string;
  subject: string;
  status: string | null;
  /** A re-send of a still-firing alert (`repeat`), not its firing. */
  repeat?: boolean;
}

/**
 * Which held events to drop when an inhibition ends: an alert that fired and resolved
 * while held (both ends held) is over, so neither end, nor any re-send (`repeat`) between
 * them, is sent. A re-send of an alert whose firing went out before the inhibition is
 * dropped too (receivers know it fires), but its resolution is sent. Everything else is
 * released. `held` is in storage order. Pure.
 */
export function dropOnRelease(held: readonly HeldEvent[]): Set<string> {
  const drop = new Set<string>();
  // Per alert: the held firing and its held re-sends, or only re-sends (firing sent before).
  const open = new Map<string, { fired: boolean; ids: string[] }>();
  for (const h of held) {
    const alert = `${h.rule}\u0000${h.subject}`;
    if (h.status === 'firing') {
      const cur = open.get(alert);
      if (h.repeat) {
        if (cur) cur.ids.push(h.id);
        else open.set(alert, { fired: false, ids: [h.id] });
      } else {
        open.set(alert, { fired: true, ids: [h.id] });
      }
    } else if (h.status === 'resolved') {
      const cur = open.get(alert);
      if (cur === undefined) continue;
      for (const id of cur.ids) drop.add(id);
      if (cur.fired) drop.add(h.id);
      open.delete(alert);
    }
  }
  return drop;
}
