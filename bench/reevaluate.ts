/**
 * The cost of time passing: one pass of the Timekeeper (every clock rule, forced) over the
 * stored snapshots of 1,000 sites (backups and hourly backups: backup.stale, backup.stuck,
 * hourly_backup.stale, subscription.expiring), against a baseline measured in the same run:
 * reading the same stored snapshot rows and JSON.parse-ing their bodies, which any
 * re-evaluation must do. The pass must make no API request.
 */
import { performance } from 'node:perf_hooks';
import { createApp, type App } from '../src/main.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { backupsSource } from '../src/sources/registry.js';
import { hourlyBackupsSource } from '../src/sources/families/hosting.js';
import { mapLimit } from '../src/semaphore.js';
import { repos } from '../src/store/repos.js';
import { median, nullStream, startSimChild, tempDir } from './common.js';
import { benchConfig } from './config.js';

export interface ReevaluateResult {
  sites: number;
  entities: number;
  rounds: number;
  /** Read + JSON.parse of the stored bodies, per pass (median ms). */
  bareMs: number;
  /** Timekeeper.tick({ force: true }) per pass (median ms). */
  passMs: number;
  /** Median of the per-round pass/bare ratios. */
  ratio: number;
  passPerEntityUs: number;
  /** API requests made by all the passes together (must be 0). */
  apiRequests: number;
  /** The pass's share of one core at 10,000 sites if every clock rule ran every minute (its floor). */
  coreShareAt10kPerMinute: number;
}

const KEEP = new Set(['sites', backupsSource.name, hourlyBackupsSource.name]);

function apiRequests(app: App): number {
  const m = app.metrics.registry.getSingleMetric('hostwatch_api_requests_total') as unknown as { hashMap?: Record<string, { value: number }> } | undefined;
  return Object.values(m?.hashMap ?? {}).reduce((n, v) => n + v.value, 0);
}

/** Run the benchmark. */
export async function benchReevaluate(opts: { sites?: number; rounds?: number; log?: (line: string) => void } = {}): Promise<ReevaluateResult> {
  const sites = opts.sites ?? 1000;
  const rounds = opts.rounds ?? 7;
  const log = opts.log ?? (() => {});
  const sim = await startSimChild({ sites });
  const tmp = tempDir();
  let app: App | null = null;
  try {
    const config = benchConfig({ url: sim.url, dbPath: `${tmp.dir}/reevaluate.db` });
    for (const name of SOURCE_NAMES) if (!KEEP.has(name)) config.sources[name] = { enabled: false, every_ms: null, priority: null, max_events: 100 };
    const a = await createApp(config, { logDestination: nullStream() });
    app = a;
    log(`reevaluate: first cycle of ${sites} sites (backups, hourly backups)`);
    await a.runOnce();
    const rows: Array<{ source: string; entity: string }> = [];
    for (const s of [backupsSource, hourlyBackupsSource]) {
      for (const e of await a.poller.storedEntities(s)) rows.push({ source: s.name, entity: e.entity });
    }
    const snapshots = repos(a.store).snapshots;
    // The baseline: what any re-evaluation must do, read each stored body through the store
    // port (as many reads in flight as the re-evaluator has entities) and parse it.
    const read = async (): Promise<void> => {
      let n = 0;
      await mapLimit(rows, 16, async (r) => {
        const row = await snapshots.get(r.source, r.entity);
        if (row && JSON.parse(row.body) !== undefined) n++;
      });
      if (n !== rows.length) throw new Error(`read ${n} of ${rows.length} snapshots`);
    };
    // Warm both up (JIT, page cache).
    await read();
    await a.timekeeper.tick({ force: true });
    const before = apiRequests(a);
    const bare: number[] = [];
    const pass: number[] = [];
    const ratios: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t = async (fn: () => Promise<unknown>): Promise<number> => {
        const s = performance.now();
        await fn();
        return performance.now() - s;
      };
      let b: number;
      let p: number;
      if (i % 2 === 0) {
        b = await t(read);
        p = await t(() => a.timekeeper.tick({ force: true }));
      } else {
        p = await t(() => a.timekeeper.tick({ force: true }));
        b = await t(read);
      }
      bare.push(b);
      pass.push(p);
      ratios.push(p / b);
    }
    const requests = apiRequests(a) - before;
    const passMs = median(pass);
    const perEntityUs = (passMs * 1000) / rows.length;
    return {
      sites,
      entities: rows.length,
      rounds,
      bareMs: median(bare),
      passMs,
      ratio: median(ratios),
      passPerEntityUs: perEntityUs,
      apiRequests: requests,
      // 10,000 sites × 2 sources, each clock rule at its floor of once a minute.
      coreShareAt10kPerMinute: (perEntityUs * 20_000) / 60_000_000,
    };
  } finally {
    await app?.stop();
    await sim.close();
    tmp.cleanup();
  }
}
