import type { HostwatchEvent } from '../../events/types.js';

/**
 * What e-mail and Slack messages say about a group of events, before each channel escapes
 * it for its own markup. Every text here that came from the API (summaries, domains) is
 * still raw: escaping is the channel's job (invariant 6).
 */

const ICON: Record<string, string> = { critical: '🔴', warning: '🟠', info: '🔵' };

/** One event as a person reads it. */
export interface RenderedItem {
  id: string;
  icon: string;
  severity: string;
  /** `site.offline`, plus `(resolved)` / `(firing)` for alerts. */
  title: string;
  summary: string;
  where: string;
  time: string;
}

/** One line per event, raw text. */
export function renderItem(e: HostwatchEvent): RenderedItem {
  const status = e.data.status ? ` (${e.data.status})` : '';
  return {
    id: e.id,
    icon: e.data.status === 'resolved' ? '🟢' : (ICON[e.data.severity] ?? '•'),
    severity: e.data.severity,
    title: `${e.data.name}${status}`,
    summary: oneLine(e.data.summary),
    where: e.data.domain ? `${e.data.domain} (site ${e.data.site_id})` : e.subject,
    time: e.time,
  };
}

/** The subject line of a message about `events`: the rule's summary for one, a count for several. */
export function subjectOf(events: readonly HostwatchEvent[]): string {
  const first = events[0]!;
  const worst = events.some((e) => e.data.severity === 'critical' && e.data.status !== 'resolved')
    ? 'CRITICAL'
    : events.some((e) => e.data.severity === 'warning' && e.data.status !== 'resolved')
      ? 'WARNING'
      : events.every((e) => e.data.status === 'resolved')
        ? 'RESOLVED'
        : 'INFO';
  if (events.length === 1) return cut(`[hostwatch] ${worst}: ${oneLine(first.data.summary)}`, 200);
  const sites = new Set(events.map((e) => e.data.domain).filter((d) => d !== null));
  const where = sites.size === 1 ? ` on ${[...sites][0]}` : sites.size > 1 ? ` on ${sites.size} sites` : '';
  return cut(`[hostwatch] ${worst}: ${events.length} events${where}: ${oneLine(first.data.summary)} and more`, 200);
}

/** Control characters and line breaks become spaces: a summary cannot forge a header or a line. */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim();
}

/** Cut text to at most `max` characters, marking the cut with an ellipsis. */
export function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
