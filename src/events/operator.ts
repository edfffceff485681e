import { alertEventId, alertId, envelope } from './envelope.js';
import type { HostwatchEvent, Severity } from './types.js';

/**
 * hostwatch's own events, about hostwatch rather than about a site: raised by the poller,
 * the outbox worker, the delivery pipeline and the storage watch, not by rule files. One table, so each is
 * named, classed and built in one place (docs/events.md, "Operator events").
 */
export const OPERATOR_EVENTS = {
  /** An entity of a source failed `degraded.after_failures` polls in a row, or (two or more) for `degraded.after`. */
  'source-degraded': { name: 'source.degraded', kind: 'alert', severity: 'warning' },
  /** The API key lacks a scope a source needs. */
  'source-scope-missing': { name: 'source.scope_missing', kind: 'alert', severity: 'critical' },
  /** Every request of a cycle was refused: the key is wrong, revoked or expired (401). */
  'api-unauthorized': { name: 'api.unauthorized', kind: 'alert', severity: 'critical' },
  /** Every request of a cycle failed to reach the panel (network error, timeout, 502/504). */
  'api-unreachable': { name: 'api.unreachable', kind: 'alert', severity: 'critical' },
  /** One poll held more changes than its source's `max_events`: the rest are summed up here. */
  'source-mass-change': { name: 'source.mass_change', kind: 'change', severity: 'warning' },
  /** A delivery channel was disabled. */
  'channel-disabled': { name: 'channel.disabled', kind: 'change', severity: 'critical' },
  /** The database refuses writes (disk full, locked, unreachable) or is damaged. */
  'storage-failing': { name: 'storage.failing', kind: 'alert', severity: 'critical' },
} as const satisfies Record<string, { name: string; kind: 'alert' | 'change'; severity: Severity }>;

export type OperatorRule = keyof typeof OPERATOR_EVENTS;

/** The names of every operator event. */
export const OPERATOR_EVENT_NAMES: readonly string[] = Object.values(OPERATOR_EVENTS).map((e) => e.name);

/** The subject of the API-wide operator alerts (one per instance, not per source). */
export const API_SUBJECT = 'api';

/**
 * Build an operator event. Alerts take the id of their n-th firing or resolution (`seq`);
 * one-shot events take `id` from the caller, derived from what they report, so a retry of
 * the same commit gives the same id.
 */
export function operatorEvent(init: {
  rule: OperatorRule;
  instance: string;
  subject: string;
  at: number;
  summary: string;
  alert?: { seq: number; status: 'firing' | 'resolved' };
  id?: string;
  extra?: Record<string, unknown>;
}): HostwatchEvent {
  const def = OPERATOR_EVENTS[init.rule];
  const time = new Date(init.at);
  const id = init.alert ? alertEventId(init.rule, init.subject, init.alert.seq, init.alert.status) : init.id;
  if (id === undefined) throw new Error(`operator event ${def.name} needs an id`);
  return envelope({
    id,
    instance: init.instance,
    subject: init.subject,
    time,
    data: {
      name: def.name,
      severity: def.severity,
      ...(init.alert ? { status: init.alert.status, alert_id: alertId(init.rule, init.subject, init.alert.seq) } : {}),
      summary: init.summary,
      site_id: null,
      domain: null,
      changes: [],
      rule: init.rule,
      observed_at: time.toISOString(),
      ...init.extra,
    },
  });
}
