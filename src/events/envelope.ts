import { hash } from 'node:crypto';
import { closest } from '../closest.js';
import type { EventData, HostwatchEvent } from './types.js';

/**
 * A deterministic event id: the same inputs give the same id on every run, retry and
 * restart, so receivers can deduplicate (invariant 5). Formatted as a UUID (version 8,
 * "custom") so it fits systems that expect one.
 */
export function eventId(...parts: Array<string | number>): string {
  // crypto.hash: the one-shot form of createHash(), the same digest without a Hash object.
  const h = hash('sha256', parts.join('\u001f'), 'hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The id of a one-shot change event: rule, subject and the snapshot version that showed it. */
export function changeEventId(rule: string, subject: string, version: number): string {
  return eventId('change', rule, subject, version);
}

/** The id of the n-th firing (or its resolution) of an alert. */
export function alertEventId(rule: string, subject: string, seq: number, status: 'firing' | 'resolved'): string {
  return eventId('alert', rule, subject, seq, status);
}

/**
 * The stable id of an alert's n-th firing: the id of its firing event, carried by that
 * event, its re-sends and its resolution as `data.alert_id`. Receivers that open something
 * per alert (PagerDuty's dedup_key, Opsgenie's alias) key it by this, so the resolution
 * closes what the firing opened, across retries, restarts and instances.
 */
export function alertId(rule: string, subject: string, seq: number): string {
  return alertEventId(rule, subject, seq, 'firing');
}

/** The id of the n-th re-send (`repeat`) of an alert's seq-th firing. */
export function alertRepeatId(rule: string, subject: string, seq: number, repeat: number): string {
  return eventId('alert', rule, subject, seq, 'firing', 'repeat', repeat);
}

/**
 * The id of a change event of a rule with a `dedup_key`: it derives from the key's value,
 * not the snapshot version, so the same value gives the same id and is stored (and sent) once.
 */
export function dedupEventId(rule: string, subject: string, key: string): string {
  return eventId('change-key', rule, subject, key);
}

/** Every CloudEvents type of hostwatch starts with this. */
export const TYPE_PREFIX = 'hostwatch.';
const TYPE_SHAPE = /^[a-z0-9_]+(\.[a-z0-9_]+)+$/;

/** Whether text has the shape of an event name or type (`site.offline`, `hostwatch.site.offline`), known or not. */
export function typeShaped(text: string): boolean {
  return TYPE_SHAPE.test(text);
}

/** What a type filter names: the CloudEvents type, or why it names none (see resolveEventType). */
export type TypeResolution =
  | { ok: true; type: string }
  | { ok: false; problem: 'shape' | 'unknown'; near: string | null; message: string };

/** What a filter that names no event type is told, after the name of the parameter or option. */
export const TYPE_SHAPE_MESSAGE = 'expected an event type like site.offline or hostwatch.site.offline';

/**
 * The CloudEvents type a filter text names, resolved against the event names hostwatch
 * knows (knownEventNames): a name (`site.offline`) or its type (`hostwatch.site.offline`).
 * The one place the API, the stream and `hostwatch events` turn a filter into a type.
 * Known names are looked up, not guessed from the prefix: `hostwatch.watchdog` is a name
 * (its type is `hostwatch.hostwatch.watchdog`), so text starting with `hostwatch.` is
 * first taken as a name, then as a type. Unknown text gives the nearest known name.
 */
export function resolveEventType(text: string, known: readonly string[]): TypeResolution {
  if (!typeShaped(text)) {
    // A rule's name (`site-offline`) is its event's name with dashes (docs/rules.md).
    const dotted = text.replace(/-/g, '.');
    const near = dotted !== text && typeShaped(dotted) ? closest(dotted, known) : null;
    return { ok: false, problem: 'shape', near, message: TYPE_SHAPE_MESSAGE };
  }
  if (known.includes(text)) return { ok: true, type: TYPE_PREFIX + text };
  if (text.startsWith(TYPE_PREFIX) && known.includes(text.slice(TYPE_PREFIX.length))) return { ok: true, type: text };
  const near = closest(text, known) ?? (text.startsWith(TYPE_PREFIX) ? closest(text.slice(TYPE_PREFIX.length), known) : null);
  return { ok: false, problem: 'unknown', near, message: `no event is named ${text}${near ? `; did you mean ${near}?` : ''} (docs/events.md lists them)` };
}

/**
 * resolveEventType, then, for text that names no event hostwatch knows now, a type the
 * event log still holds (`logged`): a rule removed or renamed since left its events there.
 * What the API, the stream and `hostwatch events --type` all use.
 */
export async function resolveTypeFilter(text: string, known: readonly string[], logged: (type: string) => Promise<boolean>): Promise<TypeResolution> {
  const r = resolveEventType(text, known);
  if (r.ok || r.problem === 'shape') return r;
  for (const type of new Set([text, TYPE_PREFIX + text].filter((t) => t.startsWith(TYPE_PREFIX)))) {
    if (await logged(type)) return { ok: true, type };
  }
  return r;
}

/** Wrap event data in the CloudEvents 1.0 envelope of PRODUCT.md. */
export function envelope(init: { id: string; instance: string; subject: string; time: Date; data: EventData }): HostwatchEvent {
  return {
    specversion: '1.0',
    id: init.id,
    source: `hostwatch://${init.instance}`,
    type: `${TYPE_PREFIX}${init.data.name}`,
    subject: init.subject,
    time: init.time.toISOString(),
    datacontenttype: 'application/json',
    data: init.data,
  };
}
