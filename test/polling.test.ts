/**
 * Polling that respects the API: GET only, conditional requests, detail endpoints only
 * when their list moved, adaptive jobs polling, sites picked up without a restart, cron
 * runs never missed or repeated, "not applicable" is not a failure, and a failed fetch of
 * any source emits nothing.
 */
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Scheduler, type CycleSummary } from '../src/scheduler/scheduler.js';
import { SOURCES } from '../src/sources/registry.js';
import { enabledSources } from '../src/sources/select.js';
import { Control } from './catalog-world.js';
import { names, startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const FILES = { sources: { files: { paths: ['.htaccess', 'missing.php'] } } };

function snapshotVersions(w: World): Record<string, number> {
  const d = new BetterSqlite3(w.dbPath, { readonly: true });
  try {
    const rows = d.prepare('SELECT source, entity, version FROM snapshots').all() as { source: string; entity: string; version: number }[];
    return Object.fromEntries(rows.map((r) => [`${r.source} ${r.entity}`, r.version]));
  } finally {
    d.close();
  }
}

/** The count of API replies with an HTTP status, from the app's own metrics. */
async function repliesWithStatus(app: { metrics: { text(): Promise<string> } }, status: number): Promise<number> {
  const text = await app.metrics.text();
  const m = new RegExp(`^hostwatch_api_requests_total\\{status="${status}",error="none"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

describe('a full cycle', () => {
  it('makes only GET requests, and none to an endpoint that changes state or spends credits', async () => {
    world = await startWorld({ config: FILES });
    const c = new Control(world.sim);
    await c.cdnCms(1);
    const app = await world.app();
    world.sim.clearRequests();
    await app.runOnce();
    await c.act('cron', 'run', {}).catch(() => undefined);
    await app.runOnce();
    const requests = world.sim.requests;
    expect(requests.length).toBeGreaterThan(50);
    expect([...new Set(requests.map((r) => r.method))]).toEqual(['GET']);
    for (const r of requests) {
      expect(r.path).not.toMatch(/keyword-research$|domain-overview|\/check$|download|integrity-check|refresh|try-again|\/order$|\/rotate$|\/test$|recheck|repair|purge/);
    }
    // Every enabled source with an endpoint of its own was read at least once.
    const paths = requests.map((r) => r.path);
    for (const { def } of enabledSources(app.config)) {
      if (def.from !== undefined || def.per === 'record') continue;
      const pattern = new RegExp(`^/api/v1${def.path.replace('{site_id}', '\\d+')}$`);
      expect(paths.some((p) => pattern.test(p)), def.name).toBe(true);
    }
  });
});

describe('the file watch', () => {
  it('reads the paths of every site plus each site\'s own, one files/stat each', async () => {
    world = await startWorld({ config: { sources: { files: { paths: ['.htaccess'], site_paths: { 2: ['wp-config.php'] } } } } });
    await new Control(world.sim).still();
    const app = await world.app();
    world.sim.clearRequests();
    await app.runOnce();
    const stats = world.sim.requests.filter((r) => r.path.endsWith('/files/stat')).map((r) => `${r.path.split('/')[4]} ${r.query['path']}`);
    expect(stats.sort()).toEqual(['1 .htaccess', '2 .htaccess', '2 wp-config.php', '3 .htaccess']);
  });
});

describe('conditional requests', () => {
  it('send back the ETag, and a 304 is "unchanged": nothing written, no event', async () => {
    world = await startWorld();
    await new Control(world.sim).still();
    const app = await world.app();
    await app.runOnce();
    const versions = snapshotVersions(world);
    expect(await repliesWithStatus(app, 304)).toBe(0);
    // The first poll of this process is unconditional (validators are kept in memory).
    expect(world.sim.requests.filter((r) => r.conditional)).toEqual([]);
    world.sim.clearRequests();
    await app.runOnce();
    const conditional = world.sim.requests.filter((r) => r.conditional);
    expect(conditional.length).toBeGreaterThan(20);
    expect(conditional.filter((r) => r.status === 304).length).toBe(conditional.length);
    const notModified = await repliesWithStatus(app, 304);
    // Most resources did not move between the two polls: they came back 304.
    expect(notModified).toBeGreaterThan(20);
    expect(snapshotVersions(world)).toEqual(versions);
    expect(world.events.filter((e) => !e.data.name.startsWith('source.'))).toEqual([]);
  });

  it('know an unchanged reply from a server without ETags by its bytes: not parsed, nothing written; a change still comes through', async () => {
    world = await startWorld({ sim: { etags: false } });
    await new Control(world.sim).still();
    const app = await world.app();
    await app.runOnce();
    const versions = snapshotVersions(world);
    world.sim.clearRequests();
    const parse = vi.spyOn(JSON, 'parse');
    let replies: number;
    try {
      await app.runOnce();
      replies = parse.mock.calls.filter(([text]) => typeof text === 'string' && text.startsWith('{"data"')).length;
    } finally {
      parse.mockRestore();
    }
    // Asked in full (nothing to be conditional on), answered 200, and none of it parsed.
    expect(world.sim.requests.length).toBeGreaterThan(20);
    expect(world.sim.requests.filter((r) => r.conditional || r.status !== 200)).toEqual([]);
    expect(replies).toBe(0);
    expect(snapshotVersions(world)).toEqual(versions);
    expect(world.events.filter((e) => !e.data.name.startsWith('source.'))).toEqual([]);
    // A reply whose bytes moved is read as a change.
    world.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    expect(names(world.events).filter((n) => n.startsWith('site.'))).toEqual(['site.offline:firing']);
  });
});

describe('detail endpoints', () => {
  it('are read once as a catch-up, then only when their list record moved', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app();
    const runsPath = /^\/api\/v1\/sites\/\d+\/cron-jobs\/(\d+)\/runs$/;
    await app.runOnce();
    const firstRuns = world.sim.requests.filter((r) => runsPath.test(r.path)).length;
    const { jobs } = await c.state<{ jobs: { id: number; site_id: number }[] }>('cron');
    const watched = jobs.filter((j) => j.site_id <= 3);
    expect(firstRuns).toBe(watched.length);
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => runsPath.test(r.path))).toEqual([]);
    const job = watched[0]!;
    await c.act('cron', 'run', { job_id: job.id, status: 'ok' });
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => runsPath.test(r.path)).map((r) => r.path)).toEqual([`/api/v1/sites/${job.site_id}/cron-jobs/${job.id}/runs`]);
  });
});

describe('cron runs', () => {
  it('are each reported once when new runs push older ones out of the kept 20 between polls', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const { jobs } = await c.state<{ jobs: { id: number; site_id: number; enabled: boolean }[] }>('cron');
    const job = jobs.find((j) => j.site_id <= 3 && j.enabled)!;
    await c.act('cron', 'run', { job_id: job.id, status: 'ok', count: 20 });
    const app = await world.app();
    await app.runOnce();
    const base = world.events.length;
    const made = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: job.id, status: 'timeout', count: 2 });
    const more = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: job.id, status: 'failed', count: 5 });
    await app.runOnce();
    const got = world.events.slice(base);
    expect(names(got)).toEqual(Array(7).fill('cron.run_failed'));
    const ids = [...made.runs, ...more.runs].map((r) => `sites/${job.site_id}/cron_jobs/${job.id}/runs/${r.id}`);
    expect(got.map((e) => e.subject).sort()).toEqual(ids.sort());
    // Seven older runs rolled out of the kept 20: no event for them, and nothing on the next poll.
    const after = world.events.length;
    await app.runOnce();
    expect(world.events.slice(after)).toEqual([]);
  });

  it('of a job that appeared after the baseline are reported too (its first read is not a baseline)', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app();
    await app.runOnce();
    const base = world.events.length;
    const res = await fetch(`${world.sim.url}/api/v1/sites/2/cron-jobs`, {
      method: 'POST',
      headers: { authorization: 'Bearer sim-key-0123456789abcdef', 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'url', target: 'https://example.com/tick', schedule_mode: 'hourly', name: 'new job' }),
    });
    expect(res.status).toBe(201);
    const job = ((await res.json()) as { data: { id: number } }).data;
    const r = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: job.id, status: 'error' });
    await app.runOnce();
    expect(world.events.slice(base).map((e) => `${e.data.name} ${e.subject}`)).toEqual([`cron.run_failed sites/2/cron_jobs/${job.id}/runs/${r.runs[0]!.id}`]);
  });
});

describe('a site not on the CDN', () => {
  it('is "not applicable" for security: no failure, no snapshot, no event, never degraded', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    for (const site of [1, 2, 3]) await c.offCdn(site);
    const app = await world.app();
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i++) {
      const cycles = await app.scheduler.runAll();
      for (const s of cycles.filter((x) => x.source === 'security')) outcomes.push(...s.outcomes.map((o) => o.status));
    }
    expect(new Set(outcomes)).toEqual(new Set(['not_applicable']));
    expect(Object.keys(snapshotVersions(world)).filter((k) => k.startsWith('security'))).toEqual([]);
    expect(world.events.filter((e) => e.subject === 'sources/security' || e.subject.includes('/security'))).toEqual([]);
  });
});

describe('the site list', () => {
  it('picks up sites that appear or disappear without a restart', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app();
    await app.runOnce();
    const added = (await c.call('POST', '/sites', { domain: 'fresh.example.org' })) as { id: number };
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.some((r) => r.path === `/api/v1/sites/${added.id}/dns`)).toBe(true);
    await c.call('DELETE', '/sites/2');
    world.sim.clearRequests();
    await app.runOnce();
    await app.runOnce();
    expect(world.sim.requests.some((r) => r.path.startsWith('/api/v1/sites/2/'))).toBe(false);
    expect(names(world.events).filter((n) => n.startsWith('site.'))).toEqual(['site.added', 'site.removed']);
  });
});

describe('a list of sites in config', () => {
  it('polls a listed site as soon as it appears in the site list, without a restart, and no other site', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app({ sites: [2, 4] });
    await app.runOnce();
    expect(world.sim.requests.some((r) => r.path.startsWith('/api/v1/sites/4/'))).toBe(false);
    expect(world.sim.requests.some((r) => r.path.startsWith('/api/v1/sites/1/'))).toBe(false);
    const added = (await c.call('POST', '/sites', {})) as { id: number };
    expect(added.id).toBe(4);
    world.sim.clearRequests();
    await app.runOnce();
    const perSite = new Set(world.sim.requests.map((r) => /^\/api\/v1\/sites\/(\d+)\//.exec(r.path)?.[1]).filter(Boolean));
    expect([...perSite].sort()).toEqual(['2', '4']);
  });
});

describe('adaptive jobs polling', () => {
  async function nextJobsPoll(running: boolean): Promise<number> {
    world = await startWorld();
    if (running) await new Control(world.sim).call('POST', '/jobs', { type: 'backup', state: 'running', site_id: 1 });
    const app = await world.app();
    const scheduler = new Scheduler({
      poller: app.poller,
      sources: enabledSources(app.config).filter((s) => ['sites', 'jobs'].includes(s.def.name)),
      followups: app.followups,
      sites: 'all',
      concurrency: 2,
      now: Date.now,
      log: app.log,
    });
    const done = new Promise<CycleSummary>((resolve) => scheduler.on('cycle:end', (s) => s.source === 'jobs' && resolve(s)));
    scheduler.start();
    await done;
    const next = scheduler.nextRunOf('jobs')! - Date.now();
    await scheduler.stop();
    return next;
  }

  it('polls /jobs again within 15 s while a job is running', async () => {
    expect(await nextJobsPoll(true)).toBeLessThanOrEqual(15_000);
  });

  it('polls /jobs slowly (every 5 minutes) when nothing is running', async () => {
    expect(await nextJobsPoll(false)).toBeGreaterThan(4 * 60_000);
  });
});

describe('a failed fetch in any source', () => {
  it('emits nothing and keeps the previous snapshot, source by source (details included)', async () => {
    world = await startWorld({ config: FILES });
    const c = new Control(world.sim);
    await c.still();
    await c.cdnCms(1);
    // A clock that can jump ahead, so every detail endpoint is due (its slow schedule).
    let skew = 0;
    const app = await world.app({}, { now: () => Date.now() + skew });
    await app.runOnce();
    await app.runOnce(); // from here nothing moves
    const versions = snapshotVersions(world);
    const base = world.events.length;
    const own = SOURCES.filter((s) => s.from === undefined && s.path !== '');
    expect(own.length).toBeGreaterThan(35);
    for (const s of own) {
      const pattern = `^${s.path.replace('{site_id}', '\\d+').replace('{id}', '[^/]+')}$`;
      const id = world.sim.faults.add({ path: pattern, kind: 'status', status: 500 });
      const detail = s.parent !== undefined;
      if (detail) skew += 3 * 86_400_000;
      const cycles = await app.scheduler.runAll();
      world.sim.faults.remove(id);
      const failed = cycles.filter((x) => x.source === s.name).flatMap((x) => x.outcomes).filter((o) => o.status === 'failed');
      if (enabledSources(app.config).some((e) => e.def.name === s.name) && s.name !== 'files') {
        // Sources with records to detail must have been tried (and failed) in this cycle.
        if (!detail || failed.length > 0) expect(failed.length, s.name).toBeGreaterThan(0);
      }
      expect(world.events.slice(base).filter((e) => !e.data.name.startsWith('source.')), s.name).toEqual([]);
    }
    expect(snapshotVersions(world)).toEqual(versions);
  });
});
