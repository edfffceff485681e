/**
 * Pipeline overhead per poll (PRODUCT.md: at most 25% above a bare fetch + JSON.parse of the
 * same responses, in the same run).
 *
 * The simulator runs in a child process. For each case the same per-site polls are made two
 * ways through the SAME ApiClient (same undici Agent, same concurrency, rate limit lifted):
 *   bare: ApiClient.get/list — HTTP + JSON.parse (+ paging), the result dropped;
 *   poll: Poller.poll — the same fetch, then shape check, hash, diff, rules, store, commit.
 * Each round runs bare and poll back to back, in an order that flips every round; the ratio
 * is the median of the per-round poll/bare ratios (process CPU time is compared the same way).
 * Cases: unchanged (steady state), ~10% of sites changed per source, and the first
 * (baseline) poll into an empty database.
 *
 * The CPU-only part takes the network out: the same response bodies, read once, are timed
 * through JSON.parse alone and through Poller.ingest (hash → plan → commit) on parsed values.
 */
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import { replyScrubber } from '../src/api/scrub.js';
import { secretsOf } from '../src/log.js';
import { createApp, type App } from '../src/main.js';
import { pollWorkers } from '../src/scheduler/scheduler.js';
import { entityOf, pathOf, SOURCES, sitesSource } from '../src/sources/registry.js';
import type { EntityRef, SiteInfo, SourceDef } from '../src/sources/types.js';
import { BENCH_KEY, median, nullStream, pool, round, startSimChild, tempDir, type SimChild } from './common.js';
import { benchConfig } from './config.js';

export interface PipelineCase {
  case: 'unchanged' | 'unchanged, no ETag' | 'changed-10%' | 'baseline' | 'baseline, all online';
  rounds: number;
  /** Milliseconds of one pass over every per-site entity, each round. */
  bareMs: number[];
  pollMs: number[];
  bareMedianMs: number;
  pollMedianMs: number;
  /**
   * Median over rounds of poll/bare, each round's two runs back to back (so a slow spell on
   * a shared machine hits both); the target is ≤ 1.25.
   */
  ratio: number;
  /** median(poll) / median(bare), for comparison. */
  ratioOfMedians: number;
  /** Extra wall time per entity the pipeline adds (µs). */
  overheadPerEntityUs: number;
  /** Process CPU time (user + system, all threads) per pass, medians, and their ratio. */
  bareCpuMs: number;
  pollCpuMs: number;
  cpuRatio: number;
  /** Polls that wrote, per transaction, over the poll passes (group commit). */
  unitsPerCommit: number;
  /** Transactions per poll pass (median). */
  commitsPerPass: number;
}

export interface CpuCase {
  case: 'unchanged' | 'changed-10%' | 'baseline';
  rounds: number;
  /** Units (polls that wrote) per transaction, over every round of the case (group commit). */
  unitsPerCommit: number;
  /** Transactions per pass (median). */
  commitsPerPass: number;
  parseMedianMs: number;
  ingestMedianMs: number;
  /** ingest / JSON.parse of the same bodies. */
  ingestVsParse: number;
  /** (parse + ingest) / parse: the CPU-only version of the end-to-end ratio. */
  ratio: number;
  ingestPerEntityUs: number;
  /**
   * Process CPU time (user + system, all threads) of an ingest pass, median. The wall time
   * above includes the group commit's gather waits (a changed poll's commit may wait up to
   * 60 ms for others), so this is the figure that shows the pipeline's own work.
   */
  ingestCpuMs: number;
}

export interface PipelineResult {
  sites: number;
  entitiesPerPass: number;
  sources: string[];
  concurrency: number;
  bodyBytes: number;
  cases: PipelineCase[];
  cpu: CpuCase[];
  scrub: ScrubCost;
}

