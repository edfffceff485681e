import { setFlagsFromString } from 'node:v8';

/**
 * Trade some speed for memory in the daemon's process: V8's `--optimize-for-size` keeps the
 * young generation small and lets the old one grow less far beyond its live data before a
 * full collection. A daemon polling 10,000 sites waits on the API's request budget, not on
 * its CPU, and measured at 10,000 sites × every per-site source (docs/benchmarks.md) this
 * took the peak RSS of a full cycle from 229 to 188 MB with no longer cycle.
 *
 * Set at run time, first thing in the daemon's commands (`run`, `poll`, `demo`); V8 reads
 * this flag as it goes (its heap limits, its compiler heuristics), which the benchmark
 * checks by its effect. Library users who embed createApp decide for their own process.
 */
export function preferSmallHeap(): void {
  setFlagsFromString('--optimize-for-size');
}
