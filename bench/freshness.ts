/**
 * Freshness at agency scale (PRODUCT.md): 1,000 simulated sites, every default source on,
 * `api.max_requests_per_second: 5`; sites go offline at random moments, and `site.offline`
 * must reach the webhook with p99 ≤ the health interval + 30 s. The same run with every
 * source at equal priority is the baseline.
 *
 * Time runs k times faster (docs/benchmarks.md): every interval (sources, details) and the
 * scheduler's heartbeat ÷k, the request budget ×k, so what the budget allows over what the
 * sources need is the real ratio. Latencies and intervals are reported multiplied back by k.
 * The simulator runs in its own process; the daemon (createApp, started as `hostwatch run`
 * starts it) and a webhook receiver run here.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { stringify } from 'yaml';
import { parseConfig } from '../src/config/parse.js';
import { formatDuration } from '../src/config/duration.js';
import { createApp, type App } from '../src/main.js';
import { CONFIG_SOURCES } from '../src/sources/registry.js';
import type { BudgetPlan } from '../src/scheduler/budget-plan.js';
import { mulberry32 } from '../src/simulator/random.js';
import { isTopLevel, sitesSource, SOURCES } from '../src/sources/registry.js';
import { BENCH_KEY, BENCH_SECRET, median, nullStream, percentile, round, startSimChild, tempDir } from './common.js';

export interface FreshnessOptions {
  sites?: number;
  /** How much faster than real time the run goes. */
  k?: number;
  /** Length of the measured part of each run, in real minutes (after health's catch-up). */
  minutes?: number;
  /** Offline events per real second. */
  offlinePerSecond?: number;
  log?: (line: string) => void;
}

export interface SourceFreshness {
  source: string;
  priority: string;
  configuredS: number;
  plannedS: number;
  /** Median and 90th percentile of the gap between two polls of one entity, unscaled seconds. */
  gapMedianS: number | null;
  gapP90S: number | null;
  polls: number;
}

