import type { PagerDutyChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, jsonOf, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider, type Verdict } from './http.js';
import { cut, oneLine, summaryText, type ItemText } from './render.js';

/**
 * PagerDuty Events API v2 (POST /v2/enqueue): a firing alert is a `trigger`, its
 * resolution a `resolve`, both with `dedup_key` = the alert's stable id (`data.alert_id`,
 * the id of its firing event). A retry, a restart or a second instance sends the same key,
 * so PagerDuty folds them into one alert; the resolve closes exactly what the trigger
 * opened. A change event (no status) is a `trigger` keyed by its own event id. The
 * routing_key is a secret: it is in the body only, never in a URL or an error.
 */

/** PagerDuty's limits: summary 1024 characters, dedup_key 255 (ours are 36). */
export const PAGERDUTY_SUMMARY_MAX = 1024;
/** About 120 events a minute per integration key: one every half second. */
export const PAGERDUTY_MIN_INTERVAL_MS = 500;
/** custom_details.changes is left out above this size (the whole body may be 512 KB). */
const CHANGES_MAX = 16_000;

/** hostwatch severities are PagerDuty's (critical, warning, info; PagerDuty also has error). */
const SEVERITY: Record<string, string> = { critical: 'critical', warning: 'warning', info: 'info' };

/** The key PagerDuty deduplicates by: the alert's firing id, or the event's own id for a change event. */
export function dedupKey(e: HostwatchEvent): string {
  const alert = e.data['alert_id'];
  return typeof alert === 'string' && alert !== '' ? alert : e.id;
}

/** The Events API v2 body for an event. */
export function pagerDutyEvent(e: HostwatchEvent, routingKey: string, text: ItemText = summaryText) {
  if (e.data.status === 'resolved') return { routing_key: routingKey, event_action: 'resolve', dedup_key: dedupKey(e) };
  const changes = JSON.stringify(e.data.changes);
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: dedupKey(e),
    payload: {
      summary: cut(oneLine(text(e)) || e.data.name, PAGERDUTY_SUMMARY_MAX),
      // API text, shown as it is by PagerDuty: one line, as the summary (oneLine).
      source: cut(oneLine(e.data.domain ?? e.source), 255),
      severity: SEVERITY[e.data.severity] ?? 'info',
      timestamp: e.time,
      component: cut(oneLine(e.subject), 255),
      class: e.data.name,
      custom_details: {
        event_id: e.id,
        type: e.type,
        subject: oneLine(e.subject),
        site_id: e.data.site_id,
        domain: e.data.domain === null ? null : oneLine(e.data.domain),
        rule: e.data.rule,
        ...(e.data.status ? { status: e.data.status } : {}),
        ...(typeof e.data['description'] === 'string' ? { description: oneLine(e.data['description']) } : {}),
        ...(e.data['labels'] ? { labels: e.data['labels'] } : {}),
        changes: changes.length <= CHANGES_MAX ? e.data.changes : `(${changes.length} characters of changes: hostwatch explain ${e.id})`,
      },
    },
    client: 'hostwatch',
  };
}

/**
 * What PagerDuty's answer means (202: accepted). A 400 says the event is invalid: when it
 * blames the routing key, no event will ever be taken, so the channel is disabled; other
 * 400s are dead-lettered. 404/401/403 mean a wrong address or a refused integration:
 * disabled. 429 and 5xx are retried ("retry after some time", per PagerDuty).
 */
export function judgePagerDuty(answer: HttpAnswer, now: number): Verdict {
  const detail = detailOf(answer.body, (j) => {
    const errors = Array.isArray(j['errors']) ? (j['errors'] as unknown[]).map(String) : [];
    const message = typeof j['message'] === 'string' ? j['message'] : null;
    return message === null ? null : `${message}${errors.length ? `: ${errors.join('; ')}` : ''}`;
  });
  if (answer.status === 400 && /routing.?key|integration key|service key/i.test(detail)) return { kind: 'disable', detail };
  const v = standardVerdict(answer.status, detail, retryAfterHeader(answer, now), [401, 403, 404]);
  // A 2xx that is not "success" would be an event PagerDuty did not take: never assume it was.
  const json = jsonOf(answer.body);
  if (v.kind === 'ok' && json && json['status'] !== undefined && json['status'] !== 'success') return { kind: 'retry', detail };
  return v;
}

/** The PagerDuty provider for a channel. */
export function pagerDutyProvider(cfg: PagerDutyChannelConfig, text: ItemText = summaryText): Provider {
  return {
    label: 'PagerDuty',
    groups: false,
    minIntervalMs: PAGERDUTY_MIN_INTERVAL_MS,
    request: (events) => ({
      url: `${cfg.api_url}/v2/enqueue`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(pagerDutyEvent(events[0]!, cfg.routing_key, text)),
    }),
    judge: judgePagerDuty,
  };
}
