/** Timestamp formats the API uses; kept in one place so every record formats time the same way. */

/** ISO 8601 in UTC without milliseconds ("2026-11-21T14:00:00Z"), as the spec's examples read. */
export function isoUtc(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The human-readable UTC display string of `integrity.checked`: "YYYY-MM-DD HH:MM UTC". */
export function displayUtc(d: Date): string {
  const s = d.toISOString();
  return `${s.slice(0, 10)} ${s.slice(11, 16)} UTC`;
}

/** A date `ms` milliseconds before `d`. */
export function before(d: Date, ms: number): Date {
  return new Date(d.getTime() - ms);
}

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
