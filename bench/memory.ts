/**
 * RSS and cycle time of a full cycle (every source; 3 requests per site plus the site list
 * and jobs) against the simulator in its own process, with a bare fetch + JSON.parse client
 * in its own process as the baseline. See bare-child.ts and daemon-child.ts for what
 * each process does.
 *
 * Targets (PRODUCT.md): under 200 MB RSS for 10,000 sites; memory flat over a long run
 * (here: five consecutive cycles after the baseline — one unchanged, then four with the world
 * ticking before each — and the slope of post-GC heap and RSS over them).
 * Also: an unchanged cycle writes no snapshot row (SQLite total_changes() over the cycle).
 */
import { jsonLines, MB, round, slope, spawnNode, startSimChild } from './common.js';
import type { MemorySample } from './sample.js';

export interface MemorySize {
  sites: number;
  concurrency: number;
  rps: number;
  ticksPerCycle: number;
  bare: { cycleMs: number; cpuMs: number; peakRssMB: number; rssAfterGcMB: number; idleRssMB: number; requests: number };
  daemon: {
    idleRssMB: number;
    cycles: MemorySample[];
    /** Highest RSS of the daemon process over the whole run (getrusage). */
    peakRssMB: number;
    /** Cycle numbers of the steady run the slopes are computed over. */
    steadyCycles: number[];
    /** Least-squares slope of post-GC RSS over the steady cycles, MB per cycle. */
    rssSlopeMBPerCycle: number;
    heapSlopeMBPerCycle: number;
    /**
     * Unchanged cycle: SQLite row changes, snapshot rows written (expected 0), and the
     * source-level poll_state rows (one per source per cycle, by design) among the changes.
     */
    unchanged: WriteCount;
    /** First cycle after a restart on the same database (alert conditions re-checked). */
    restart?: WriteCount;
  };
  /** Daemon / bare, same run. */
  ratios: { unchangedCycleTime: number; unchangedCycleCpu: number; peakRss: number };
}

export interface WriteCount {
  polls: number;
  dbChanges: number;
  snapshotWrites: number;
  sourceStateWrites: number;
}

function writes(s: MemorySample): WriteCount {
  return { polls: s.polls ?? 0, dbChanges: s.dbChanges ?? -1, snapshotWrites: s.snapshotWrites ?? -1, sourceStateWrites: s.sourceStateWrites ?? -1 };
}

/** One size of the memory part: its sites, bare cycles, ticked daemon cycles, and whether a restart is measured. */
export interface MemorySizeSpec {
  /** Its name for `--memory=` (bench/run.ts). */
  piece: '1k' | '10k';
  sites: number;
  bareCycles: number;
  tickedCycles: number;
  restart: boolean;
}

/** The sizes `npm run bench` measures. */
export const MEMORY_SIZES: MemorySizeSpec[] = [
  { piece: '1k', sites: 1_000, bareCycles: 2, tickedCycles: 8, restart: true },
  { piece: '10k', sites: 10_000, bareCycles: 1, tickedCycles: 3, restart: false },
];

export interface MemoryOptions {
  sizes?: MemorySizeSpec[];
  concurrency?: number;
  ticksPerCycle?: number;
  /**
   * The pace of both processes. Default 1,000 requests/s, the most a config allows: the
   * daemon at its busiest. (Unlimited, the unchanged cycle of 10,000 sites ran at 15,000
   * requests/s, a pace no config can ask for, and its heap grew with it.)
   */
  rps?: number;
  log?: (line: string) => void;
}