/**
 * What scrubbing the configured secrets out of every reply costs (src/api/scrub.ts), next to
 * JSON.parse of the same bodies: as served (no escape sequences: one scan of the text), and
 * with every "/" written "\/" (valid JSON, the same values, as PHP's json_encode writes it),
 * which makes the scrubber look at every decoded string.
 */
export interface ScrubCost {
  secrets: number;
  rounds: number;
  parseMedianMs: number;
  plainMedianMs: number;
  escapedMedianMs: number;
  plainVsParse: number;
  escapedVsParse: number;
}

// The per-site sources of the foundation, which changeTenPercent() moves: the same three in
// every run, so the ratios of docs/benchmarks.md compare across versions. (The full-cycle
// memory benchmark polls every source.)
const PER_SITE = SOURCES.filter((s) => ['health', 'usage', 'backups'].includes(s.name));

export interface PipelineOptions {
  sites?: number;
  concurrency?: number;
  rounds?: { unchanged: number; changed: number; baseline: number };
  log?: (line: string) => void;
  /** Called on every app right after createApp (what-if experiments by hand; npm run bench passes nothing). */
  afterCreate?: (app: App) => void;
}

export async function benchPipeline(opts: PipelineOptions = {}): Promise<PipelineResult> {
  const sites = opts.sites ?? 500;
  const concurrency = opts.concurrency ?? 4;
  const rounds = opts.rounds ?? { unchanged: 7, changed: 7, baseline: 3 };
  const log = opts.log ?? (() => {});
  const sim = await startSimChild({ sites });
  // The same world from a server without validators (no ETag, no 304; A10).
  let plainSim: SimChild | null = null;
  const tmp = tempDir();
  const apps: App[] = [];
  let dbCount = 0;
  const newApp = async (on: SimChild = sim): Promise<App> => {
    const config = benchConfig({
      url: on.url,
      dbPath: `${tmp.dir}/pipeline-${++dbCount}.db`,
      concurrency,
      // Outbox rows are written as in production; the worker is not started, so nothing is sent.
      webhookUrl: 'http://127.0.0.1:9/never-called',
    });
    const app = await createApp(config, { logDestination: nullStream() });
    opts.afterCreate?.(app);
    apps.push(app);
    const o = await app.poller.poll(sitesSource, null);
    if (o.status === 'failed') throw new Error(`site list poll failed: ${o.error?.message}`);
    return app;
  };
  try {
    const cases: PipelineCase[] = [];
    const app = await newApp();
    const siteList = app.poller.sites();
    if (siteList.length !== sites) throw new Error(`expected ${sites} sites, the directory has ${siteList.length}`);
    const entities = siteList.length * PER_SITE.length;

    // First poll of this app = its baseline; then warm both paths up (JIT, connections).
    await pass(app, siteList, concurrency, 'poll');
    await pass(app, siteList, concurrency, 'bare');
    await pass(app, siteList, concurrency, 'poll');

    log(`pipeline: unchanged × ${rounds.unchanged}`);
    cases.push(await measureCase('unchanged', rounds.unchanged, entities, async () => app, siteList, concurrency));

    // Unchanged again, from a server that sends no ETag: every reply comes in full, and the
    // poller knows it unchanged by a digest of its bytes (ApiClient.getIfChanged).
    log(`pipeline: unchanged, a server without ETags × ${rounds.unchanged}`);
    plainSim = await startSimChild({ sites, etags: false });
    const plainApp = await newApp(plainSim);
    await pass(plainApp, siteList, concurrency, 'poll');
    await pass(plainApp, siteList, concurrency, 'bare');
    await pass(plainApp, siteList, concurrency, 'poll');
    cases.push(await measureCase('unchanged, no ETag', rounds.unchanged, entities, async () => plainApp, siteList, concurrency));
    // Its simulator is not needed any more: the cases after it have the machine as before.
    await plainApp.stop();
    await plainSim.close();
    plainSim = null;

    log(`pipeline: ~10% changed × ${rounds.changed}`);
    let round = 0;
    cases.push(
      await measureCase('changed-10%', rounds.changed, entities, async () => {
        await changeTenPercent(sim, siteList, round++);
        return app;
      }, siteList, concurrency, (outcomes) => {
        const changed = outcomes.filter((s) => s === 'changed').length;
        // Every 10th site of every per-site source changed since the previous pass.
        const expected = Math.floor(siteList.length / 10) * PER_SITE.length;
        if (Math.abs(changed - expected) > PER_SITE.length) throw new Error(`changed polls: ${changed}, expected about ${expected}`);
      }),
    );

    // The changed rounds left 70% of the sites offline: this first poll fires ~350 alerts.
    log(`pipeline: baseline (first poll, empty database) × ${rounds.baseline}`);
    cases.push(await measureCase('baseline', rounds.baseline, entities, newApp, siteList, concurrency));
    const bodies = await readBodies(sim.url, siteList);

    // The same first poll of an account whose sites are all up (no alert fires): what storing
    // every entity costs, apart from what the alerts' events cost. Measured, with no target.
    log(`pipeline: baseline with every site online × ${rounds.baseline}`);
    await pool(siteList, 8, (s) => sim.control('POST', `/sites/${s.id}/health`, { status: 'online' }));
    cases.push(await measureCase('baseline, all online', rounds.baseline, entities, newApp, siteList, concurrency));

    // The bodies were read before the sites came back, as the CPU-only part always read them.
    log('pipeline: CPU only (JSON.parse vs Poller.ingest)');
    const cpu = await cpuOnly(bodies, newApp, rounds, concurrency);
    log('pipeline: scrubbing secrets from replies vs JSON.parse');
    const scrub = scrubCost(bodies, secretsOf(app.config), rounds.unchanged);

    return {
      sites,
      entitiesPerPass: entities,
      sources: PER_SITE.map((s) => s.name),
      concurrency,
      bodyBytes: bodies.reduce((n, b) => n + b.texts.reduce((m, t) => m + Buffer.byteLength(t), 0), 0),
      cases,
      cpu,
      scrub,
    };
  } finally {
    await Promise.allSettled(apps.map((a) => a.stop()));
    await sim.close();
    await plainSim?.close();
    tmp.cleanup();
  }
}

