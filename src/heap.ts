import { setFlagsFromString } from 'node:v8';

/**
 * Trade some speed for memory in the daemon's process. A daemon polling 10,000 sites waits
 * on the API's request budget, not on its CPU (docs/benchmarks.md, runs 12 and 13):
 *
 * - `--optimize-for-size` lets the old generation grow less far beyond its live data before
 *   a full collection: the peak RSS of a full 10,000-site cycle went from 229 to 188 MB.
 * - `--semi-space-growth-factor=1` keeps the young generation at the size it starts with
 *   (two 1 MB semi-spaces) instead of doubling it up to 2 × 16 MB as allocation goes on,
 *   about 25 MB of RSS at the peak. Its ceiling, `--max-semi-space-size`, is read only as
 *   V8 starts, before any of our code runs (set here it changes nothing, measured), and a
 *   flag on the command line or in NODE_OPTIONS would not reach `npx hostwatch`; the growth
 *   factor is read each time the young generation would grow, so it applies from here on.
 *   More scavenges, each over less: no longer cycle measured at 1,000 requests/s.
 *
 * Set at run time, before the daemon's modules load (src/command-heap.ts, for `run`, `poll`
 * and `demo`), which the benchmark checks by their effect. Only flags V8 reads as it goes belong here: flags read
 * as V8 starts do nothing, and GC threading flags changed at run time crash it. Library
 * users who embed createApp decide for their own process.
 */
export function preferSmallHeap(): void {
  setFlagsFromString('--optimize-for-size');
  setFlagsFromString('--semi-space-growth-factor=1');
}