export async function benchMemory(opts: MemoryOptions = {}): Promise<MemorySize[]> {
  const sizes = opts.sizes ?? MEMORY_SIZES;
  const concurrency = opts.concurrency ?? 4;
  const ticks = opts.ticksPerCycle ?? 10;
  const rps = opts.rps ?? MAX_CONFIGURABLE_RPS;
  const log = opts.log ?? (() => {});
  const out: MemorySize[] = [];
  for (const size of sizes) {
    const sim = await startSimChild({ sites: size.sites });
    try {
      const run = async (mode: 'bare' | 'daemon'): Promise<MemorySample[]> => {
        const common = ['--url', sim.url, '--concurrency', String(concurrency), '--rps', String(rps)];
        const child =
          mode === 'bare'
            ? spawnNode('bare-child.js', [...common, '--cycles', String(size.bareCycles)], ['--expose-gc'])
            : spawnNode(
                'daemon-child.js',
                [...common, '--sites', String(size.sites), '--ticked-cycles', String(size.tickedCycles), '--ticks', String(ticks),
                  '--restart', size.restart ? 'yes' : 'no'],
                ['--expose-gc'],
              );
        return jsonLines<MemorySample>(child, (s) =>
          log(`memory ${size.sites} sites, ${mode} ${s.phase} #${s.cycle}: ${s.ms} ms (CPU ${s.cpuMs} ms), RSS ${s.rssMB} MB after GC (heap ${s.heapUsedMB}/${s.heapTotalMB} MB), peak ${s.peakRssMB} MB`),
        );
      };
      const bare = await run('bare');
      const daemon = await run('daemon');
      const bareLast = bare[bare.length - 1]!;
      const bareIdle = bare.find((s) => s.phase === 'idle')!;
      const idle = daemon.find((s) => s.phase === 'idle')!;
      const cycles = daemon.filter((s) => s.phase !== 'idle');
      const unchanged = cycles.find((s) => s.phase === 'unchanged')!;
      const restart = cycles.find((s) => s.phase === 'restart');
      // The steady run: the unchanged and ticked cycles of one app (after a restart, only the new app's).
      const restarted = cycles.findIndex((s) => s.phase === 'restart');
      const steady = cycles.slice(restarted + 1).filter((s) => s.phase === 'unchanged' || s.phase === 'ticked');
      const peak = Math.max(...daemon.map((s) => s.maxRssMB));
      const barePeak = Math.max(...bare.map((s) => s.maxRssMB));
      out.push({
        sites: size.sites,
        concurrency,
        rps,
        ticksPerCycle: ticks,
        bare: { cycleMs: bareLast.ms, cpuMs: bareLast.cpuMs, peakRssMB: barePeak, rssAfterGcMB: bareLast.rssMB, idleRssMB: bareIdle.rssMB, requests: bareLast.polls ?? 0 },
        daemon: {
          idleRssMB: idle.rssMB,
          cycles,
          peakRssMB: peak,
          steadyCycles: steady.map((s) => s.cycle),
          rssSlopeMBPerCycle: round(slope(steady.map((s) => s.cycle), steady.map((s) => s.rssMB)), 2),
          heapSlopeMBPerCycle: round(slope(steady.map((s) => s.cycle), steady.map((s) => s.heapUsedMB)), 2),
          unchanged: writes(unchanged),
          ...(restart ? { restart: writes(restart) } : {}),
        },
        ratios: { unchangedCycleTime: round(unchanged.ms / bareLast.ms, 3), unchangedCycleCpu: round(unchanged.cpuMs / bareLast.cpuMs, 3), peakRss: round(peak / barePeak, 2) },
      });
    } finally {
      await sim.close();
    }
  }
  return out;
}

/** The highest `api.max_requests_per_second` a config accepts. */
const MAX_CONFIGURABLE_RPS = 1_000;

export interface BigReply {
  /** What the simulator sent for one entity's reply. */
  bytes: number;
  chunked: boolean;
  /** How that entity's poll ended (too_large above api.max_reply_bytes). */
  outcome: string;
  idleRssMB: number;
  peakRssMB: number;
  cycleMs: number;
}

/**
 * One `poll --once` cycle of 200 sites in which one reply (a site's DNS) is huge: 60 MB with
 * a Content-Length, 60 MB without (read until the cap), and 15 MB (under the 16 MB default
 * cap, so read, parsed, diffed and stored). The daemon in its own process; peak RSS
 * (getrusage) against the PRODUCT.md target of 250 MB.
 */
export async function benchBigReply(opts: { sites?: number; log?: (line: string) => void } = {}): Promise<BigReply[]> {
  const cases = [
    { bytes: 60 * MB, chunked: false },
    { bytes: 60 * MB, chunked: true },
    { bytes: 15 * MB, chunked: true },
  ];
  const out: BigReply[] = [];
  for (const c of cases) {
    const sim = await startSimChild({ sites: opts.sites ?? 200 });
    try {
      const child = spawnNode('reply-child.js', ['--url', sim.url, '--bytes', String(c.bytes), '--chunked', c.chunked ? 'yes' : 'no'], ['--expose-gc']);
      const samples = await jsonLines<MemorySample>(child);
      const idle = samples.find((s) => s.phase === 'idle')!;
      const cycle = samples.find((s) => s.phase === 'baseline')!;
      const row = { ...c, outcome: cycle.outcome ?? '?', idleRssMB: idle.rssMB, peakRssMB: Math.max(...samples.map((s) => s.maxRssMB)), cycleMs: cycle.ms };
      opts.log?.(`big reply ${Math.round(c.bytes / MB)} MB${c.chunked ? ' (no Content-Length)' : ''}: ${row.outcome}, peak RSS ${row.peakRssMB} MB`);
      out.push(row);
    } finally {
      await sim.close();
    }
  }
  return out;
}
