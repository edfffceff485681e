/**
 * Memory sampling for the child processes of memory.ts (light: node built-ins only, so the
 * bare-client baseline does not load the daemon's modules through it).
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { gcNow, MB } from './common.js';

export interface MemorySample {
  mode: 'bare' | 'daemon';
  phase: 'idle' | 'baseline' | 'unchanged' | 'restart' | 'ticked' | 'bare';
  cycle: number;
  ms: number;
  /** The process's CPU time (user + system) over the cycle: steadier than `ms` on a loaded machine. */
  cpuMs: number;
  /** RSS after the cycle, after a full GC. */
  rssMB: number;
  heapUsedMB: number;
  heapTotalMB: number;
  externalMB: number;
  /** Linux: anonymous (heap, malloc, JIT code) vs file-backed (mapped binaries, libraries) RSS after GC. */
  rssAnonMB?: number;
  rssFileMB?: number;
  /** Highest RSS seen while the cycle ran (sampled every 25 ms). */
  peakRssMB: number;
  /** Peak RSS of the whole process so far (getrusage maxrss). */
  maxRssMB: number;
  /** Polls in the cycle (daemon) or requests made (bare). */
  polls?: number;
  failed?: number;
  events?: number;
  /** SQLite total_changes() during the cycle (daemon). */
  dbChanges?: number;
  /** Snapshot rows whose changed_at falls within the cycle. */
  snapshotWrites?: number;
  /** Source-level poll_state rows (entity '') written in the cycle: Poller.finishCycle writes one per source. */
  sourceStateWrites?: number;
  /** The big-reply part: how the poll of the entity with the huge reply ended. */
  outcome?: string;
}

export function arg(name: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || process.argv[i + 1] === undefined) throw new Error(`--${name} is required`);
  return process.argv[i + 1]!;
}

const mb = (n: number): number => +(n / MB).toFixed(1);

/** Run a cycle, sampling RSS while it runs; then GC, read memory and print the sample as a JSON line. */
export async function measured(
  mode: MemorySample['mode'],
  phase: MemorySample['phase'],
  cycle: number,
  run: () => Promise<Partial<MemorySample>>,
): Promise<MemorySample> {
  gcNow();
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 25);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const extra = await run();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  gcNow();
  const m = process.memoryUsage();
  const sample: MemorySample = {
    mode,
    phase,
    cycle,
    ms: Math.round(ms),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    rssMB: mb(m.rss),
    heapUsedMB: mb(m.heapUsed),
    heapTotalMB: mb(m.heapTotal),
    externalMB: mb(m.external),
    peakRssMB: mb(peak),
    maxRssMB: mb(process.resourceUsage().maxRSS * 1024),
    ...rssSplit(),
    ...extra,
  };
  process.stdout.write(`${JSON.stringify(sample)}\n`);
  return sample;
}

/** RssAnon / RssFile from /proc/self/status (Linux); nothing elsewhere. */
function rssSplit(): { rssAnonMB?: number; rssFileMB?: number } {
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const kb = (field: string): number | undefined => {
      const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
      return m ? +(Number(m[1]) / 1024).toFixed(1) : undefined;
    };
    const anon = kb('RssAnon');
    const file = kb('RssFile');
    return anon === undefined || file === undefined ? {} : { rssAnonMB: anon, rssFileMB: file };
  } catch {
    return {};
  }
}