type Mode = 'bare' | 'poll';

/**
 * One pass over every per-site entity, shaped like Scheduler.runAll(): the per-site sources
 * in parallel, each a bounded pool of pollWorkers(concurrency) workers (bare and poll alike);
 * the ApiClient's semaphore caps requests in flight at `concurrency` overall. Returns the
 * outcome statuses (poll mode).
 */
async function pass(app: App, sites: readonly SiteInfo[], concurrency: number, mode: Mode): Promise<string[]> {
  const statuses: string[] = [];
  await Promise.all(
    PER_SITE.map((def) =>
      pool(sites, pollWorkers(concurrency), async (site) => {
        if (mode === 'bare') {
          await bareFetch(app, def, site);
        } else {
          const o = await app.poller.poll(def, site);
          if (o.status === 'failed') throw new Error(`poll ${o.entity} failed: ${o.error?.message}`);
          statuses.push(o.status);
        }
      }),
    ),
  );
  return statuses;
}

/** Exactly the client call fetchEntity() makes, without what comes after it. */
function bareFetch(app: App, def: SourceDef, site: SiteInfo): Promise<unknown> {
  const path = pathOf(def, site.id);
  return def.paged ? app.client.list(path, def.query, def.pageSize) : app.client.get(path, def.query);
}

async function measureCase(
  name: PipelineCase['case'],
  rounds: number,
  entities: number,
  before: () => Promise<App>,
  sites: readonly SiteInfo[],
  concurrency: number,
  checkOutcomes?: (statuses: string[]) => void,
): Promise<PipelineCase> {
  const bareMs: number[] = [];
  const pollMs: number[] = [];
  const bareCpu: number[] = [];
  const pollCpu: number[] = [];
  const commits: Commits = { batches: [], units: 0 };
  for (let r = 0; r < rounds; r++) {
    const app = await before();
    const order: Mode[] = r % 2 === 0 ? ['bare', 'poll'] : ['poll', 'bare'];
    for (const mode of order) {
      const stats0 = { ...app.store.stats };
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const statuses = await pass(app, sites, concurrency, mode);
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      (mode === 'bare' ? bareCpu : pollCpu).push((cpu.user + cpu.system) / 1000);
      if (mode === 'bare') bareMs.push(ms);
      else {
        pollMs.push(ms);
        commits.batches.push(app.store.stats.batches - stats0.batches);
        commits.units += app.store.stats.units - stats0.units;
        const expect = name === 'changed-10%' ? null : name.startsWith('baseline') ? 'baseline' : 'unchanged';
        if (expect && statuses.some((s) => s !== expect)) throw new Error(`${name}: a poll came back ${statuses.find((s) => s !== expect)}`);
        checkOutcomes?.(statuses);
      }
    }
    // A baseline round's app is used once: close its database and connections.
    if (name.startsWith('baseline')) await app.stop();
  }
  const bareMedianMs = median(bareMs);
  const pollMedianMs = median(pollMs);
  return {
    case: name,
    rounds,
    bareMs: bareMs.map((x) => round(x, 1)),
    pollMs: pollMs.map((x) => round(x, 1)),
    bareMedianMs: round(bareMedianMs, 1),
    pollMedianMs: round(pollMedianMs, 1),
    ratio: round(median(pollMs.map((p, i) => p / bareMs[i]!)), 3),
    ratioOfMedians: round(pollMedianMs / bareMedianMs, 3),
    overheadPerEntityUs: round(((pollMedianMs - bareMedianMs) * 1000) / entities, 1),
    bareCpuMs: round(median(bareCpu), 1),
    pollCpuMs: round(median(pollCpu), 1),
    cpuRatio: round(median(pollCpu) / median(bareCpu), 3),
    ...commitStats(commits),
  };
}

