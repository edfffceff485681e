import type { DigestConfig } from '../config/types.js';
import type { HostwatchEvent } from '../events/types.js';
import { routeBindings } from './routing.js';

/**
 * Grouping (docs/routing.md): outbox rows of one channel with the same group key go out as
 * one message. The key is decided when the event is queued; when the message goes is
 * decided here too, from the group's state. Everything here is pure.
 */

/** The group key of the digest: every digest row of a channel goes out in one message. */
export const DIGEST_GROUP = 'digest';

/**
 * The group key of an event for a route: the route and the values of its group_by fields
 * (`labels.client` reads one label: sites of one client go out together).
 */
export function groupKey(e: HostwatchEvent, route: number, groupBy: readonly string[]): string {
  const b = routeBindings(e);
  const valueOf = (f: string): unknown => (f.startsWith('labels.') ? (b['labels'] as Record<string, unknown>)[f.slice('labels.'.length)] : b[f]);
  // An int (site_id) is written as the number it holds, as before it was one.
  const text = (v: unknown): string => (typeof v === 'bigint' ? String(v) : JSON.stringify(v ?? null));
  return [`r${route}`, ...groupBy.map((f) => `${f}=${text(valueOf(f))}`)].join('|');
}

/** What is known of a group when an event joins it. */
export interface GroupState {
  /** When the pending rows of the group are due (null: none pending). */
  pendingDue: number | null;
  /** When a message of the group last went out (null: never). */
  lastSent: number | null;
}

/**
 * When a new row of a group is due. It joins a waiting message; otherwise a group that sent
 * recently waits for group_interval, and a new group waits group_wait for more events.
 */
export function groupDueAt(now: number, g: GroupState, waitMs: number, intervalMs: number): number {
  if (g.pendingDue !== null) return g.pendingDue;
  if (g.lastSent !== null && now < g.lastSent + intervalMs) return g.lastSent + intervalMs;
  return now + waitMs;
}

/** One formatter per time zone (making one costs far more than using it). */
const FORMATS = new Map<string, Intl.DateTimeFormat>();

/** The zone's offset from UTC at a time, in milliseconds (positive east of Greenwich). */
export function zoneOffsetMs(at: number, timeZone: string): number {
  let format = FORMATS.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    FORMATS.set(timeZone, format);
  }
  const parts = format.formatToParts(new Date(at));
  const n = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
  const asUtc = Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second'));
  return asUtc - Math.floor(at / 1000) * 1000;
}

/** The first time after `now` at which the zone's clock shows the digest's hour and minute. */
export function nextDigestAt(now: number, d: DigestConfig): number {
  const local = new Date(now + zoneOffsetMs(now, d.timezone));
  for (let day = 0; day <= 2; day++) {
    const wall = Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate() + day, d.hour, d.minute);
    // Two passes settle the offset across a DST change.
    let at = wall - zoneOffsetMs(wall, d.timezone);
    at = wall - zoneOffsetMs(at, d.timezone);
    if (at > now) return at;
  }
  return now + 86_400_000;
}
