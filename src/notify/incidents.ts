import type { IncidentsConfig } from '../config/types.js';
import { alertEventId, alertId, envelope } from '../events/envelope.js';
import type { HostwatchEvent, Severity } from '../events/types.js';
import type { CompiledRule } from '../rules/types.js';
import type { AlertRow } from '../store/alerts-repo.js';

/**
 * Platform incidents (docs/routing.md, "Platform incidents"): when N or more sites fire the
 * same alert within a window, one `platform.incident` alert speaks for them. While it is
 * open, the per-site alerts it covers still go to machine channels (webhooks) and the feed,
 * but are held for the human channels (e-mail, Slack, chat, paging) the incident's own event
 * reaches (the others keep getting them, see incidentHeldChannels); when it ends they are
 * released, except an alert that fired and resolved meanwhile (dropped, as for inhibition).
 *
 * Life of an incident (its state is an `alerts` row, rule `platform-incident`, subject
 * `incidents/<alert>`):
 * - idle → **open** the moment the N-th site fires within `window` (in the poll's own
 *   transaction, so the holding starts before anything reaches a person);
 * - open → **fired** (its event goes out, listing every site firing then) when the cycle
 *   that opened it ends, or `wait` after it opened, whichever is first; open → idle again
 *   (nothing sent) if fewer than N fire when that cycle ends;
 * - fired → **resolved** at the end of a cycle (or re-evaluation pass) of its alert's
 *   source where fewer than N sites fire it.
 */

/** The rule name of incident alerts (an operator alert, not defined in a rule file). */
export const INCIDENT_RULE = 'platform-incident';
/** The catalog name of the incident event. */
export const INCIDENT_EVENT = 'platform.incident';

/** The subject of the incident about one alert. */
export function incidentSubject(alert: string): string {
  return `incidents/${alert}`;
}

/** `incident:<alert>`: how events held for human channels by an incident are marked (events.held_by). */
export function incidentHold(alert: string): string {
  return `incident:${alert}`;
}

/** The number of sites that makes an incident: the count, or the share of the watched sites (at least 2). */
export function incidentThreshold(cfg: Pick<IncidentsConfig, 'min_sites'>, watched: number): number {
  if ('count' in cfg.min_sites) return cfg.min_sites.count;
  return Math.max(2, Math.ceil((cfg.min_sites.percent * watched) / 100));
}

/** One site firing the alert. */
export interface FiringSite {
  site_id: number;
  since: number;
  event_id: string | null;
}

/** What an incident check decides. */
export type IncidentStep = 'open' | 'fire' | 'cancel' | 'resolve' | null;

/**
 * The incident state machine, pure. `row` is the incident's alert row; `boundary` is true
 * at a batch boundary of the alert's own source (the end of its cycle, or of a
 * re-evaluation pass over it): every site has been looked at, so the count is whole. Only
 * there does an incident end (resolve, or cancel an open one): mid-cycle, the sites not yet
 * polled would make the count wrong. An open incident fires there, or once `wait` passed.
 */
export function stepIncident(
  row: Pick<AlertRow, 'status' | 'pending_since'> | undefined,
  firing: readonly FiringSite[],
  now: number,
  threshold: number,
  cfg: Pick<IncidentsConfig, 'window_ms' | 'wait_ms'>,
  boundary: boolean,
): IncidentStep {
  const fired = row?.status === 'firing';
  const open = !fired && row?.pending_since != null;
  const below = firing.length < threshold;
  if (fired) return below && boundary ? 'resolve' : null;
  if (open) {
    if (below) return boundary ? 'cancel' : null;
    return boundary || now - row!.pending_since! >= cfg.wait_ms ? 'fire' : null;
  }
  const recent = firing.filter((f) => now - f.since <= cfg.window_ms);
  return recent.length >= threshold ? 'open' : null;
}

/** The `platform.incident` event of an incident about `alert` (its n-th firing or that firing's end). Pure. */
export function incidentEvent(o: {
  instance: string;
  alert: string;
  seq: number;
  status: 'firing' | 'resolved';
  sites: readonly FiringSite[];
  threshold: number;
  now: number;
  severity: Severity;
  domainOf: (siteId: number) => string | null;
}): HostwatchEvent {
  const subject = incidentSubject(o.alert);
  const sites = o.sites.map((f) => ({ site_id: f.site_id, domain: o.domainOf(f.site_id), since: new Date(f.since).toISOString() }));
  const shown = sites.slice(0, 5).map((s) => s.domain ?? `site ${s.site_id}`);
  const more = sites.length > shown.length ? ` and ${sites.length - shown.length} more` : '';
  const summary =
    o.status === 'firing'
      ? `Platform incident: ${o.alert} on ${sites.length} sites (${shown.join(', ')}${more})`
      : `Platform incident over: ${o.alert} on ${sites.length} site${sites.length === 1 ? '' : 's'} now (below ${o.threshold})`;
  const at = new Date(o.now);
  return envelope({
    id: alertEventId(INCIDENT_RULE, subject, o.seq, o.status),
    instance: o.instance,
    subject,
    time: at,
    data: {
      name: INCIDENT_EVENT,
      severity: o.severity,
      status: o.status,
      summary,
      site_id: null,
      domain: null,
      changes: [],
      rule: INCIDENT_RULE,
      // One id for the firing and its resolution: PagerDuty's dedup_key, Opsgenie's alias.
      alert_id: alertId(INCIDENT_RULE, subject, o.seq),
      observed_at: at.toISOString(),
      alert: o.alert,
      count: sites.length,
      threshold: o.threshold,
      sites,
    },
  });
}

/**
 * The channels a platform incident about `alert` holds the per-site alerts from: the human
 * channels its own `platform.incident` (firing) is routed to. A human channel the incident
 * does not reach (say a per-client route matching `labels.client`, which the incident has
 * not) keeps getting the per-site alerts: holding them there would tell people nothing at
 * all. Pure.
 */
export function incidentHeldChannels(alert: string, severity: Severity, route: (e: HostwatchEvent) => readonly string[], isHuman: (channel: string) => boolean): string[] {
  // Routes see the event's name, severity, status, subject and (absent) site and labels,
  // never its site list: a probe without sites routes as the real event will.
  const probe = incidentEvent({ instance: '', alert, seq: 1, status: 'firing', sites: [], threshold: 0, now: 0, severity, domainOf: () => null });
  return route(probe).filter(isHuman);
}

/** The highest severity of each alert event name among the rules (an incident takes its alert's). */
export function alertSeverities(rules: readonly CompiledRule[]): Map<string, Severity> {
  const out = new Map<string, Severity>();
  for (const r of rules) {
    if (r.kind !== 'alert') continue;
    const sev = out.get(r.event);
    if (sev === undefined || SEVERITY_RANK[r.severity] > SEVERITY_RANK[sev]) out.set(r.event, r.severity);
  }
  return out;
}

/**
 * The alerts an incident may cover: those of alert rules (never the incident itself),
 * limited to `incidents.alerts` when it names some. The tracker and `rules backtest` alike.
 */
export function coveredAlerts(rules: readonly CompiledRule[], alerts: readonly string[]): ReadonlySet<string> {
  return new Set([...alertSeverities(rules).keys()].filter((n) => n !== INCIDENT_EVENT && (alerts.length === 0 || alerts.includes(n))));
}

const SEVERITY_RANK: Record<Severity, number> = { info: 0, warning: 1, critical: 2 };
