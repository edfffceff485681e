/**
 * Durations as people write them in config and rule files: `500ms`, `30s`, `5m`, `6h`,
 * `2d`, and combinations from the largest unit down (`1h30m`, `1d12h`), like Prometheus.
 * Programs hold durations as integer milliseconds.
 */

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
type Unit = keyof typeof UNIT_MS;
/** Largest first: the order units must appear in, and the order formatDuration uses. */
const UNITS: readonly Unit[] = ['d', 'h', 'm', 's', 'ms'];

// `ms` must be tried before `m`, or "500ms" would read as 500 minutes followed by "s".
const PART = /(\d+)(ms|d|h|m|s)/y;

/** Parses a duration like `30s` or `1h30m` into milliseconds; null if it is not one. */
export function parseDuration(text: string): number | null {
  const total = durationTotal(text);
  return total !== null && Number.isSafeInteger(total) ? total : null;
}

/** A duration written right (`99999999999999999d`) but longer than a number holds exactly. */
export function isOverlongDuration(text: string): boolean {
  const total = durationTotal(text);
  return total !== null && !Number.isSafeInteger(total);
}

/** The milliseconds of a well-formed duration (maybe beyond a safe integer); null if it is malformed. */
function durationTotal(text: string): number | null {
  if (text === '0') return 0;
  if (text.length === 0) return null;
  let total = 0;
  let lastRank = -1;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const match = PART.exec(text);
    if (match === null) return null;
    const unit = match[2] as Unit;
    const rank = UNITS.indexOf(unit);
    // Each unit once, largest first: "30m1h" and "1m1m" are almost surely typos.
    if (rank <= lastRank) return null;
    lastRank = rank;
    total += Number(match[1]) * UNIT_MS[unit];
  }
  return total;
}

/** Formats milliseconds the way parseDuration reads them (5_400_000 -> "1h30m", 0 -> "0s"). */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  let rest = Math.round(ms);
  if (rest === 0) return '0s';
  let out = '';
  for (const unit of UNITS) {
    const count = Math.floor(rest / UNIT_MS[unit]);
    if (count > 0) {
      out += `${count}${unit}`;
      rest -= count * UNIT_MS[unit];
    }
  }
  return out;
}

/**
 * A duration for people to read in a message: "45 min", "26 h", "26 h 10 min", "3 days",
 * "3 days 4 h" (minutes are dropped from a count of days, seconds always).
 */
export function humanDuration(ms: number): string {
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 72) return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
  const days = Math.floor(hours / 24);
  return hours % 24 === 0 ? `${days} days` : `${days} days ${hours % 24} h`;
}
