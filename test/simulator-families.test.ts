import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, World, type Simulator, type SimulatorOptions } from '../src/simulator/index.js';

const fixedNow = (): Date => new Date('2026-01-15T12:00:00Z');
const running: Simulator[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

async function start(opts: SimulatorOptions = {}): Promise<Simulator> {
  const sim = await startSimulator({ now: fixedNow, familyDrift: false, ...opts });
  running.push(sim);
  return sim;
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

async function call(sim: Simulator, method: string, path: string, body?: unknown, headers: Record<string, string> = {}, key = 'sim-key'): Promise<Answer> {
  const res = await fetch(`${sim.url}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? null : JSON.parse(text) };
}

const get = (sim: Simulator, path: string, key?: string): Promise<Answer> => call(sim, 'GET', path, undefined, {}, key);

async function control(sim: Simulator, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${sim.url}/_sim${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

/** Walks a paged list with `limit`, returning every page's data. */
async function walk(sim: Simulator, path: string, limit: number): Promise<{ pages: number[]; items: any[] }> {
  const pages: number[] = [];
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await get(sim, `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(res.status, path).toBe(200);
    expect(res.body.has_more).toBe(res.body.next_cursor !== null);
    pages.push(res.body.data.length);
    items.push(...res.body.data);
    cursor = res.body.next_cursor;
  } while (cursor);
  return { pages, items };
}

describe('paging', () => {
  it('pages local keywords, client reports and footprint reports with limit and cursor, reports newest first', async () => {
    const sim = await start();
    const all = (await get(sim, '/local-rankings/keywords')).body.data;
    expect(all.length).toBeGreaterThan(4);
    const walked = await walk(sim, '/local-rankings/keywords', 3);
    expect(walked.items.map((k: any) => k.id)).toEqual(all.map((k: any) => k.id));
    expect(walked.pages.slice(0, -1).every((n) => n === 3)).toBe(true);

    for (let i = 0; i < 3; i++) await control(sim, 'POST', '/do/reports/create', { client_id: 1 });
    const reports = await walk(sim, '/client-reports/reports', 2);
    const ids = reports.items.map((r: any) => r.id);
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    expect(reports.items.length).toBe(7);
    expect(reports.items[0]).not.toHaveProperty('share_url');

    await control(sim, 'POST', '/do/footprint/report', { add: ['shared_ip'] });
    const fp = await walk(sim, '/footprint/reports', 1);
    expect(fp.pages).toEqual([1, 1, 1]);
    expect(typeof fp.items[0].findings).toBe('number');
  });

  it('uses the spec defaults: 25 reports, 50 local keywords, and refuses a limit over the maximum', async () => {
    const sim = await start();
    for (let i = 0; i < 30; i++) await control(sim, 'POST', '/do/reports/create', { client_id: 2 });
    expect((await get(sim, '/client-reports/reports')).body.data).toHaveLength(25);
    expect((await get(sim, '/client-reports/reports?client_id=2&limit=200')).body.data.every((r: any) => r.client.startsWith(sim.world.getSite(2)!.name))).toBe(true);
    expect((await get(sim, '/local-rankings/keywords?limit=201')).status).toBe(422);
    expect((await get(sim, '/sites/1/cron-jobs/101/runs?limit=21')).status).toBe(422);
  });
});

describe('scopes', () => {
  it('answers 403 scope_missing naming the scope, lets :write read, and takes key changes through /_sim/keys', async () => {
    const sim = await start({ keys: { 'sim-key': '*', dns: ['dns:write'] } });
    expect((await get(sim, '/sites/1/dns', 'dns')).status).toBe(200);
    const denied = await get(sim, '/rank', 'dns');
    expect(denied.status).toBe(403);
    expect(denied.body.error).toMatchObject({ code: 'scope_missing', details: { required: 'rank:read' } });
    expect((await call(sim, 'POST', '/keyword-research', { keyword: 'x' }, {}, 'dns')).body.error.details.required).toBe('research:run');

    expect((await control(sim, 'PUT', '/keys/ranker', { scopes: ['rank:read'] })).status).toBe(200);
    expect((await get(sim, '/rank', 'ranker')).status).toBe(200);
    expect((await control(sim, 'GET', '/keys')).body.data.ranker).toEqual(['rank:read']);
    await control(sim, 'DELETE', '/keys/ranker');
    expect((await get(sim, '/rank', 'ranker')).status).toBe(401);
  });
});

describe('error codes and state transitions', () => {
  it('answers 409 conflict on security for a site whose DNS is not on the CDN provider, and bot check is not available there', async () => {
    const sim = await start();
    expect((await get(sim, '/sites/1/security')).status).toBe(200);
    await control(sim, 'PATCH', '/sites/1/state/dns', { set: { 'nameservers.dns_provider': 'registrar-dns' } });
    const res = await get(sim, '/sites/1/security');
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conflict');
    expect((await call(sim, 'PUT', '/sites/1/security/under-attack', { on: true })).status).toBe(409);
    expect((await get(sim, '/sites/1/botcheck')).body.data.available).toBe(false);
    expect((await call(sim, 'POST', '/sites/1/botcheck', {})).status).toBe(409);
  });

  it('answers 402 payment_required with checkout_url and price for an extra database unless the account gets them free', async () => {
    const sim = await start();
    const paid = await call(sim, 'POST', '/sites/2/extra-databases', { label: 'shop2' });
    expect(paid.status).toBe(402);
    expect(paid.body.error.code).toBe('payment_required');
    expect(paid.body.error.details).toMatchObject({ checkout_url: expect.stringMatching(/^https:/), price_usd_per_month: expect.any(String) });
    expect((await call(sim, 'POST', '/sites/2/extra-databases', { label: 'Bad Label' })).status).toBe(422);

    await control(sim, 'PATCH', '/state/extradb', { set: { free: true } });
    const created = await call(sim, 'POST', '/sites/2/extra-databases', { label: 'shop2' });
    expect(created.status).toBe(202);
    expect(created.body.data).toMatchObject({ name: 'site2_shop2', state: 'creating', site_id: 2 });
    sim.tick();
    expect((await get(sim, `/sites/2/extra-databases/${created.body.data.id}`)).body.data.state).toBe('ready');
  });

  it('refuses destructive calls without confirm: true, and deletes an extra database only by its exact name', async () => {
    const sim = await start();
    const db = (await get(sim, '/extra-databases')).body.data[0];
    const path = `/sites/${db.site_id}/extra-databases/${db.id}`;
    const noConfirm = await call(sim, 'DELETE', path, { name: db.name });
    expect(noConfirm.status).toBe(422);
    expect(noConfirm.body.error).toMatchObject({ code: 'validation_failed', details: { field: 'confirm' } });
    expect((await call(sim, 'DELETE', path, { name: 'wrong', confirm: true })).body.error.details.field).toBe('name');
    expect((await call(sim, 'DELETE', path, { name: db.name, confirm: true })).body.data.state).toBe('deleting');
    for (const [method, p] of [
      ['POST', '/sites/1/reinstall'],
      ['POST', '/sites/1/botcheck/disable'],
      ['DELETE', '/rank/domains/1'],
      ['DELETE', '/ai-visibility/brands/1'],
      ['DELETE', '/backlink-tracker/links/101'],
    ] as const) {
      const res = await call(sim, method, p, { confirm: false });
      expect(res.status, p).toBe(422);
      expect(res.body.error.details.field, p).toBe('confirm');
    }
    expect((await call(sim, 'DELETE', '/rank/domains/1', { confirm: true })).body.data).toEqual({ removed: true, id: 1 });
  });

  it('pauses a cron job after 3 timeouts in a row, keeps 20 runs newest first, and PATCH enabled: true clears the pause', async () => {
    const sim = await start();
    const jobs = (await get(sim, '/cron-jobs')).body.data.jobs;
    expect(jobs.length).toBeGreaterThan(0);
    const job = jobs[0];
    const base = `/sites/${job.site_id}/cron-jobs/${job.id}`;
    await control(sim, 'POST', '/do/cron/run', { job_id: job.id, status: 'timeout', count: 2 });
    expect((await get(sim, base)).body.data).toMatchObject({ enabled: true, paused_reason: null });
    await control(sim, 'POST', '/do/cron/run', { job_id: job.id, status: 'timeout' });
    const paused = (await get(sim, base)).body.data;
    expect(paused).toMatchObject({ enabled: false, state: 'paused', paused_reason: 'timed out 3 times in a row', last_status: 'timeout' });
    expect(paused.runs).toHaveLength(10);

    await control(sim, 'POST', '/do/cron/run', { job_id: job.id, status: 'ok', count: 25 });
    const runs = (await get(sim, `${base}/runs`)).body.data.runs;
    expect(runs).toHaveLength(20);
    expect(runs.map((r: any) => r.id)).toEqual([...runs.map((r: any) => r.id)].sort((a: number, b: number) => b - a));
    expect((await get(sim, `${base}/runs?limit=5`)).body.data.runs).toHaveLength(5);

    const resumed = await call(sim, 'PATCH', base, { enabled: true });
    expect(resumed.body.data).toMatchObject({ enabled: true, state: 'active', paused_reason: null });
  });

  it('creates cron jobs within the limits: 422 for a schedule under 5 minutes, 409 limit_reached at 5 per site', async () => {
    const sim = await start();
    const site = 5;
    expect((await call(sim, 'POST', `/sites/${site}/cron-jobs`, { kind: 'url', target: 'https://x.example.com/', schedule_mode: 'advanced', expression: '*/2 * * * *' })).status).toBe(422);
    expect((await call(sim, 'POST', `/sites/${site}/cron-jobs`, { kind: 'url', target: 'https://x.example.com/', schedule_mode: 'advanced', expression: '0,3 * * * *' })).status).toBe(422);
    expect((await call(sim, 'POST', `/sites/${site}/cron-jobs`, { kind: 'command', target: 'a\nb', schedule_mode: 'hourly' })).status).toBe(422);
    const have = (await get(sim, `/sites/${site}/cron-jobs`)).body.data.jobs.length;
    for (let i = have; i < 5; i++) {
      const res = await call(sim, 'POST', `/sites/${site}/cron-jobs`, { kind: 'url', target: 'https://x.example.com/', schedule_mode: 'minutes', every: 15 });
      expect(res.status).toBe(201);
      expect(res.body.data.next_runs).toHaveLength(3);
      expect(res.body.data.schedule).toMatch(/^\d+,\d+,\d+,\d+ \* \* \* \*$/);
    }
    const over = await call(sim, 'POST', `/sites/${site}/cron-jobs`, { kind: 'url', target: 'https://x.example.com/', schedule_mode: 'hourly' });
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe('limit_reached');
  });

  it('moves mail sending pending -> active, and to error when the provider refuses the key', async () => {
    const sim = await start();
    const put = await call(sim, 'PUT', '/sites/3/mail-sending', { provider: 'keyonly_2', secret: 'abcd1234' });
    expect(put.body.data).toMatchObject({ route: 'own', state: 'pending', key_hint: '…1234' });
    expect(JSON.stringify(put.body)).not.toContain('abcd1234');
    sim.tick();
    expect((await get(sim, '/sites/3/mail-sending')).body.data.state).toBe('active');
    await call(sim, 'PUT', '/sites/3/mail-sending', { provider: 'keyonly_3', secret: 'invalid-key' });
    sim.tick();
    expect((await get(sim, '/sites/3/mail-sending')).body.data.state).toBe('error');
    expect((await call(sim, 'PUT', '/sites/3/mail-sending', { provider: 'keyonly_1' })).status).toBe(422);
  });

  it('applies bot protection over a tick and follows an archive look-up and restore to done', async () => {
    const sim = await start();
    const bots = await call(sim, 'PUT', '/sites/1/security/bots', { setting: 'ai', on: true });
    expect(bots.body.data).toMatchObject({ ai: true, status: 'applying' });
    sim.tick();
    expect((await get(sim, '/sites/1/security')).body.data.bot_protection.status).toBe('active');

    expect((await get(sim, '/archive/archive/lost-site.example.org')).body.data.state).toBe('pending');
    sim.tick();
    const days = (await get(sim, '/archive/archive/lost-site.example.org')).body.data;
    expect(days.state).toBe('ready');
    const planned = await call(sim, 'POST', '/archive/restores', { domain: 'lost-site.example.org', day: days.days[0] });
    expect(planned.body.data).toMatchObject({ state: 'planned', pay_status: 'unpaid' });
    const id = planned.body.data.id;
    expect((await get(sim, `/archive/restores/${id}`)).body.data.sample.length).toBeGreaterThan(0);
    const order = { output: 'static', target: 'new', accept_terms: true, ack_rights: true };
    expect((await call(sim, 'POST', `/archive/restores/${id}/order`, { ...order, ack_rights: false })).status).toBe(422);
    const ordered = await call(sim, 'POST', `/archive/restores/${id}/order`, order);
    expect(ordered.body.data).toMatchObject({ state: 'queued', pay_status: 'paid', credits_left: 1 });
    sim.tick();
    sim.tick();
    const overview = (await get(sim, '/archive')).body.data;
    expect(overview.restores.find((r: any) => r.id === id)).toMatchObject({ state: 'done', done: true, progress_pct: 100 });
  });

  it('refuses backups and files by site state: 409 while not live, 402 restoring a backup of an expired plan', async () => {
    const sim = await start();
    const ok = (await get(sim, '/sites/2/backups')).body.data[0];
    sim.world.setSiteState(2, 'expired');
    const restore = await call(sim, 'POST', `/sites/2/backups/${ok.id}/restore`, { confirm: true });
    expect(restore.status).toBe(402);
    expect(restore.body.error.code).toBe('payment_required');
    expect((await get(sim, '/sites/2/files')).status).toBe(409);
    sim.world.setSiteState(2, 'reinstalling');
    expect((await call(sim, 'POST', '/sites/2/backups')).status).toBe(409);
    sim.world.setSiteState(2, 'live');
    expect((await call(sim, 'POST', `/sites/2/backups/${ok.id}/restore`, { confirm: true })).status).toBe(202);
  });

  it('checks a newly added rank keyword within the hour, and lists what did not fit the plan in not_added', async () => {
    const sim = await start();
    await control(sim, 'PATCH', '/state/rank', { set: { 'plan.keyword_limit': (await get(sim, '/rank')).body.data.keywords.used + 1 } });
    const added = await call(sim, 'POST', '/rank/groups/11/keywords', { keywords: ['fresh bread', 'rye loaf'] });
    expect(added.status).toBe(201);
    expect(added.body.data.added.map((k: any) => k.keyword)).toEqual(['fresh bread']);
    expect(added.body.data.not_added).toMatchObject({ count: 1, keywords: ['rye loaf'] });
    const id = added.body.data.added[0].id;
    for (let i = 0; i < 11; i++) sim.tick();
    expect((await get(sim, `/rank/keywords/${id}`)).body.data.checks).toBe(0);
    sim.tick();
    expect((await get(sim, `/rank/keywords/${id}`)).body.data.checks).toBe(1);
  });

  it('spends research credits once per question and answers 402 when the credits run out', async () => {
    const sim = await start();
    const before = (await get(sim, '/research')).body.data.keyword_research.credits.used;
    expect((await call(sim, 'POST', '/keyword-research', { keyword: 'sourdough' })).body.data.credits_used).toBe(1);
    expect((await call(sim, 'POST', '/keyword-research', { keyword: 'sourdough' })).body.data.credits_used).toBe(0);
    expect((await get(sim, '/research')).body.data.keyword_research.credits.used).toBe(before + 1);
    await control(sim, 'PATCH', '/state/research', { set: { 'keyword_research.credits.used': 200 } });
    expect((await call(sim, 'POST', '/keyword-research', { keyword: 'rye' })).status).toBe(402);
  });

  it('writes, stats, moves and deletes files, refusing managed folders and links', async () => {
    const sim = await start();
    const put = await call(sim, 'PUT', '/sites/1/files/content?path=public/new/a.txt', { content: 'hello' });
    expect(put.status).toBe(201);
    expect(put.body.data).toMatchObject({ name: 'a.txt', type: 'file', size: 5, written: 5, path: 'public/new/a.txt' });
    expect((await call(sim, 'PUT', '/sites/1/files/content?path=public/new/a.txt', { content: 'x' })).status).toBe(409);
    expect((await call(sim, 'PUT', '/sites/1/files/content?path=.platform/x', { content: 'x' })).status).toBe(403);
    expect((await call(sim, 'PUT', '/sites/1/files/content?path=current/x', { content: 'x' })).status).toBe(403);
    expect((await get(sim, '/sites/1/files/content?path=public/new/a.txt&encoding=text')).body.data.content).toBe('hello');
    const raw = await fetch(`${sim.url}/api/v1/sites/1/files/content?path=public/new/a.txt&encoding=raw`, { headers: { authorization: 'Bearer sim-key' } });
    expect(await raw.text()).toBe('hello');
    expect((await call(sim, 'POST', '/sites/1/files/move', { path: 'public/new', to: 'public/old' })).body.data.moved_from).toBe('public/new');
    expect((await get(sim, '/sites/1/files/stat?path=public/old/a.txt')).status).toBe(200);
    expect((await call(sim, 'DELETE', '/sites/1/files?path=public/old')).status).toBe(409);
    expect((await call(sim, 'DELETE', '/sites/1/files?path=public/old&recursive=true')).body.data).toEqual({ path: 'public/old', deleted: true, entries_removed: 2 });
    expect((await get(sim, '/sites/1/files/stat?path=nothing-here')).status).toBe(404);
  });

  it('creates, publishes, refuses and deletes DNS records', async () => {
    const sim = await start();
    expect((await call(sim, 'POST', '/sites/2/dns', { type: 'A', name: 'shop', value: '300.1.1.1' })).status).toBe(422);
    const created = await call(sim, 'POST', '/sites/2/dns', { type: 'MX', name: '@', value: 'mx2.mail.example.net', priority: 20 });
    expect(created.status).toBe(201);
    expect(created.body.data.parts).toEqual({ priority: 20, target: 'mx2.mail.example.net' });
    const refused = await control(sim, 'POST', '/sites/2/do/dns/refuse', { record_id: created.body.data.id, error: 'provider said no' });
    expect(refused.status).toBe(200);
    expect((await get(sim, '/sites/2/dns')).body.data.publishing.errors).toEqual([{ record_id: created.body.data.id, name: '@', type: 'MX', error: 'provider said no' }]);
    sim.tick();
    expect((await get(sim, '/sites/2/dns')).body.data.publishing.errors).toEqual([]);
    expect((await call(sim, 'DELETE', `/sites/2/dns/${created.body.data.id}`)).body.data).toEqual({ deleted: true, id: created.body.data.id });
    expect((await call(sim, 'DELETE', `/sites/2/dns/${created.body.data.id}`)).status).toBe(404);
    expect((await get(sim, '/jobs')).body.data.filter((j: any) => j.type === 'dns_publish')).toHaveLength(2);
  });
});

describe('more writes and their rules', () => {
  it('releases a blocked held update once with try-again, and refuses it while it cannot be tried again', async () => {
    const sim = await start();
    const held = (await control(sim, 'POST', '/do/updates/hold', { site_id: 2, plugin: 'seo-helper' })).body.data;
    expect((await call(sim, 'POST', `/plugin-updates/held/${held.id}/try-again`)).status).toBe(409);
    await control(sim, 'POST', '/do/updates/block', { hold_id: held.id });
    expect((await get(sim, '/sites/2/plugin-updates/held')).body.data.find((h: any) => h.id === held.id)).toMatchObject({ state: 'blocked', can_try_again: true, times_it_broke: 2 });
    const released = await call(sim, 'POST', `/plugin-updates/held/${held.id}/try-again`);
    expect(released.body.data).toMatchObject({ state: 'released', can_try_again: false });
    expect((await get(sim, '/plugin-updates/held?site_id=2')).body.data.map((h: any) => h.id)).toContain(held.id);
    expect((await call(sim, 'POST', '/plugin-updates/held/999999/try-again')).status).toBe(404);
  });

  it('watches a new business: candidates arrive on the next tick, confirming one reads the profile', async () => {
    const sim = await start();
    const created = await call(sim, 'POST', '/reputation/businesses', { name: 'Corner Cafe', country: 2840 });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    sim.tick();
    const detail = (await get(sim, `/reputation/businesses/${id}`)).body.data;
    expect(detail.waiting_for_confirmation).toBe(true);
    const candidate = detail.platforms.find((p: any) => p.platform === 'platform_a').candidates[0];
    const block = await call(sim, 'POST', `/reputation/businesses/${id}/profiles`, { platform: 'platform_a', candidate: candidate.id });
    expect(block.body.data).toMatchObject({ platform: 'platform_a', profile: { name: 'Corner Cafe', rating: null } });
    expect((await call(sim, 'POST', '/reputation/businesses', { name: 'Too Many', country: 2840 })).status).toBe(201);
    const full = await call(sim, 'POST', '/reputation/businesses', { name: 'Over', country: 2840 });
    expect(full.status).toBe(402);
    expect(full.body.error.details.plans_url).toMatch(/^https:/);
  });

  it('adds AI prompts up to the plan and lists the rest in not_added', async () => {
    const sim = await start();
    await control(sim, 'PATCH', '/state/aivis', { set: { 'plan.prompt_limit': 4 } });
    const res = await call(sim, 'POST', '/ai-visibility/brands/1/prompts', { prompts: 'Which bakery is best?\nWhere to buy rye?', engines: ['assistant_c', 'nope'] });
    expect(res.status).toBe(201);
    expect(res.body.data.added).toHaveLength(1);
    expect(res.body.data.added[0].engines).toEqual(['assistant_c']);
    expect(res.body.data.not_added).toMatchObject({ count: 1, prompts: ['Where to buy rye?'], limit: 4 });
    expect((await call(sim, 'POST', '/ai-visibility/brands/1/prompts', { prompts: ['short'] })).status).toBe(422);
  });

  it('uploads a file as multipart and as raw bytes', async () => {
    const sim = await start();
    const form = new FormData();
    form.append('file', new Blob(['<?php echo 1;']), 'x.php');
    const multipart = await fetch(`${sim.url}/api/v1/sites/1/files/content?path=up/x.php`, { method: 'PUT', headers: { authorization: 'Bearer sim-key' }, body: form });
    expect(multipart.status).toBe(201);
    expect((await multipart.json()).data).toMatchObject({ written: 13, size: 13 });
    const raw = await fetch(`${sim.url}/api/v1/sites/1/files/content?path=up/y.bin&mkdirs=false`, { method: 'PUT', headers: { authorization: 'Bearer sim-key', 'content-type': 'application/octet-stream' }, body: new Uint8Array([1, 2, 3]) });
    expect(raw.status).toBe(201);
    expect((await get(sim, '/sites/1/files?path=up')).body.data.items.map((i: any) => i.name)).toEqual(['x.php', 'y.bin']);
    expect((await call(sim, 'PUT', '/sites/1/files/content?path=nowhere/z.txt&mkdirs=false', { content: 'z' })).status).toBe(404);
  });

  it('switches Under Attack off by itself at its auto-off time (1h = 12 ticks), not earlier', async () => {
    const sim = await start();
    const on = await call(sim, 'PUT', '/sites/1/security/under-attack', { on: true, auto_off: '1h' });
    expect(on.body.data).toMatchObject({ on: true, enabled_at: '2026-01-15T12:00:00Z', auto_off_at: '2026-01-15T13:00:00Z' });
    for (let i = 0; i < 11; i++) sim.tick();
    expect((await get(sim, '/sites/1/security')).body.data.under_attack.on).toBe(true);
    sim.tick();
    expect((await get(sim, '/sites/1/security')).body.data.under_attack).toMatchObject({ on: false, auto_off_at: null });
    expect((await call(sim, 'PUT', '/sites/1/security/under-attack', { on: true, auto_off: 'soon' })).status).toBe(422);
  });

  it('switches the families\' drift off and on through /_sim/drift', async () => {
    const sim = await start({ familyDrift: true });
    await control(sim, 'POST', '/drift', { enabled: false });
    for (let i = 0; i < 30; i++) sim.tick();
    expect(sim.world.history.filter((h) => h.kind.includes('.'))).toEqual([]);
    await control(sim, 'POST', '/drift', { enabled: true });
    for (let i = 0; i < 30; i++) sim.tick();
    expect(sim.world.history.filter((h) => h.kind.includes('.')).length).toBeGreaterThan(0);
  });
});

describe('conditional requests', () => {
  it('serves an ETag on GETs and answers 304 to a matching If-None-Match until the resource changes', async () => {
    const sim = await start();
    const first = await get(sim, '/rank/domains');
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^W\/".+"$/);
    const again = await call(sim, 'GET', '/rank/domains', undefined, { 'if-none-match': etag as string });
    expect(again.status).toBe(304);
    expect(again.body).toBeNull();
    expect(sim.requests.at(-1)).toMatchObject({ status: 304, conditional: true });
    await control(sim, 'POST', '/do/rank/move', { keyword_id: 1101, position: 2 });
    const changed = await call(sim, 'GET', '/rank/domains', undefined, { 'if-none-match': etag as string });
    expect(changed.status).toBe(200);
    expect(changed.headers.get('etag')).not.toBe(etag);
  });

  it('serves no ETag and answers every GET in full with etags off (a server without validators)', async () => {
    const sim = await start({ etags: false });
    const first = await get(sim, '/rank/domains');
    expect(first.headers.get('etag')).toBeNull();
    const again = await call(sim, 'GET', '/rank/domains', undefined, { 'if-none-match': '*' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
  });
});

describe('the /_sim control hooks over families', () => {
  it('patches a family state with set and ops, runs actions, and answers 404/422 for bad families and paths', async () => {
    const sim = await start();
    await control(sim, 'PATCH', '/sites/1/state/hourly', { set: { last_error: 'disk full' } });
    expect((await get(sim, '/sites/1/hourly-backups')).body.data.last_error).toBe('disk full');

    const rec = { type: 'TXT', name: 'x', value: 'v', proxied: false, updated_at: '2026-01-01T00:00:00Z', parts: {} };
    const state = (await control(sim, 'PATCH', '/sites/1/state/dns', { ops: [{ op: 'add', path: 'records', value: rec }, { op: 'remove', path: 'records.104' }] })).body.data;
    expect(state.records.map((r: any) => r.type)).toEqual(['A', 'CNAME', 'MX', 'TXT']);
    expect(state.records[3].id).toBeGreaterThan(10_000_000);

    await control(sim, 'PATCH', '/state/reputation', { set: { 'profiles.1.platform_a.rating': 2.1 } });
    const platforms = (await get(sim, '/reputation/businesses/1')).body.data.platforms;
    expect(platforms.find((p: any) => p.platform === 'platform_a').profile.rating).toBe(2.1);

    const review = await control(sim, 'POST', '/do/reputation/review', { business_id: 1, platform: 'platform_b', rating: 1 });
    expect(review.body.data).toMatchObject({ rating: 1, poor: true, replied: false });
    expect((await get(sim, '/reputation/businesses')).body.data[0].poor_unanswered).toBe(1);

    expect((await control(sim, 'GET', '/state/nothing')).status).toBe(404);
    expect((await control(sim, 'PATCH', '/sites/1/state/rank', { set: { a: 1 } })).status).toBe(404);
    expect((await control(sim, 'PATCH', '/sites/1/state/dns', { set: { 'records.999.value': 'x' } })).status).toBe(404);
    expect((await control(sim, 'PATCH', '/sites/1/state/dns', {})).status).toBe(422);
    expect((await control(sim, 'POST', '/do/rank/explode', {})).status).toBe(404);
    expect(sim.world.history.some((h) => h.kind === 'dns.patched' && h.site_id === 1)).toBe(true);
  });

  it('gives every review a url of its own within the account, seeded or new', async () => {
    const sim = await start();
    for (let i = 0; i < 5; i++) await control(sim, 'POST', '/do/reputation/review', { business_id: 1 });
    const platforms = (await get(sim, '/reputation/businesses/1')).body.data.platforms;
    const urls = platforms.flatMap((p: any) => p.reviews.map((r: any) => r.url));
    expect(urls.length).toBeGreaterThan(5);
    expect(new Set(urls).size).toBe(urls.length);
  });

  it('injects a fault on one method only', async () => {
    const sim = await start();
    await control(sim, 'POST', '/faults', { path: '^/sites/1/backups$', kind: 'status', status: 500, method: 'POST' });
    expect((await get(sim, '/sites/1/backups')).status).toBe(200);
    expect((await call(sim, 'POST', '/sites/1/backups')).status).toBe(500);
  });
});

describe('a world that moves in time from a seed', () => {
  it('moves rank positions, reviews, DNS publishing, footprint, cron runs and research credits as it ticks', () => {
    const world = new World({ seed: 11, sites: 8, now: fixedNow });
    for (let i = 0; i < 300; i++) world.tick();
    const kinds = new Set(world.history.map((h) => h.kind));
    for (const kind of ['rank.moved', 'reputation.review', 'dns.refused', 'footprint.report', 'cron.run', 'research.credits_used', 'local.moved', 'competitors.reading', 'aivis.checked', 'seo.reading', 'reports.created', 'hourly.run']) {
      expect(kinds, kind).toContain(kind);
    }
  });

  it('moves its clock 5 minutes per tick with advanceClock, so throttles expire and new records are dated by the tick', async () => {
    const sim = await start({ advanceClock: true });
    const site = 1;
    await control(sim, 'PATCH', `/sites/${site}/state/hourly`, { set: { active: true } });
    expect((await call(sim, 'POST', `/sites/${site}/hourly-backups/now`)).status).toBe(202);
    expect((await call(sim, 'POST', `/sites/${site}/hourly-backups/now`)).status).toBe(429);
    sim.tick();
    sim.tick();
    expect((await call(sim, 'POST', `/sites/${site}/hourly-backups/now`)).status).toBe(202);
    const run = (await control(sim, 'POST', '/do/cron/run', { job_id: (await get(sim, '/cron-jobs')).body.data.jobs[0].id, status: 'ok' })).body.data.runs[0];
    expect(run.finished_at).toBe('2026-01-15T12:10:00Z');
    expect(sim.world.time().toISOString()).toBe('2026-01-15T12:10:00.000Z');
  });

  it('is the same world for the same seed and clock, and differs for another seed', () => {
    const make = (seed: number): World => new World({ seed, sites: 10, now: fixedNow });
    const [a, b, c] = [make(5), make(5), make(6)];
    for (let i = 0; i < 60; i++) for (const w of [a, b, c]) w.tick();
    expect(a.snapshot()).toEqual(b.snapshot());
    expect(a.history).toEqual(b.history);
    expect(a.snapshot().resources).not.toEqual(c.snapshot().resources);
  });

  it('does not change what happens when a resource is read early', async () => {
    const [early, late] = [await start({ seed: 4, familyDrift: true }), await start({ seed: 4, familyDrift: true })];
    const paths = ['/sites/3/dns', '/sites/5/seo-metrics', '/rank/domains/1', '/sites/2/hourly-backups'];
    for (const p of paths) await get(early, p);
    for (let i = 0; i < 40; i++) {
      early.tick();
      late.tick();
    }
    for (const p of paths) expect((await get(late, p)).body, p).toEqual((await get(early, p)).body);
  });
});
