/**
 * A frugal poller: newest-first lists read from the top to the first known record, cron
 * jobs followed through the account list, and replies bounded by api.max_reply_bytes.
 */
import BetterSqlite3 from 'better-sqlite3';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { ApiClient } from '../src/api/client.js';
import { Fetcher } from '../src/sources/fetch.js';
import { entityOf, sourceByName } from '../src/sources/registry.js';
import { TopRead } from '../src/sources/newest-first.js';
import type { SourceDef } from '../src/sources/types.js';
import { Control } from './catalog-world.js';
import { names, rows, startWorld, type World } from './harness.js';
import { ENGINES } from './pg.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const REPORTS = '/api/v1/client-reports/reports';

describe('a newest-first list', () => {
  // The stop is decided against the stored snapshot, read through the store port: both engines.
  it.each(ENGINES)('of a 2,000-report account is read one page per poll, and the new report is still reported (%s)', async (engine) => {
    world = await startWorld({ engine });
    await new Control(world.sim).still();
    // 2,000 reports are 80 pages of 25: past max_pages (50), where reading every page failed.
    for (let i = 0; i < 2_000; i++) world.sim.world.resources.act('reports', null, 'create', { client_id: 1 });
    const app = await world.app();
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => r.path === REPORTS)).toHaveLength(1);
    await app.runOnce();
    const made = world.sim.world.resources.act('reports', null, 'create', { client_id: 2 }) as { id: number };
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => r.path === REPORTS)).toHaveLength(1);
    const created = world.events.filter((e) => e.data.name === 'report.created');
    expect(created.map((e) => e.subject)).toEqual([`client-reports/reports/${made.id}`]);
    // Nothing else about reports: the record the new one pushed to page 2 is kept, not removed.
    expect(names(world.events).filter((n) => n.startsWith('report.'))).toEqual(['report.created']);
    const state = await world.query<{ consecutive_failures: number }>("SELECT consecutive_failures FROM poll_state WHERE source = 'reports'");
    expect(state.length).toBeGreaterThan(0);
    expect(state.every((r) => r.consecutive_failures === 0)).toBe(true);
  });

  it.each(ENGINES)('with more new reports than a page, reads on to the first known one and reports every new one (%s)', async (engine) => {
    world = await startWorld({ engine });
    await new Control(world.sim).still();
    for (let i = 0; i < 100; i++) world.sim.world.resources.act('reports', null, 'create', { client_id: 1 });
    const app = await world.app();
    await app.runOnce();
    await app.runOnce();
    // 30 new reports: page 1 (25) is all new, so the read goes on to page 2, where it meets known ones.
    const made = Array.from({ length: 30 }, () => (world!.sim.world.resources.act('reports', null, 'create', { client_id: 2 }) as { id: number }).id);
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => r.path === REPORTS)).toHaveLength(2);
    const created = world.events.filter((e) => e.data.name === 'report.created').map((e) => e.subject);
    expect(created.sort()).toEqual(made.map((id) => `client-reports/reports/${id}`).sort());
  });

  it('reads on past the first page while a job it holds is still running, so the job\'s end is seen', async () => {
    world = await startWorld();
    const app = await world.app();
    const running = world.sim.world.addJob({ type: 'backup', state: 'running' });
    await app.runOnce();
    // 250 newer jobs push it to page 2 (200 a page).
    for (let i = 0; i < 250; i++) world.sim.world.addJob({ type: 'backup', state: 'queued' });
    world.sim.world.setJobState(running.id, 'done');
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => r.path === '/api/v1/jobs')).toHaveLength(2);
    expect(world.events.filter((e) => e.data.name === 'job.completed').map((e) => e.subject)).toEqual([`jobs/${running.id}`]);
  });

  it('judges the kinds of the pages it read, not those of the older records it keeps from the stored snapshot', async () => {
    // A server that serves 50 jobs a page whatever the limit asked: the page read holds fewer
    // records than the snapshot keeps (200), so the merge keeps stored ones below it.
    let page1 = [{ id: 300, state: 'done' }, ...Array.from({ length: 49 }, (_, i) => ({ id: 299 - i, state: 'done' }))];
    const server = createServer((req, res) => {
      const body = req.url?.includes('cursor=p2') ? { data: [{ id: 250, state: 'done' }], next_cursor: null, has_more: false } : { data: page1, next_cursor: 'p2', has_more: true };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = new ApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, key: 'k', timeoutMs: 2000, maxRequestsPerSecond: 1000, maxConcurrency: 2, retries: 0, maxPages: 10 });
    onTestFinished(async () => {
      await client.close();
      await new Promise((r) => server.close(r));
    });
    // The stored snapshot: jobs 299 to 250, the oldest of another kind than the source
    // declares (A32), as a snapshot written before kinds were checked would hold.
    const stored = [...Array.from({ length: 49 }, (_, i) => ({ id: 299 - i, state: 'done' })), { id: 250, state: 42 }];
    const fetcher = new Fetcher(client, { stored: () => stored });
    const ref = entityOf(sourceByName('jobs')!, null);
    const got = await fetcher.fetch(ref);
    expect(got.kind).toBe('data');
    const merged = (got as { data: Array<{ id: number; state: unknown }> }).data;
    expect(merged.map((j) => j.id)).toEqual([300, ...stored.map((j) => j.id)]);
    expect(merged.at(-1)).toEqual({ id: 250, state: 42 });
    // A record of another kind on the page read still fails the poll, naming it.
    page1 = [{ id: 301, state: 7 } as unknown as { id: number; state: string }, ...page1];
    fetcher.forget(ref);
    await expect(fetcher.fetch(ref)).rejects.toThrow(/item 0 \("id" 301\): "state" is number, not a string/);
  });

  it('keeps the older records it holds below the ones read, drops those deleted above, and keeps at most `keep`', () => {
    const source = { ...sourceByName('reports')!, newestFirst: { keep: 5 } } as SourceDef & { newestFirst: { keep: number } };
    const held = [{ id: 9 }, { id: 8 }, { id: 7 }, { id: 6 }, { id: 5 }];
    const top = new TopRead(source, held);
    // Page 1: two new reports, then 9; 8 was deleted; a known record was reached: stop.
    expect(top.until([{ id: 11 }, { id: 10 }, { id: 9 }, { id: 7 }], 1)).toBe(true);
    expect(top.merge([{ id: 11 }, { id: 10 }, { id: 9 }, { id: 7 }], true)).toEqual([{ id: 11 }, { id: 10 }, { id: 9 }, { id: 7 }, { id: 6 }]);
  });

  it('reads the whole list when the server turns out to list it oldest first', () => {
    const source = sourceByName('reports')! as SourceDef & { newestFirst: { keep: number } };
    const top = new TopRead(source, [{ id: 1, created_at: '2026-01-01T00:00:00Z' }]);
    expect(top.until([{ id: 1, created_at: '2026-01-01T00:00:00Z' }, { id: 2, created_at: '2026-02-01T00:00:00Z' }], 1)).toBe(false);
    expect(top.oldestFirst).toBe(true);
  });
});

