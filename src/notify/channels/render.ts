import type { HostwatchEvent } from '../../events/types.js';

/**
 * What the messages of every channel written for people say about a group of events,
 * before each channel escapes it for its own markup, and the helpers that keep a text
 * within a provider's limit. Every text here that came from the API (summaries, domains)
 * is still raw: escaping is the channel's job (invariant 6).
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

/**
 * The text a channel shows for an event: the rule's summary, or what the channel's own
 * `template:` renders from the event (notify/templates.ts).
 */
export type ItemText = (e: HostwatchEvent) => string;

/** The rule's summary: the text of every channel without a template. */
export const summaryText: ItemText = (e) => e.data.summary;

/** One line per event, raw text; `text` says what the event says (its summary by default). */
export function renderItem(e: HostwatchEvent, text: ItemText = summaryText): RenderedItem {
  const status = e.data.status ? ` (${e.data.status})` : '';
  return {
    id: e.id,
    icon: e.data.status === 'resolved' ? '🟢' : (ICON[e.data.severity] ?? '•'),
    severity: e.data.severity,
    title: `${e.data.name}${status}`,
    summary: oneLine(text(e)),
    where: oneLine(e.data.domain ? `${e.data.domain} (site ${e.data.site_id})` : e.subject),
    time: e.time,
  };
}

/** The worst state in a group: what a subject line, a colour or a priority reflects. */
export type Worst = 'CRITICAL' | 'WARNING' | 'RESOLVED' | 'INFO';

/** The worst state of a group of events: an unresolved critical beats a warning, and so on. */
export function worstOf(events: readonly HostwatchEvent[]): Worst {
  if (events.some((e) => e.data.severity === 'critical' && e.data.status !== 'resolved')) return 'CRITICAL';
  if (events.some((e) => e.data.severity === 'warning' && e.data.status !== 'resolved')) return 'WARNING';
  if (events.every((e) => e.data.status === 'resolved')) return 'RESOLVED';
  return 'INFO';
}

/** The subject line of a message about `events`: the first event's text for one, a count for several. */
export function subjectOf(events: readonly HostwatchEvent[], text: ItemText = summaryText): string {
  const first = events[0]!;
  const worst = worstOf(events);
  if (events.length === 1) return cut(`[hostwatch] ${worst}: ${oneLine(text(first))}`, 200);
  const sites = new Set(events.map((e) => e.data.domain).filter((d) => d !== null));
  // Events about no site (a channel.disabled, the API's alerts) are the account's: a group of
  // one site's event and eight of those is not "9 events on" that site.
  const account = events.some((e) => e.data.domain === null) ? ' and the account' : '';
  const where = sites.size === 1 ? ` on ${oneLine([...sites][0]!)}${account}` : sites.size > 1 ? ` on ${sites.size} sites${account}` : '';
  return cut(`[hostwatch] ${worst}: ${events.length} events${where}: ${oneLine(text(first))} and more`, 200);
}

/**
 * Control characters, line breaks and bidi overrides become spaces: a summary cannot forge
 * a header or a line, or make text read in another order than it was written.
 */
export function oneLine(text: string): string {
  return text.replace(UNSAFE_RUNS, ' ').trim();
}

/** Control characters (C0, DEL, C1), line and paragraph separators, and bidi overrides. */
const UNSAFE_CHARS = '[\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069]';
const UNSAFE_RUNS = new RegExp(`${UNSAFE_CHARS}+`, 'g');
const UNSAFE = new RegExp(UNSAFE_CHARS, 'g');

/**
 * A line for a terminal, whose parts may be API text (a subject made of a review's URL, a
 * receiver's answer): each control character (ESC, CR, LF, BEL, C1's CSI) and bidi
 * override becomes a space, so the text can neither rewrite the screen nor forge a line.
 * Unlike oneLine, the line's own spacing is kept. What every CLI command prints of the log.
 */
export function terminalLine(text: string): string {
  return text.replace(UNSAFE, ' ');
}

/**
 * JSON text for a terminal: the characters terminalLine replaces, written as `\uXXXX`
 * escapes instead (JSON.stringify leaves C1 controls and bidi overrides as they are). The
 * same JSON value, byte for byte the same wherever the text holds none.
 */
export function terminalJson(json: string): string {
  return json.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Cut text to at most `max` UTF-16 units (what JavaScript and most providers count),
 * marking the cut with an ellipsis. The cut never splits a surrogate pair, so an emoji at
 * the edge is dropped whole rather than sent as half a character.
 */
export function cut(text: string, max: number): string {
  return escapedCut(text, max, (c) => c);
}

/**
 * Escape `text` for a markup and cut the escaped result to at most `max` UTF-16 units,
 * marking a cut with an ellipsis. `escape` maps one character (a code point) to its
 * escaped form, so the cut falls between two escaped characters: never inside an entity
 * (`&amp;`), after a lone escaping backslash, or between the halves of an emoji.
 */
export function escapedCut(text: string, max: number, escape: (char: string) => string): string {
  const pieces: string[] = [];
  let length = 0;
  for (const char of text) {
    const piece = escape(char);
    pieces.push(piece);
    length += piece.length;
  }
  if (length <= max) return pieces.join('');
  const room = Math.max(0, max - 1);
  let kept = 0;
  let i = 0;
  while (i < pieces.length && kept + pieces[i]!.length <= room) kept += pieces[i++]!.length;
  return `${pieces.slice(0, i).join('')}…`;
}

/**
 * Cut text to at most `maxBytes` bytes of UTF-8 (ntfy counts bytes), on a character
 * boundary, marking the cut with an ellipsis.
 */
export function cutBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const room = Math.max(0, maxBytes - Buffer.byteLength('…', 'utf8'));
  let used = 0;
  let out = '';
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (used + size > room) break;
    used += size;
    out += char;
  }
  return `${out}…`;
}

/** The last line of a message that could not hold every event of its group. */
export function moreLine(n: number): string {
  return `…and ${n} more events (hostwatch events lists them all)`;
}

/**
 * How many items, in order, fit in `budget` given each one's size: all of them when they
 * fit and are at most `maxCount`, else as many as fit in `budget - reserve` (room for a
 * moreLine) up to `maxCount`. At least one is shown: each channel cuts a single item to
 * its limit before it gets here.
 */
export function fitting(sizes: readonly number[], budget: number, reserve: number, maxCount = Number.POSITIVE_INFINITY): number {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (sizes.length <= maxCount && total <= budget) return sizes.length;
  let used = 0;
  let n = 0;
  while (n < sizes.length && n < maxCount && used + sizes[n]! <= budget - reserve) used += sizes[n++]!;
  return Math.max(1, n);
}