/** Units per transaction, and transactions per pass, of some passes. */
function commitStats(c: Commits): { unitsPerCommit: number; commitsPerPass: number } {
  const batches = c.batches.reduce((a, b) => a + b, 0);
  return { unitsPerCommit: batches === 0 ? 0 : round(c.units / batches, 1), commitsPerPass: median(c.batches) };
}

/**
 * Change every 10th site (a different tenth each round) in every per-site source: health
 * goes offline (an alert), disk use moves (no alert) and a finished backup appears (a change
 * event) — so the changed polls run diff, rules, events and outbox rows.
 */
async function changeTenPercent(sim: SimChild, sites: readonly SiteInfo[], round: number): Promise<void> {
  const chosen = sites.filter((_, i) => i % 10 === round % 10);
  const online = round % 20 >= 10; // after ten rounds every tenth is offline: bring them back
  await pool(chosen, 8, async (s) => {
    await sim.control('POST', `/sites/${s.id}/health`, { status: online ? 'online' : 'offline' });
    await sim.control('POST', `/sites/${s.id}/usage`, { disk_used_mib: 200 + round });
    await sim.control('POST', `/sites/${s.id}/backups`, { state: 'Ok', type: 'Manual' });
  });
}

// ---- CPU only --------------------------------------------------------------------------

/** One entity's response body, as the client read it. */
export interface Body {
  ref: EntityRef;
  /** Response bodies of every page (one for these sources). */
  texts: string[];
}

