// Temporary profiling script (not committed).
import { createApp } from '../src/main.js';
import { SOURCES, sitesSource } from '../src/sources/registry.js';
import { nullStream, pool, startSimChild, tempDir } from './common.js';
import { benchConfig } from './config.js';
const PER_SITE = SOURCES.filter((s) => ['health', 'usage', 'backups'].includes(s.name));
const sim = await startSimChild({ sites: 500 });
const tmp = tempDir();
for (let round = 0; round < 3; round++) {
  const app = await createApp(benchConfig({ url: sim.url, dbPath: `${tmp.dir}/p${round}.db`, concurrency: 4, webhookUrl: 'http://127.0.0.1:9/x' }), { logDestination: nullStream() });
  if (process.env['SYNC']) (app.store as any).sqlite.pragma(`synchronous = ${process.env['SYNC']}`);
  await app.poller.poll(sitesSource, null);
  const sites = app.poller.sites();
  const b0 = performance.now(); const bc = process.cpuUsage();
  await Promise.all(PER_SITE.map((def) => pool(sites, 4, async (site) => { const path = `/sites/${site.id}/${def.name === 'backups' ? 'backups' : def.name}`; await (def.paged ? app.client.list((await import('../src/sources/registry.js')).pathOf(def, site.id), def.query, def.pageSize) : app.client.get((await import('../src/sources/registry.js')).pathOf(def, site.id), def.query)); void path; })));
  const bcpu = process.cpuUsage(bc);
  console.log(`bare pass ${Math.round(performance.now() - b0)} ms, cpu ${Math.round((bcpu.user + bcpu.system) / 1000)} ms`);
  const s0 = { ...app.store.stats };
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const W = Number(process.env['WORKERS'] ?? 4);
  await Promise.all(PER_SITE.map((def) => pool(sites, W, async (site) => { await app.poller.poll(def, site); })));
  const cpu = process.cpuUsage(c0);
  console.log(`baseline pass ${Math.round(performance.now() - t0)} ms, cpu ${Math.round((cpu.user + cpu.system) / 1000)} ms, batches ${app.store.stats.batches - s0.batches}, units ${app.store.stats.units - s0.units}, largest ${app.store.stats.largestBatch}`);
  await app.stop();
}
await sim.close();
tmp.cleanup();
