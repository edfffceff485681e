import { afterEach, describe, expect, it, vi } from 'vitest';
import { Faults, startSimulator, World, type Simulator, type SimulatorOptions } from '../src/simulator/index.js';

const KEY = 'sim-key';
const fixedNow = (): Date => new Date('2026-01-15T12:00:00Z');

const running: Simulator[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((sim) => sim.close()));
});

async function start(opts: SimulatorOptions = {}): Promise<Simulator> {
  const sim = await startSimulator({ now: fixedNow, ...opts });
  running.push(sim);
  return sim;
}

interface Answer {
  status: number;
  headers: Headers;
  // Tests read into the body freely; the shapes are asserted explicitly.
  body: any;
}

async function call(sim: Simulator, method: string, path: string, key: string | null = KEY): Promise<Answer> {
  const res = await fetch(`${sim.url}/api/v1${path}`, {
    method,
    headers: key === null ? {} : { authorization: `Bearer ${key}` },
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) };
}

const get = (sim: Simulator, path: string, key: string | null = KEY): Promise<Answer> => call(sim, 'GET', path, key);

async function control(sim: Simulator, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${sim.url}/_sim${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

describe('authentication and scopes', () => {
  it('answers 401 unauthorized without a key or with an unknown key', async () => {
    const sim = await start();
    for (const key of [null, 'wrong-key']) {
      const res = await get(sim, '/sites', key);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(typeof res.body.error.message).toBe('string');
    }
  });

  it('answers 403 scope_missing with details.required naming the scope', async () => {
    const sim = await start({ keys: { 'sites-only': ['sites:read'], 'backup-writer': ['backups:write'] } });
    const jobs = await get(sim, '/jobs', 'sites-only');
    expect(jobs.status).toBe(403);
    expect(jobs.body.error).toMatchObject({ code: 'scope_missing', details: { required: 'account:read' } });
    const backups = await get(sim, '/sites/1/backups', 'sites-only');
    expect(backups.body.error.details.required).toBe('backups:read');
    const sites = await get(sim, '/sites', 'backup-writer');
    expect(sites.body.error.details.required).toBe('sites:read');
    expect((await get(sim, '/sites/1/health', 'sites-only')).status).toBe(200);
  });

  it('lets a :write scope read the same area', async () => {
    const sim = await start({ keys: { 'backup-writer': ['backups:write'] } });
    expect((await get(sim, '/sites/1/backups', 'backup-writer')).status).toBe(200);
    expect((await call(sim, 'POST', '/sites/1/backups', 'backup-writer')).status).toBe(202);
  });
});

describe('paging', () => {
  it('walks all 7 sites exactly once with limit 3', async () => {
    const sim = await start({ sites: 7 });
    const seen: number[] = [];
    const pages: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await get(sim, `/sites?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      pages.push(res.body.data.length);
      seen.push(...res.body.data.map((s: { id: number }) => s.id));
      expect(res.body.has_more).toBe(res.body.next_cursor !== null);
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(pages).toEqual([3, 3, 1]);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('neither skips nor repeats a site when one is removed between pages', async () => {
    const sim = await start({ sites: 6 });
    const first = await get(sim, '/sites?limit=2');
    sim.world.removeSite(1);
    sim.world.removeSite(3);
    const second = await get(sim, `/sites?limit=2&cursor=${first.body.next_cursor}`);
    const third = await get(sim, `/sites?limit=2&cursor=${second.body.next_cursor}`);
    const ids = [...first.body.data, ...second.body.data, ...third.body.data].map((s: { id: number }) => s.id);
    expect(ids).toEqual([1, 2, 4, 5, 6]);
    expect(third.body.has_more).toBe(false);
  });

  it('answers 422 validation_failed for an invalid limit or cursor', async () => {
    const sim = await start();
    for (const path of ['/sites?limit=0', '/sites?limit=201', '/sites?limit=abc', '/jobs?limit=-1', '/sites/1/backups?limit=500', '/sites?cursor=nonsense']) {
      const res = await get(sim, path);
      expect(res.status, path).toBe(422);
      expect(res.body.error.code).toBe('validation_failed');
    }
    expect((await get(sim, '/sites?limit=200')).status).toBe(200);
  });
});

describe('endpoints', () => {
  it('serves health, usage and backups in the spec shapes', async () => {
    const sim = await start();
    const health = await get(sim, '/sites/2/health');
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toBe('application/json');
    expect(health.headers.get('x-request-id')).toBeTruthy();
    expect(health.body.data).toEqual({
      site_id: 2,
      online: { status: 'online', label: 'Online' },
      integrity: { checked: expect.stringMatching(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/), status: 'ok', findings: [], problems: 0 },
    });

    const usage = (await get(sim, '/sites/2/usage')).body.data;
    expect(Object.keys(usage).sort()).toEqual(['addons', 'bandwidth', 'busy', 'db', 'disk', 'frozen', 'inodes', 'over', 'site_id', 'state'].sort());
    expect(usage).toMatchObject({ site_id: 2, state: 'active', frozen: false, over: [], bandwidth: null, addons: [], busy: false });
    expect(Object.keys(usage.disk).sort()).toEqual(['addon_mib', 'included_mib', 'limit_mib', 'measured_at', 'over', 'percent', 'used_mib']);
    expect(usage.disk.limit_mib).toBe(usage.disk.included_mib + usage.disk.addon_mib);
    expect(usage.disk.percent).toBe(Math.round((usage.disk.used_mib / usage.disk.limit_mib) * 1000) / 10);
    expect(usage.db).toEqual({ used_mib: expect.any(Number), limit_mib: expect.any(Number) });
    expect(usage.inodes).toEqual({ used: expect.any(Number), limit: expect.any(Number) });

    const backups = await get(sim, '/sites/2/backups');
    expect(backups.body).toMatchObject({ next_cursor: null, has_more: false });
    const list = backups.body.data as { id: number; created_at: string }[];
    expect(list.length).toBeGreaterThanOrEqual(2);
    expect(list.length).toBeLessThanOrEqual(3);
    for (const b of list) {
      expect(b).toEqual({ id: expect.any(Number), created_at: expect.any(String), type: 'Automatic', state: 'Ok', size_bytes: expect.any(Number), is_blueprint: false, locked: false });
    }
    expect(list.map((b) => b.id)).toEqual([...list.map((b) => b.id)].sort((a, b) => b - a));
    const one = await get(sim, `/sites/2/backups/${list[0]?.id}`);
    expect(one.body.data).toEqual(list[0]);
  });

  it('filters backups by state', async () => {
    const sim = await start();
    const failed = sim.world.addBackup(1, { state: 'Error' });
    const res = await get(sim, '/sites/1/backups?state=Error');
    expect(res.body.data).toEqual([failed]);
    expect((await get(sim, '/sites/1/backups?state=Broken')).status).toBe(422);
  });

  it('answers 404 not_found for an unknown site, backup or path, and 405 for a wrong method', async () => {
    const sim = await start();
    for (const path of ['/sites/99/health', '/sites/99/usage', '/sites/99/backups', '/sites/1/backups/9999', '/nothing', '/sites/1/nothing', '/sites/99/dns']) {
      const res = await get(sim, path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    const wrong = await call(sim, 'DELETE', '/sites/1/health');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET');
    expect(wrong.body.error.code).toBe('method_not_allowed');
  });

  it('reflects setHealth and setUsage in the next reply and in the history', async () => {
    const sim = await start();
    sim.world.setHealth(3, { status: 'offline', problems: 2 });
    const health = (await get(sim, '/sites/3/health')).body.data;
    expect(health.online).toEqual({ status: 'offline', label: 'Offline' });
    expect(health.integrity.problems).toBe(2);
    expect(health.integrity.findings).toHaveLength(2);

    const limit = sim.world.getUsage(3)?.disk.limit_mib as number;
    sim.world.setUsage(3, { diskUsedMib: limit + 100, frozen: true });
    const usage = (await get(sim, '/sites/3/usage')).body.data;
    expect(usage).toMatchObject({ frozen: true, over: ['disk'], disk: { used_mib: limit + 100, over: true } });
    expect(usage.disk.percent).toBe(Math.round(((limit + 100) / limit) * 1000) / 10);

    expect(sim.world.history.map((h) => [h.kind, h.site_id])).toEqual([
      ['health_changed', 3],
      ['usage_changed', 3],
    ]);
  });

  it('creates a Pending Manual backup on POST and ticks it to a final state with a job following', async () => {
    const sim = await start({ seed: 7 });
    const created = await call(sim, 'POST', '/sites/4/backups');
    expect(created.status).toBe(202);
    expect(created.body.data).toMatchObject({ type: 'Manual', state: 'Pending' });
    const backupId = created.body.data.id as number;

    const jobs = (await get(sim, '/jobs')).body;
    expect(jobs.data).toHaveLength(1);
    expect(jobs.data[0]).toMatchObject({ type: 'backup', state: 'queued', site_id: 4, finished_at: null, error: null });
    const jobId = jobs.data[0].id as number;

    sim.tick();
    expect((await get(sim, `/sites/4/backups/${backupId}`)).body.data.state).toBe('Creating');
    expect(sim.world.getJob(jobId)?.state).toBe('running');

    sim.tick();
    const final = (await get(sim, `/sites/4/backups/${backupId}`)).body.data;
    expect(['Ok', 'Error']).toContain(final.state);
    const job = (await get(sim, '/jobs')).body.data.find((j: { id: number }) => j.id === jobId);
    expect(job.state).toBe(final.state === 'Ok' ? 'done' : 'failed');
    expect(job.finished_at).not.toBeNull();
    expect(sim.world.history.some((h) => h.kind === 'backup_state' && h.detail.backup_id === backupId && h.detail.after === final.state)).toBe(true);
  });
});

describe('faults', () => {
  it('answers an injected 500 on the matching path only, until cleared', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites/3/health$', kind: 'status', status: 500 });
    const failed = await get(sim, '/sites/3/health');
    expect(failed.status).toBe(500);
    expect(failed.body.error.code).toBe('internal_error');
    expect((await get(sim, '/sites/2/health')).status).toBe(200);
    sim.faults.clear();
    expect((await get(sim, '/sites/3/health')).status).toBe(200);
  });

  it('does not run the endpoint when a status fault answers', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites/1/backups$', kind: 'status', status: 503 });
    const res = await call(sim, 'POST', '/sites/1/backups');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('unavailable');
    expect(sim.world.jobs).toHaveLength(0);
  });

  it('delays the answer by the injected latency and then answers normally', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites/1/usage$', kind: 'latency', ms: 300 });
    const t0 = performance.now();
    const res = await get(sim, '/sites/1/usage');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
    expect(res.status).toBe(200);
    expect(res.body.data.site_id).toBe(1);
  });

  it('answers 429 rate_limited with a Retry-After header', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites$', kind: 'rate_limit', retry_after: 7 });
    const res = await get(sim, '/sites');
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(res.body.error.code).toBe('rate_limited');
  });

  it('answers 200 with a truncated body that JSON.parse rejects', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites/1/health$', kind: 'truncated' });
    const res = await fetch(`${sim.url}/api/v1/sites/1/health`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(0);
    expect(() => JSON.parse(text)).toThrow();
  });

  it('answers a hostile reply: arrays nested 100,000 deep inside the real data, or any text as it is', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/sites/1/health$', kind: 'nested', depth: 100_000, times: 1 });
    const text = await (await fetch(`${sim.url}/api/v1/sites/1/health`, { headers: { authorization: `Bearer ${KEY}` } })).text();
    expect(text).toContain(`"nested":${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    const parsed = JSON.parse(text) as { data: { online: unknown } };
    expect(parsed.data.online).toBeDefined();
    sim.faults.add({ path: '^/jobs$', kind: 'body', body: '<html>502 Bad Gateway</html>', status: 200 });
    const res = await fetch(`${sim.url}/api/v1/jobs`, { headers: { authorization: `Bearer ${KEY}` } });
    expect([res.status, await res.text()]).toEqual([200, '<html>502 Bad Gateway</html>']);
    expect(() => sim.faults.add({ path: '.*', kind: 'body', body: 42 as unknown as string })).toThrow('body must be a string');
  });

  it('resets the connection', async () => {
    const sim = await start();
    sim.faults.add({ path: '^/jobs$', kind: 'reset' });
    await expect(get(sim, '/jobs')).rejects.toThrow();
    sim.faults.clear();
    expect((await get(sim, '/jobs')).status).toBe(200);
  });

  it('fails only page 2 of a paged list', async () => {
    const sim = await start({ sites: 7 });
    sim.faults.add({ path: '^/sites$', kind: 'status', status: 503, page: 2 });
    const first = await get(sim, '/sites?limit=3');
    expect(first.status).toBe(200);
    const cursor = first.body.next_cursor as string;
    expect((await get(sim, `/sites?limit=3&cursor=${cursor}`)).status).toBe(503);
    expect((await get(sim, `/sites?limit=3&cursor=${cursor}`)).status).toBe(503);
    expect((await get(sim, '/sites?limit=3')).status).toBe(200);
    sim.faults.clear();
    const second = await get(sim, `/sites?limit=3&cursor=${cursor}`);
    expect(second.status).toBe(200);
    expect((await get(sim, `/sites?limit=3&cursor=${second.body.next_cursor}`)).status).toBe(200);
  });

  it('expires a fault after `times` applications', async () => {
    const sim = await start();
    const id = sim.faults.add({ path: '^/sites/1/health$', kind: 'status', status: 502, times: 2 });
    expect(sim.faults.list().map((f) => f.id)).toEqual([id]);
    expect((await get(sim, '/sites/1/health')).status).toBe(502);
    expect((await get(sim, '/sites/1/health')).status).toBe(502);
    expect((await get(sim, '/sites/1/health')).status).toBe(200);
    expect(sim.faults.list()).toEqual([]);
  });

  it('rejects a fault spec with a bad kind or path', () => {
    const faults = new Faults();
    expect(() => faults.add({ path: '(', kind: 'status' })).toThrow(/regex/);
    expect(() => faults.add({ path: '^/sites$', kind: 'boom' as 'status' })).toThrow(/kind/);
    expect(faults.list()).toEqual([]);
  });
});

describe('the world', () => {
  it('is identical after 20 ticks for the same seed and differs for another seed', () => {
    const a = new World({ seed: 42, sites: 30, now: fixedNow });
    const b = new World({ seed: 42, sites: 30, now: fixedNow });
    const c = new World({ seed: 43, sites: 30, now: fixedNow });
    for (let i = 0; i < 20; i++) {
      a.tick();
      b.tick();
      c.tick();
    }
    expect(a.snapshot()).toEqual(b.snapshot());
    expect(a.history).toEqual(b.history);
    expect(a.snapshot()).not.toEqual(c.snapshot());
    expect(a.history.filter((h) => h.kind !== 'tick').length).toBeGreaterThan(0);
  });

  it('gives the same sites to two simulators with the same seed', async () => {
    const [a, b] = await Promise.all([start({ seed: 5, sites: 12 }), start({ seed: 5, sites: 12 })]);
    for (let i = 0; i < 20; i++) {
      a.tick();
      b.tick();
    }
    expect((await get(a, '/sites?limit=200')).body).toEqual((await get(b, '/sites?limit=200')).body);
    expect(a.world.snapshot()).toEqual(b.world.snapshot());
  });

  it('varies a few domain names and keeps them unique', () => {
    const world = new World({ seed: 1, sites: 100, now: fixedNow });
    const domains = world.sites.map((s) => s.domain);
    expect(new Set(domains).size).toBe(100);
    expect(domains.filter((d) => /^site-\d+\.example\.com$/.test(d)).length).toBeGreaterThan(50);
    expect(domains.filter((d) => !/^site-\d+\.example\.com$/.test(d)).length).toBeGreaterThan(0);
  });

  it('drifts at most three sites per tick', () => {
    const world = new World({ seed: 9, sites: 50, now: fixedNow });
    for (let i = 0; i < 300; i++) world.tick();
    const touched = new Map<number, Set<number>>();
    let tick = 0;
    for (const h of world.history) {
      if (h.kind === 'tick') tick = h.detail.tick as number;
      else if ((h.kind === 'health_changed' || h.kind === 'usage_changed') && h.site_id !== undefined) {
        touched.set(tick, (touched.get(tick) ?? new Set()).add(h.site_id));
      }
    }
    expect(touched.size).toBeGreaterThan(100);
    for (const sites of touched.values()) expect(sites.size).toBeLessThanOrEqual(3);
    const kinds = new Set(world.history.map((h) => h.kind));
    for (const kind of ['health_changed', 'usage_changed', 'backup_added', 'backup_state', 'job_state']) expect(kinds).toContain(kind);
  });

  it('brings a site that drift took offline back online on a later tick', () => {
    const world = new World({ seed: 3, sites: 20, now: fixedNow });
    for (let i = 0; i < 200; i++) world.tick();
    const offline = world.history.filter((h) => h.kind === 'health_changed' && (h.detail.after as { status: string }).status === 'offline');
    expect(offline.length).toBeGreaterThan(0);
    const siteId = offline[0]?.site_id;
    const back = world.history.find(
      (h) => h.kind === 'health_changed' && h.site_id === siteId && (h.detail.before as { status: string }).status === 'offline',
    );
    expect(back).toBeDefined();
  });

  it('fails the job of a started backup when its site is removed', () => {
    const world = new World({ sites: 2, now: fixedNow });
    const { job } = world.startBackup(2);
    world.removeSite(2);
    expect(world.getJob(job.id)).toMatchObject({ state: 'failed', error: 'site removed' });
    expect(world.getSite(2)).toBeUndefined();
  });
});

describe('request log', () => {
  it('records method, path and query of API requests but not /_sim requests', async () => {
    const sim = await start();
    await get(sim, '/sites?limit=2');
    await get(sim, '/sites/1/health');
    await control(sim, 'POST', '/tick');
    expect(sim.requests.map((r) => [r.method, r.path, r.query])).toEqual([
      ['GET', '/api/v1/sites', { limit: '2' }],
      ['GET', '/api/v1/sites/1/health', {}],
    ]);
    expect(sim.requests.every((r) => r.method === 'GET')).toBe(true);
    await call(sim, 'POST', '/sites/1/backups');
    expect(sim.requests.every((r) => r.method === 'GET')).toBe(false);
    sim.requests.length = 0;
    await get(sim, '/jobs');
    expect(sim.requests).toHaveLength(1);
    sim.clearRequests();
    expect(sim.requests).toHaveLength(0);
  });

  it('keeps only the newest requests past maxRequests', async () => {
    const sim = await start({ maxRequests: 10 });
    for (let i = 0; i < 30; i++) await get(sim, `/sites/1/health?n=${i}`);
    expect(sim.requests.length).toBeLessThanOrEqual(21);
    expect(sim.requests.at(-1)?.query).toEqual({ n: '29' });
  });
});

describe('the /_sim control interface', () => {
  it('changes the world, ticks, injects faults and reports history and requests', async () => {
    const sim = await start();

    const health = await control(sim, 'POST', '/sites/2/health', { status: 'slow', problems: 1 });
    expect(health.status).toBe(200);
    expect((await get(sim, '/sites/2/health')).body.data.online).toEqual({ status: 'slow', label: 'Slow' });

    const usage = await control(sim, 'POST', '/sites/2/usage', { frozen: true, disk_used_mib: 1 });
    expect(usage.body.data).toMatchObject({ frozen: true, disk: { used_mib: 1 } });

    const backup = (await control(sim, 'POST', '/sites/2/backups', { state: 'Creating' })).body.data;
    expect(backup).toMatchObject({ state: 'Creating', type: 'Manual' });
    const moved = await control(sim, 'POST', `/sites/2/backups/${backup.id}`, { state: 'Error' });
    expect(moved.body.data.state).toBe('Error');

    const added = await control(sim, 'POST', '/sites', { domain: 'new-shop.example.org' });
    expect(added.status).toBe(201);
    expect(added.body.data).toMatchObject({ id: 6, domain: 'new-shop.example.org', state: 'live' });
    expect((await get(sim, '/sites/6/health')).status).toBe(200);
    expect((await control(sim, 'DELETE', '/sites/6')).status).toBe(200);
    expect((await get(sim, '/sites/6/health')).status).toBe(404);

    const fault = await control(sim, 'POST', '/faults', { path: '^/sites/1/usage$', kind: 'status', status: 500 });
    expect(fault.status).toBe(201);
    expect((await get(sim, '/sites/1/usage')).status).toBe(500);
    await control(sim, 'DELETE', '/faults');
    expect((await get(sim, '/sites/1/usage')).status).toBe(200);

    expect((await control(sim, 'POST', '/tick')).body.data.tick).toBe(1);
    expect(sim.world.ticks).toBe(1);

    const kinds = (await control(sim, 'GET', '/history')).body.data.map((h: { kind: string }) => h.kind);
    expect(kinds.slice(0, 7)).toEqual(['health_changed', 'usage_changed', 'backup_added', 'backup_state', 'site_added', 'site_removed', 'tick']);

    const requests = (await control(sim, 'GET', '/requests')).body.data as { path: string }[];
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((r) => r.path.startsWith('/api/v1/'))).toBe(true);
  });

  it('starts a backup that ticks forward when asked with start: true', async () => {
    const sim = await start();
    const started = (await control(sim, 'POST', '/sites/1/backups', { start: true })).body.data;
    expect(started.backup).toMatchObject({ state: 'Pending', type: 'Manual' });
    expect(started.job).toMatchObject({ state: 'queued', site_id: 1 });
    await control(sim, 'POST', '/tick', { count: 2 });
    expect(['Ok', 'Error']).toContain(sim.world.getBackup(1, started.backup.id)?.state);
    expect(['done', 'failed']).toContain(sim.world.getJob(started.job.id)?.state);
  });

  it('answers 404 for an unknown site and 422 for a bad body', async () => {
    const sim = await start();
    expect((await control(sim, 'POST', '/sites/99/health', { status: 'offline' })).status).toBe(404);
    expect((await control(sim, 'POST', '/sites/1/health', { problems: -1 })).status).toBe(422);
    expect((await control(sim, 'POST', '/faults', { path: '^/x$', kind: 'nope' })).status).toBe(422);
    // A misspelt key would be dropped, and the fault answer 500 instead of the 503 asked for.
    const misspelt = await control(sim, 'POST', '/faults', { path: '^/x$', kind: 'status', statuss: 503 });
    expect(misspelt.status).toBe(422);
    expect(JSON.stringify(misspelt.body)).toContain('unknown key statuss; a fault takes path, kind, method');
    const res = await fetch(`${sim.url}/_sim/tick`, { method: 'POST', body: '{not json' });
    expect(res.status).toBe(422);
    // A family action's bad arguments too, with the action's words (they were a 500).
    const bad = await control(sim, 'POST', '/do/cron/run', { status: 'bogus' });
    expect(bad.status).toBe(422);
    expect(bad.body).toEqual({ error: { code: 'validation_failed', message: 'status must be one of ok, failed, timeout, skipped, error' } });
    expect((await control(sim, 'POST', '/sites/1/do/files/touch', { size: -1 })).status).toBe(422);
    // A misspelt field of a patch is a 404 naming the fields there, not a new field the API serves.
    const typo = await control(sim, 'PATCH', '/sites/1/state/dns', { set: { 'nameservers.pointedd': false } });
    expect(typo.status).toBe(404);
    expect(JSON.stringify(typo.body)).toContain('patch path nameservers.pointedd: no field pointedd; there: current, required, pointed');
    expect(JSON.stringify(sim.world.resources.stateOf('dns', 1))).not.toContain('pointedd');
  });
});

describe('the ticker', () => {
  it('advances the world by itself when tickMs is set', async () => {
    const sim = await start({ tickMs: 10 });
    await vi.waitFor(() => expect(sim.world.ticks).toBeGreaterThan(2), { timeout: 2000, interval: 20 });
  });
});