/** Read each per-site response body once, as the client would (same paths and limits). */
export async function readBodies(url: string, sites: readonly SiteInfo[]): Promise<Body[]> {
  const out: Body[] = [];
  await pool(
    PER_SITE.flatMap((def) => sites.map((site) => ({ def, site }))),
    8,
    async ({ def, site }) => {
      const q = def.paged ? `?limit=${def.pageSize ?? 200}` : '';
      const res = await request(`${url}/api/v1${pathOf(def, site.id)}${q}`, {
        headers: { authorization: `Bearer ${BENCH_KEY}`, accept: 'application/json' },
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${pathOf(def, site.id)}: HTTP ${res.statusCode}`);
      if (def.paged && (JSON.parse(text) as { has_more?: boolean }).has_more) throw new Error('bench bodies must fit one page');
      out.push({ ref: entityOf(def, site), texts: [text] });
    },
  );
  // A fixed order so every round does the same work.
  return out.sort((a, b) => (a.ref.entity < b.ref.entity ? -1 : 1));
}

/** What ApiClient does with a body: JSON.parse, take `data` (concatenating pages for lists). */
function parseBody(b: Body): unknown {
  if (b.texts.length === 1) return (JSON.parse(b.texts[0]!) as { data: unknown }).data;
  const items: unknown[] = [];
  for (const t of b.texts) for (const item of (JSON.parse(t) as { data: unknown[] }).data) items.push(item);
  return items;
}

/** A 10% variant of parsed values: every 10th site offline / other disk figure / a new backup. */
function mutateTenPercent(bodies: readonly Body[], values: unknown[], salt: number): void {
  bodies.forEach((b, i) => {
    if (b.ref.siteId === null || b.ref.siteId % 10 !== 0) return;
    const v = values[i] as { online?: { status: string; label?: string }; disk?: { used_mib: number } };
    switch (b.ref.source.name) {
      case 'health':
        v.online = { status: 'offline', label: 'Offline' };
        break;
      case 'usage':
        v.disk = { ...v.disk!, used_mib: 300 + salt };
        break;
      case 'backups':
        (values[i] as unknown[]).unshift({
          id: 10_000_000 + salt * 100_000 + b.ref.siteId,
          created_at: new Date().toISOString(),
          type: 'Manual',
          state: 'Ok',
          size_bytes: 1234,
          is_blueprint: false,
          locked: false,
        });
        break;
    }
  });
}

function scrubCost(bodies: readonly Body[], secrets: readonly string[], rounds: number): ScrubCost {
  const scrub = replyScrubber(secrets);
  const plain = bodies.flatMap((b) => b.texts);
  const escaped = plain.map((t) => t.replaceAll('/', '\\/'));
  const time = (texts: readonly string[], withScrub: boolean): number => {
    const t0 = performance.now();
    for (const t of texts) {
      const v = JSON.parse(t) as unknown;
      if (withScrub) scrub(t, v);
    }
    return performance.now() - t0;
  };
  const parse: number[] = [];
  const plainMs: number[] = [];
  const escapedMs: number[] = [];
  for (let r = 0; r < rounds + 2; r++) {
    // The first two rounds warm the JIT up and are not counted.
    const p = time(plain, false);
    const s1 = time(plain, true) - p;
    const s2 = time(escaped, true) - time(escaped, false);
    if (r < 2) continue;
    parse.push(p);
    plainMs.push(Math.max(0, s1));
    escapedMs.push(Math.max(0, s2));
  }
  const pm = median(parse);
  return {
    secrets: new Set(secrets).size,
    rounds,
    parseMedianMs: round(pm, 2),
    plainMedianMs: round(median(plainMs), 2),
    escapedMedianMs: round(median(escapedMs), 2),
    plainVsParse: round(median(plainMs) / pm, 3),
    escapedVsParse: round(median(escapedMs) / pm, 3),
  };
}

/**
 * The CPU-only cases: the same parsed bodies through Poller.ingest, with the network taken
 * out. Exported for the engine comparison (bench/engines.ts), which runs it on each engine.
 */
export async function cpuOnly(
  bodies: readonly Body[],
  newApp: () => Promise<App>,
  rounds: { unchanged: number; changed: number; baseline: number },
  concurrency: number,
): Promise<CpuCase[]> {
  const parseAll = (): { ms: number; values: unknown[] } => {
    const t0 = performance.now();
    const values = bodies.map(parseBody);
    return { ms: performance.now() - t0, values };
  };
  // As many ingests in flight as a scheduler pass has polls (sources × concurrency), so
  // those that finish together share a commit, as they do in the daemon (group commit).
  const inFlight = PER_SITE.length * pollWorkers(concurrency);
  const ingestAll = async (app: App, values: unknown[], expect: string | null, commits?: Commits, cpu?: number[]): Promise<number> => {
    const before = { ...app.store.stats };
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const started = Date.now();
    const statuses: string[] = [];
    await pool(
      bodies.map((b, i) => ({ ref: b.ref, value: values[i] })),
      inFlight,
      async ({ ref, value }) => void statuses.push((await app.poller.ingest(ref, value, started)).status),
    );
    const ms = performance.now() - t0;
    const used = process.cpuUsage(cpu0);
    cpu?.push((used.user + used.system) / 1000);
    if (expect && statuses.some((s) => s !== expect)) throw new Error(`ingest: expected ${expect}, got ${statuses.find((s) => s !== expect)}`);
    commits?.batches.push(app.store.stats.batches - before.batches);
    if (commits) commits.units += app.store.stats.units - before.units;
    return ms;
  };
  const result = (name: CpuCase['case'], parse: number[], ingest: number[], commits: Commits, cpu: number[]): CpuCase => {
    const p = median(parse);
    const g = median(ingest);
    return {
      case: name,
      rounds: ingest.length,
      ...commitStats(commits),
      parseMedianMs: round(p, 2),
      ingestMedianMs: round(g, 2),
      ingestVsParse: round(g / p, 2),
      ratio: round((p + g) / p, 2),
      ingestPerEntityUs: round((g * 1000) / bodies.length, 1),
      ingestCpuMs: round(median(cpu), 1),
    };
  };

  // Warm JSON.parse and ingest up on a throwaway app.
  {
    const warm = await newApp();
    for (let i = 0; i < 3; i++) await ingestAll(warm, parseAll().values, null);
    await warm.stop();
  }

  const base = { parse: [] as number[], ingest: [] as number[], cpu: [] as number[], commits: { batches: [], units: 0 } as Commits };
  const same = { parse: [] as number[], ingest: [] as number[], cpu: [] as number[], commits: { batches: [], units: 0 } as Commits };
  const changed = { parse: [] as number[], ingest: [] as number[], cpu: [] as number[], commits: { batches: [], units: 0 } as Commits };
  let app: App | null = null;
  for (let r = 0; r < rounds.baseline; r++) {
    const fresh = await newApp();
    const p = parseAll();
    base.parse.push(p.ms);
    base.ingest.push(await ingestAll(fresh, p.values, 'baseline', base.commits, base.cpu));
    if (app) await app.stop();
    app = fresh;
  }
  for (let r = 0; r < rounds.unchanged; r++) {
    const p = parseAll();
    same.parse.push(p.ms);
    same.ingest.push(await ingestAll(app!, p.values, 'unchanged', same.commits, same.cpu));
  }
  for (let r = 0; r < rounds.changed * 2; r++) {
    // Odd rounds change 10% away from the stored snapshot, even rounds change it back.
    const p = parseAll();
    if (r % 2 === 0) mutateTenPercent(bodies, p.values, r);
    changed.parse.push(p.ms);
    changed.ingest.push(await ingestAll(app!, p.values, null, changed.commits, changed.cpu));
  }
  await app?.stop();
  return [
    result('unchanged', same.parse, same.ingest, same.commits, same.cpu),
    result('changed-10%', changed.parse, changed.ingest, changed.commits, changed.cpu),
    result('baseline', base.parse, base.ingest, base.commits, base.cpu),
  ];
}

interface Commits {
  /** Transactions per pass. */
  batches: number[];
  units: number;
}