describe('cron jobs', () => {
  it('are read once per cycle from /cron-jobs, with a site\'s own list only when its jobs there changed', async () => {
    // Only the first six sites get cron jobs in a seeded world.
    world = await startWorld({ sim: { sites: 9 } });
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app();
    const perSite = /^\/api\/v1\/sites\/(\d+)\/cron-jobs$/;
    const { jobs } = await c.state<{ jobs: { id: number; site_id: number }[] }>('cron');
    const withJobs = [...new Set(jobs.map((j) => j.site_id))].sort();
    expect(withJobs.length).toBeGreaterThan(0);
    expect(withJobs.length).toBeLessThan(9);
    world.sim.clearRequests();
    await app.runOnce();
    // The catch-up: the account list, and the own list of each site that has jobs (no other).
    expect(world.sim.requests.filter((r) => r.path === '/api/v1/cron-jobs')).toHaveLength(1);
    const read = (): number[] => [...new Set(world!.sim.requests.map((r) => perSite.exec(r.path)?.[1]).filter((x): x is string => x !== undefined).map(Number))].sort();
    expect(read()).toEqual(withJobs);
    // Runs move only volatile fields: no site list is read.
    await c.act('cron', 'run', { job_id: jobs[0]!.id, status: 'ok' });
    world.sim.clearRequests();
    await app.runOnce();
    expect(world.sim.requests.filter((r) => r.path === '/api/v1/cron-jobs')).toHaveLength(1);
    expect(read()).toEqual([]);
    // Three timeouts pause a job: its site's list is read, the alert fires from it.
    const job = jobs[0]!;
    await c.act('cron', 'run', { job_id: job.id, status: 'timeout', count: 3 });
    world.sim.clearRequests();
    await app.runOnce();
    expect(read()).toEqual([job.site_id]);
    expect(names(world.events).filter((n) => n.startsWith('cron.job_paused'))).toEqual(['cron.job_paused:firing']);
  });
});

describe('a reply over api.max_reply_bytes', () => {
  it('fails only its entity, as a clear too_large, and degrades only that source', async () => {
    world = await startWorld({ sim: { sites: 3 }, config: { api: { max_reply_bytes: '1MB', retries: 0 } } });
    await new Control(world.sim).still();
    const app = await world.app();
    await app.runOnce();
    // One reply says its size up front, the other only shows it while being read.
    world.sim.faults.add({ path: '^/sites/2/dns$', kind: 'oversize', bytes: 3 * 1024 * 1024 });
    world.sim.faults.add({ path: '^/sites/3/usage$', kind: 'oversize', bytes: 3 * 1024 * 1024, chunked: true });
    for (let i = 0; i < 3; i++) await app.runOnce();
    const failing = rows<{ source: string; entity: string; last_error_code: string; last_error: string }>(
      world,
      "SELECT source, entity, last_error_code, last_error FROM poll_state WHERE consecutive_failures > 0 AND entity != '' ORDER BY entity",
    );
    expect(failing.map((r) => `${r.entity} ${r.last_error_code}`)).toEqual(['sites/2/dns too_large', 'sites/3/usage too_large']);
    expect(failing[0]!.last_error).toBe('/sites/2/dns: the reply is larger than api.max_reply_bytes (1 MB): Content-Length 3 MB');
    expect(failing[1]!.last_error).toBe('/sites/3/usage: the reply is larger than api.max_reply_bytes (1 MB): more than 1 MB read, the rest not');
    expect(names(world.events).sort()).toEqual(['source.degraded:firing', 'source.degraded:firing']);
    expect(world.events.map((e) => e.subject).sort()).toEqual(['sources/dns', 'sources/usage']);
    // Every other entity of those sources, and every other source, kept polling.
    const db = new BetterSqlite3(world.dbPath, { readonly: true });
    try {
      const others = db.prepare("SELECT count(*) AS n FROM poll_state WHERE consecutive_failures > 0 AND entity NOT IN ('sites/2/dns', 'sites/3/usage', '')").get() as { n: number };
      expect(others.n).toBe(0);
    } finally {
      db.close();
    }
  });
});
