import type { OpsgenieChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, header, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider, type Verdict } from './http.js';
import { dedupKey } from './pagerduty.js';
import { cut, oneLine, summaryText, type ItemText } from './render.js';

/**
 * The Opsgenie Alert API: a firing alert (or a change event) creates an alert with
 * `alias` = the alert's stable id, and its resolution closes the alert by that alias
 * (`POST /v2/alerts/{alias}/close?identifierType=alias`). Opsgenie de-duplicates on the
 * alias, so a retry or a second instance adds to the same open alert. Requests are
 * asynchronous: 202 means accepted for processing. EU accounts use api.eu.opsgenie.com
 * (`region: eu`). The key goes in `Authorization: GenieKey …` only.
 */

/** Opsgenie's documented limits (Create Alert). */
export const OPSGENIE_LIMITS = { message: 130, alias: 512, description: 15_000, entity: 512, source: 100, note: 25_000, tag: 50, tags: 20, details: 8000 } as const;
/** Opsgenie's API limits are per account and plan; four requests a second per channel stays well below them. */
export const OPSGENIE_MIN_INTERVAL_MS = 250;

const PRIORITY: Record<string, string> = { critical: 'P1', warning: 'P3', info: 'P5' };

/** The alert's details (a flat string map, 8000 characters in all). */
function details(e: HostwatchEvent): Record<string, string> {
  const out: Record<string, string> = { event_id: e.id, type: e.type, subject: cut(oneLine(e.subject), 500), rule: e.data.rule };
  if (e.data.site_id !== null) out['site_id'] = String(e.data.site_id);
  if (e.data.domain !== null) out['domain'] = cut(oneLine(e.data.domain), 500);
  if (e.data.status) out['status'] = e.data.status;
  return out;
}

/** The create-alert request body for an event. */
export function opsgenieAlert(e: HostwatchEvent, text: ItemText = summaryText) {
  const said = oneLine(text(e)) || e.data.name;
  // API text, one line each (oneLine): the lines are the ones this builds.
  const description = [said, '', `${e.data.name} · ${oneLine(e.data.domain ?? e.subject)} · ${e.time}`, typeof e.data['description'] === 'string' ? `\n${oneLine(e.data['description'])}` : '']
    .join('\n')
    .trim();
  return {
    message: cut(said, OPSGENIE_LIMITS.message),
    alias: dedupKey(e),
    description: cut(description, OPSGENIE_LIMITS.description),
    tags: ['hostwatch', e.data.severity, cut(e.data.name, OPSGENIE_LIMITS.tag)],
    details: details(e),
    entity: cut(oneLine(e.data.domain ?? e.subject), OPSGENIE_LIMITS.entity),
    source: cut(e.source, OPSGENIE_LIMITS.source),
    priority: PRIORITY[e.data.severity] ?? 'P5',
  };
}

/** The close request of a resolved alert: where it goes and what it says. */
export function opsgenieClose(apiUrl: string, e: HostwatchEvent, text: ItemText = summaryText) {
  return {
    url: `${apiUrl}/v2/alerts/${encodeURIComponent(dedupKey(e))}/close?identifierType=alias`,
    body: { source: cut(e.source, OPSGENIE_LIMITS.source), note: cut(`resolved: ${oneLine(text(e))}`, OPSGENIE_LIMITS.note) },
  };
}

/**
 * What Opsgenie's answer means. 401/403: a wrong or under-privileged key (only an API
 * integration's key may create and close alerts): disabled. 404 on create: a wrong
 * address, disabled; on close it is dead-lettered (the alert may never have been created).
 * 422: Opsgenie refused the body: dead-lettered. 429 and 5xx: retried.
 */
export function judgeOpsgenie(closing: boolean) {
  return (answer: HttpAnswer, now: number): Verdict => {
    const detail = detailOf(answer.body, (j) => {
      const message = typeof j['message'] === 'string' ? j['message'] : null;
      const errors = j['errors'] && typeof j['errors'] === 'object' ? Object.entries(j['errors'] as Record<string, unknown>).map(([k, v]) => `${k}: ${String(v)}`) : [];
      return message === null ? null : `${message}${errors.length ? ` (${errors.join('; ')})` : ''}`;
    });
    // Opsgenie's throttling names its window in X-RateLimit-Period-In-Sec rather than Retry-After.
    const period = Number(header(answer, 'x-ratelimit-period-in-sec'));
    const retryAfterMs = Number.isFinite(period) && period > 0 ? period * 1000 : null;
    return standardVerdict(answer.status, detail, retryAfterMs ?? retryAfterHeader(answer, now), closing ? [401, 403] : [401, 403, 404]);
  };
}

/** The Opsgenie provider for a channel. */
export function opsgenieProvider(cfg: OpsgenieChannelConfig, text: ItemText = summaryText): Provider {
  const headers = { 'content-type': 'application/json', authorization: `GenieKey ${cfg.api_key}` };
  const create = judgeOpsgenie(false);
  const close = judgeOpsgenie(true);
  const resolves = (events: readonly HostwatchEvent[]) => events[0]!.data.status === 'resolved';
  return {
    label: 'Opsgenie',
    groups: false,
    minIntervalMs: OPSGENIE_MIN_INTERVAL_MS,
    request: (events) => {
      if (!resolves(events)) return { url: `${cfg.api_url}/v2/alerts`, headers, body: JSON.stringify(opsgenieAlert(events[0]!, text)) };
      const c = opsgenieClose(cfg.api_url, events[0]!, text);
      return { url: c.url, headers, body: JSON.stringify(c.body) };
    },
    judge: (answer, now, events) => (resolves(events) ? close : create)(answer, now),
  };
}
