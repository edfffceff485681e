/** Events made by hand for delivery tests, through the same envelope the pipeline uses. */
import { envelope, eventId } from '../src/events/envelope.js';
import type { HostwatchEvent, Severity } from '../src/events/types.js';

/** One event about a site; `key` makes its id unique. */
export function siteEvent(
  key: string,
  siteId: number,
  opts: { name?: string; severity?: Severity; status?: 'firing' | 'resolved'; summary?: string; domain?: string; at?: number; rule?: string; subject?: string } = {},
): HostwatchEvent {
  const name = opts.name ?? 'backup.failed';
  const at = new Date(opts.at ?? Date.parse('2026-11-21T00:00:00Z'));
  const domain = opts.domain ?? `site${siteId}.example.com`;
  return envelope({
    id: eventId('test', key),
    instance: 'test',
    subject: opts.subject ?? `sites/${siteId}/${name.split('.')[0]}/${key}`,
    time: at,
    data: {
      name,
      severity: opts.severity ?? 'warning',
      ...(opts.status ? { status: opts.status } : {}),
      summary: opts.summary ?? `${name} on ${domain} (${key})`,
      site_id: siteId,
      domain,
      changes: [],
      rule: opts.rule ?? name.replace('.', '-'),
      observed_at: at.toISOString(),
    },
  });
}