export interface FreshnessRun {
  mode: 'priorities' | 'equal priority';
  sites: number;
  k: number;
  healthIntervalS: number;
  /** Until every site's health was read once after the start, unscaled seconds. */
  healthCatchUpS: number;
  /** Offline (set in the simulator) → `site.offline` at the webhook, unscaled seconds. */
  offline: { n: number; missed: number; p50: number; p90: number; p99: number; max: number };
  plan: { neededPerHour: number; allowedPerHour: number; plannedPerHour: number };
  sources: SourceFreshness[];
  requestsPerSecondReal: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Both runs: with the priorities the rules give, then every source at equal priority. */
export async function benchFreshness(opts: FreshnessOptions = {}): Promise<FreshnessRun[]> {
  const out: FreshnessRun[] = [];
  for (const mode of ['priorities', 'equal priority'] as const) {
    const r = await runOnce(mode, opts);
    opts.log?.(`freshness (${mode}): site.offline p50 ${r.offline.p50} s, p99 ${r.offline.p99} s over ${r.offline.n} events (${r.offline.missed} missed)`);
    out.push(r);
  }
  return out;
}

async function runOnce(mode: FreshnessRun['mode'], opts: FreshnessOptions): Promise<FreshnessRun> {
  const sites = opts.sites ?? 1_000;
  const k = opts.k ?? 30;
  const minutes = opts.minutes ?? 8;
  const perSecond = opts.offlinePerSecond ?? 1;
  const log = opts.log ?? (() => {});
  const sim = await startSimChild({ sites });
  const tmp = tempDir();
  // The receiver: when each site's site.offline arrived, and whether it has resolved since
  // (a site is taken offline again only once the daemon saw it back, or nothing would fire).
  const arrived = new Map<number, number>();
  const firing = new Set<number>();
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const e = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { name?: string; status?: string; site_id?: number } };
        const site = e.data?.site_id;
        if (e.data?.name === 'site.offline' && typeof site === 'number') {
          if (e.data.status === 'firing') {
            arrived.set(site, Date.now());
            firing.add(site);
          } else {
            firing.delete(site);
          }
        }
      } catch {
        // Not an event: ignore.
      }
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  let app: App | null = null;
  try {
    await sim.control('POST', '/drift', { enabled: false });
    // Every interval ÷k (details' slow schedules too), the budget ×k; equal priority: all normal.
    const sources: Record<string, Record<string, unknown>> = {};
    for (const def of SOURCES) {
      if (def.from !== undefined || def.defaultEnabled === false) continue;
      const o: Record<string, unknown> = { every: formatDuration(Math.max(10_000, Math.round(def.defaultEveryMs / k))) };
      // The site list is always critical (its priority cannot be set); it costs a few requests an hour.
      if (mode === 'equal priority' && isTopLevel(def) && def.name !== sitesSource.name) o['priority'] = 'normal';
      sources[def.name] = o;
    }
    const written = {
      name: 'freshness',
      api: { base_url: '${SIM_URL}', key: '${API_KEY}', max_requests_per_second: 5 * k },
      storage: { path: '${DB}' },
      sources,
      channels: [{ name: 'hooks', type: 'webhook', url: '${HOOK_URL}', secret: '${HOOK_SECRET}' }],
      log: { level: 'warn' },
    };
    const env = { SIM_URL: sim.url, API_KEY: BENCH_KEY, DB: `${tmp.dir}/freshness.db`, HOOK_URL: hook, HOOK_SECRET: BENCH_SECRET };
    const parsed = parseConfig(stringify(written), 'freshness.yaml', env, CONFIG_SOURCES);
    if (!parsed.ok) throw new Error(`freshness config invalid: ${parsed.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
    const config = parsed.config;
    const healthEvery = config.sources['health']!.every_ms!;
    // Every poll of every entity, by source: when (for the gaps between two polls of one entity).
    const polls = new Map<string, Map<string, number[]>>();
    let requests = 0;
    const heartbeatMs = Math.max(10, Math.round(1000 / k));
    const a = await createApp(config, {
      logDestination: nullStream(),
      onPoll: (source, o) => {
        let bySource = polls.get(source);
        if (!bySource) polls.set(source, (bySource = new Map()));
        const times = bySource.get(o.entity) ?? [];
        times.push(Date.now());
        bySource.set(o.entity, times);
      },
      ticker: (tick) => {
        const t = setInterval(tick, heartbeatMs);
        return { stop: async () => clearInterval(t) };
      },
    });
    app = a;
    const started = Date.now();
    let plan: BudgetPlan | null = null;
    app.scheduler.on('budget:plan', (p) => (plan = p));
    const before = await requestCount(app);
    await app.start();
    // Health's catch-up: every site's health read once.
    for (;;) {
      const h = app.scheduler.progress().find((p) => p.name === 'health');
      if (h?.caughtUp && (polls.get('health')?.size ?? 0) >= sites) break;
      await sleep(100);
    }
    const catchUp = Date.now() - started;
    log(`freshness (${mode}): health caught up after ${round((catchUp * k) / 1000, 0)} s (unscaled); measuring for ${minutes} min real (${round((minutes * k) / 60, 1)} h unscaled)`);
    // Offline at random moments: a site not already offline, back online once reported.
    const random = mulberry32(11); // both runs see the same sites go offline at the same moments
    const offlineAt = new Map<number, number>();
    const latencies: number[] = [];
    const end = Date.now() + minutes * 60_000;
    while (Date.now() < end) {
      await sleep(-Math.log(1 - random()) * (1000 / perSecond));
      for (const [site, at] of [...offlineAt]) {
        const got = arrived.get(site);
        if (got === undefined || got < at) continue;
        latencies.push((got - at) * k);
        offlineAt.delete(site);
        await sim.control('POST', `/sites/${site}/health`, { status: 'online' });
      }
      const site = 1 + Math.floor(random() * sites);
      if (offlineAt.has(site) || firing.has(site)) continue;
      // The clock starts before the site goes offline: a poll may see it before the call returns.
      offlineAt.set(site, Date.now());
      await sim.control('POST', `/sites/${site}/health`, { status: 'offline' });
    }
    // Give the last ones two health intervals to arrive; still missing then counts as missed.
    const grace = Date.now() + 2 * healthEvery;
    while (offlineAt.size > 0 && Date.now() < grace) {
      for (const [site, at] of [...offlineAt]) {
        const got = arrived.get(site);
        if (got !== undefined && got >= at) {
          latencies.push((got - at) * k);
          offlineAt.delete(site);
        }
      }
      await sleep(50);
    }
    const after = await requestCount(app);
    requests = after - before;
    const elapsedS = (Date.now() - started) / 1000;
    const progress = new Map(app.scheduler.progress().map((p) => [p.name, p]));
    await app.stop();
    app = null;
    const lastPlan = plan as BudgetPlan | null;
    const planned = new Map((lastPlan?.sources ?? []).map((s) => [s.name, s]));
    const sourceRows: SourceFreshness[] = [];
    for (const [source, p] of progress) {
      const gaps: number[] = [];
      let n = 0;
      for (const times of polls.get(source)?.values() ?? []) {
        n += times.length;
        for (let i = 1; i < times.length; i++) gaps.push(((times[i]! - times[i - 1]!) * k) / 1000);
      }
      const ps = planned.get(source);
      sourceRows.push({
        source,
        priority: p.priority,
        configuredS: ((ps?.everyMs ?? 0) * k) / 1000,
        plannedS: (p.effectiveEveryMs * k) / 1000,
        gapMedianS: gaps.length ? round(median(gaps), 0) : null,
        gapP90S: gaps.length ? round(percentile(gaps, 90), 0) : null,
        polls: n,
      });
    }
    const s = (xs: number[], p: number): number => (xs.length ? round(percentile(xs, p) / 1000, 1) : NaN);
    return {
      mode,
      sites,
      k,
      healthIntervalS: (healthEvery * k) / 1000,
      healthCatchUpS: round((catchUp * k) / 1000, 0),
      offline: { n: latencies.length, missed: offlineAt.size, p50: s(latencies, 50), p90: s(latencies, 90), p99: s(latencies, 99), max: latencies.length ? round(Math.max(...latencies) / 1000, 1) : NaN },
      plan: {
        neededPerHour: Math.round((lastPlan?.neededPerHour ?? 0) / k),
        allowedPerHour: Math.round((lastPlan?.allowedPerHour ?? 0) / k),
        plannedPerHour: Math.round((lastPlan?.plannedPerHour ?? 0) / k),
      },
      sources: sourceRows.sort((a, b) => a.source.localeCompare(b.source)),
      requestsPerSecondReal: round(requests / elapsedS, 1),
    };
  } finally {
    await app?.stop();
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await sim.close();
    tmp.cleanup();
  }
}

/** API requests sent so far, from the app's own metrics. */
async function requestCount(app: { metrics: { text(): Promise<string> } }): Promise<number> {
  const text = await app.metrics.text();
  let n = 0;
  for (const m of text.matchAll(/^hostwatch_api_requests_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return n;
}
