/**
 * The chaos suite's bounds and figures. Every scenario is bounded in time and in count
 * (the environment can lower or raise the counts: CHAOS_KILLS, CHAOS_SECONDS, CHAOS_SEED),
 * talks to loopback only, and records what it did and what it found; chaos/global-setup.ts
 * prints the table and writes dist/chaos-results.json, which docs/reliability.md quotes.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { packageRoot } from '../src/paths.js';

/** One JSON line per scenario, gathered by the global teardown. */
export const RESULTS_LINES = join(packageRoot(), 'dist', 'chaos-results.jsonl');

function envInt(name: string, fallback: number, min: number, max: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name}: a whole number from ${min} to ${max} (got "${text}")`);
  return n;
}

/** How much chaos: each scenario reads its bound here. */
export const limits = {
  /** SIGKILLs of a running daemon (the run used 55). */
  kills: envInt('CHAOS_KILLS', 25, 1, 500),
  /** Seconds of random faults in the outage scenario. */
  seconds: envInt('CHAOS_SECONDS', 30, 5, 600),
  /** Seed of every random choice, so a run can be repeated. */
  seed: envInt('CHAOS_SEED', 15, 0, 2 ** 31),
};

/** A figure: a count, a duration in seconds, a yes/no. */
export type Figure = number | string | boolean;

/** Record a scenario's figures (call it before asserting, so a failed scenario still reports). */
export function record(scenario: string, figures: Record<string, Figure>): void {
  mkdirSync(dirname(RESULTS_LINES), { recursive: true });
  appendFileSync(RESULTS_LINES, `${JSON.stringify({ scenario, figures })}\n`);
}

/** A small seeded generator (mulberry32): the same seed gives the same run. */
export function seeded(seed: number): { next: () => number; int: (lo: number, hi: number) => number; pick: <T>(list: readonly T[]) => T } {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number): number => lo + Math.floor(next() * (hi - lo + 1));
  return { next, int, pick: (list) => list[int(0, list.length - 1)]! };
}

/** Seconds since `start`, to one decimal. */
export function secondsSince(start: number): number {
  return Math.round((Date.now() - start) / 100) / 10;
}
