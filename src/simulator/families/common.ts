/** Helpers shared by the family modules: dates relative to the epoch, visible fields, label text. */
import { DAY_MS, HOUR_MS, MINUTE_MS, isoUtc } from '../time.js';
import type { Random } from '../random.js';
import { fail } from '../routes.js';

export { DAY_MS, HOUR_MS, MINUTE_MS, isoUtc };

/** ISO timestamp `ms` before `d`. */
export function isoAgo(d: Date, ms: number): string {
  return isoUtc(new Date(d.getTime() - ms));
}

/** ISO timestamp `ms` after `d`. */
export function isoIn(d: Date, ms: number): string {
  return isoUtc(new Date(d.getTime() + ms));
}

/** `YYYY-MM-DD` of `d` shifted by `days`. */
export function dateOf(d: Date, days = 0): string {
  return new Date(d.getTime() + days * DAY_MS).toISOString().slice(0, 10);
}

/** A copy without the `_`-prefixed bookkeeping keys, which the API never shows. */
export function visible<T extends object>(obj: T): Visible<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) if (!k.startsWith('_')) out[k] = v;
  return out as Visible<T>;
}

/** T without its `_`-prefixed keys. */
export type Visible<T> = { [K in keyof T as K extends `_${string}` ? never : K]: T[K] };

/** "some_state" -> "Some state". */
export function label(s: string): string {
  const t = s.replace(/[_-]/g, ' ');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

/** A value moved by a small random step, kept within bounds and rounded to `digits`. */
export function nudge(rng: Random, value: number, step: number, min: number, max: number, digits = 0): number {
  const f = 10 ** digits;
  const moved = value + (rng.float() * 2 - 1) * step;
  return Math.round(Math.min(max, Math.max(min, moved)) * f) / f;
}

/** Round to `digits` decimals. */
export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Milliseconds between two ISO timestamps (b - a). */
export function msBetween(a: string, b: Date): number {
  return b.getTime() - new Date(a).getTime();
}

/** 402 `payment_required` when a plan-based tool has no room left (the reply names where to buy). */
export function requireRoom(used: number, adding: number, limit: number, unlimited: boolean, plansUrl: string, what: string): void {
  if (!unlimited && used + adding > limit) {
    fail('payment_required', `the plan has room for ${Math.max(0, limit - used)} more ${what}; buy more at plans_url`, { plans_url: plansUrl, used, limit });
  }
}

/** Mean of the non-null numbers, rounded to one decimal; null when there are none. */
export function mean(values: readonly (number | null)[]): number | null {
  const xs = values.filter((v): v is number => v !== null);
  return xs.length === 0 ? null : round(xs.reduce((a, b) => a + b, 0) / xs.length, 1);
}

/** The record with id `id` when `id` is a number (undefined when none has it), else a random one (undefined when there are none): the target of an action's `args`. */
export function byIdOrRandom<T extends { id: number }>(items: readonly T[], id: unknown, rng: Random): T | undefined {
  if (typeof id === 'number') return items.find((x) => x.id === id);
  return items.length > 0 ? rng.pick(items) : undefined;
}

/** Search locations (rank, AI visibility, local volumes): countries and a few cities. */
export const LOCATIONS = [
  { code: 2840, name: 'United States', type: 'Country', country: 'US' },
  { code: 2826, name: 'United Kingdom', type: 'Country', country: 'GB' },
  { code: 2276, name: 'Germany', type: 'Country', country: 'DE' },
  { code: 2250, name: 'France', type: 'Country', country: 'FR' },
  { code: 2724, name: 'Spain', type: 'Country', country: 'ES' },
  { code: 2380, name: 'Italy', type: 'Country', country: 'IT' },
  { code: 2124, name: 'Canada', type: 'Country', country: 'CA' },
  { code: 2036, name: 'Australia', type: 'Country', country: 'AU' },
  { code: 2528, name: 'Netherlands', type: 'Country', country: 'NL' },
  { code: 1023191, name: 'New York,New York,United States', type: 'City', country: 'US' },
  { code: 1006886, name: 'London,England,United Kingdom', type: 'City', country: 'GB' },
  { code: 1003854, name: 'Berlin,Berlin,Germany', type: 'City', country: 'DE' },
] as const;

export const LANGUAGES = [
  { code: 'en', name: 'English' },
  { code: 'de', name: 'German' },
  { code: 'fr', name: 'French' },
  { code: 'es', name: 'Spanish' },
  { code: 'it', name: 'Italian' },
  { code: 'nl', name: 'Dutch' },
] as const;

/** The location with this code, or undefined. */
export function locationOf(code: number): (typeof LOCATIONS)[number] | undefined {
  return LOCATIONS.find((l) => l.code === code);
}

/** Words to build keywords from. */
export const KEYWORD_WORDS = ['best', 'cheap', 'near me', 'online', 'review', 'how to', 'price', 'shop', 'service', 'open now', 'delivery', 'repair'];
