/**
 * The request budget: one pause for the whole client on a 429, an adaptive pace, priority
 * and deadline order, the plan that stretches the least important intervals first (and what
 * `check` and the start log say about it), and the catch-up after a start.
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LocalBudget, priorityRank, type RequestBudget } from '../src/api/budget.js';
import { ApiClient } from '../src/api/client.js';
import { planBudget, type PlanInput } from '../src/scheduler/budget-plan.js';
import { names, startWorld, tempDir, type World } from './harness.js';
import { waitFor } from './receiver.js';
import { hostwatch } from './run-cli.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** A budget on a clock that only its own sleeps move (every wait is visible, none is real). */
function fakeBudget(maxRate: number): { budget: LocalBudget; clock: { t: number }; sleeps: number[] } {
  const clock = { t: 1_000_000 };
  const sleeps: number[] = [];
  const budget = new LocalBudget({
    maxRate,
    now: () => clock.t,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock.t += ms;
    },
  });
  return { budget, clock, sleeps };
}

describe('the request budget', () => {
  it('stops every request of the client for 3 s after a 429 with Retry-After: 3', async () => {
    world = await startWorld({ sim: { sites: 3 }, config: { api: { max_concurrency: 1 } } });
    const app = await world.app();
    await app.runOnce();
    world.sim.clearRequests();
    world.sim.faults.add({ path: '^/sites/2/health$', kind: 'rate_limit', retry_after: 3, times: 1 });
    await app.runOnce();
    const log = world.sim.requests;
    const i = log.findIndex((r) => r.status === 429);
    expect(i).toBeGreaterThan(0);
    const limitedAt = Date.parse(log[i]!.at);
    const after = log.slice(i + 1);
    // Nothing at all went out during the pause: not the retry, not any other source.
    expect(after.filter((r) => Date.parse(r.at) < limitedAt + 3_000)).toEqual([]);
    expect(after.length).toBeGreaterThan(10);
    expect(new Set(after.map((r) => r.path)).size).toBeGreaterThan(5);
    // The paused poll was retried after the pause and succeeded: no failure, no event.
    expect(after.some((r) => r.path === '/api/v1/sites/2/health' && r.status !== 429)).toBe(true);
    expect(world.events).toEqual([]);
  });

  it('holds requests that were already granted but not yet sent when another request gets the 429', async () => {
    const { budget, clock, sleeps } = fakeBudget(1000);
    await budget.acquire();
    budget.rateLimited(3_000);
    const at = clock.t;
    await budget.holdWhilePaused();
    expect(clock.t - at).toBe(3_000);
    expect(sleeps).toEqual([3_000]);
  });

  it('serves the most important waiting request first, and the earliest deadline first within a level', async () => {
    const { budget } = fakeBudget(10);
    const order: string[] = [];
    const ask = (name: string, priority: number, deadline: number): Promise<void> => budget.acquire({ priority, deadline }).then(() => void order.push(name));
    // The first is granted at once; the rest queue behind the pace and are taken by urgency.
    await Promise.all([
      ask('first', priorityRank('low'), 0),
      ask('low', priorityRank('low'), 0),
      ask('normal-late', priorityRank('normal'), 900),
      ask('critical', priorityRank('critical'), 5_000),
      ask('normal-soon', priorityRank('normal'), 100),
    ]);
    expect(order).toEqual(['first', 'critical', 'normal-soon', 'normal-late', 'low']);
  });

  it('halves its pace on a 429, creeps back with accepted requests, and never goes above the configured pace', () => {
    const { budget, clock } = fakeBudget(10);
    expect(budget.state().rate).toBe(10);
    budget.rateLimited(null);
    expect(budget.state().rate).toBe(5);
    // Replies to requests in flight together count once.
    budget.rateLimited(null);
    expect(budget.state().rate).toBe(5);
    clock.t += 1_000;
    budget.rateLimited(null);
    expect(budget.state().rate).toBe(2.5);
    for (let i = 0; i < 10; i++) budget.succeeded();
    expect(budget.state().rate).toBeCloseTo(3.5);
    for (let i = 0; i < 1_000; i++) budget.succeeded();
    expect(budget.state().rate).toBe(10);
  });

  it('is the one the app is given: every request of a cycle asks it, and a 429 is told to it (the seam of a cluster-wide budget)', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    const inner = new LocalBudget({ maxRate: 1000, now: Date.now, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) });
    const seen = { acquired: 0, limited: [] as Array<number | null> };
    const budget: RequestBudget = {
      acquire: (t) => (seen.acquired++, inner.acquire(t)),
      holdWhilePaused: (signal) => inner.holdWhilePaused(signal),
      rateLimited: (ms) => (seen.limited.push(ms), inner.rateLimited(ms)),
      succeeded: () => inner.succeeded(),
      state: () => inner.state(),
    };
    const app = await world.app({}, { budget });
    world.sim.faults.add({ path: '^/sites/1/health$', kind: 'rate_limit', retry_after: 1, times: 1 });
    await app.runOnce();
    // Every request asks it; one that then waited for a connection (the 429's pause held
    // them) asks again for a fresh turn, so there may be more asks than requests.
    expect(world.sim.requests.length).toBeGreaterThan(0);
    expect(seen.acquired).toBeGreaterThanOrEqual(world.sim.requests.length);
    expect(seen.limited).toEqual([1_000]);
  });

  it('spaces requests by the pace it has after a 429', async () => {
    const { budget, sleeps } = fakeBudget(10);
    await budget.acquire();
    await budget.acquire();
    budget.rateLimited(null);
    await budget.acquire();
    await budget.acquire();
    // 100 ms apart at 10/s; 200 ms once halved.
    expect(sleeps).toEqual([100, 100, 200]);
  });
});

/** The default per-site sources and their defaults, with the priorities the built-in rules give. */
const DEFAULTS: PlanInput[] = [
  { name: 'sites', per: 'account', everyMs: 600_000, priority: 'critical', requestsPerPoll: 5 },
  { name: 'jobs', per: 'account', everyMs: 300_000, priority: 'high', requestsPerPoll: 1 },
  { name: 'health', per: 'site', everyMs: 300_000, priority: 'critical', requestsPerPoll: 1 },
  { name: 'usage', per: 'site', everyMs: 1_800_000, priority: 'critical', requestsPerPoll: 1 },
  { name: 'nameservers', per: 'site', everyMs: 3_600_000, priority: 'critical', requestsPerPoll: 1 },
  { name: 'backups', per: 'site', everyMs: 900_000, priority: 'high', requestsPerPoll: 1 },
  { name: 'dns', per: 'site', everyMs: 900_000, priority: 'high', requestsPerPoll: 1 },
  { name: 'security', per: 'site', everyMs: 600_000, priority: 'high', requestsPerPoll: 1 },
  { name: 'seo_metrics', per: 'site', everyMs: 43_200_000, priority: 'normal', requestsPerPoll: 1 },
  { name: 'site_extradb', per: 'site', everyMs: 21_600_000, priority: 'low', requestsPerPoll: 1 },
];

describe('the pace with slow replies', () => {
  it('never sends the requests that waited for a connection together: each takes a fresh turn, so they keep the pace', async () => {
    const arrivals: number[] = [];
    const server = createServer((req, res) => {
      const slow = req.url!.includes('/slow/');
      if (!slow) arrivals.push(performance.now());
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{}}'), slow ? 600 : 0);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = new ApiClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      key: 'budget-key',
      timeoutMs: 5000,
      maxRequestsPerSecond: 20,
      maxConcurrency: 2,
      retries: 0,
      maxPages: 5,
      random: () => 0.5,
    });
    try {
      // Two slow replies hold both connections for 600 ms while 16 more requests queue and
      // their turns come (one every 50 ms); the 16 replies themselves are instant.
      await Promise.all([client.get('/slow/1'), client.get('/slow/2'), ...Array.from({ length: 16 }, (_, i) => client.get(`/fast/${i}`))]);
    } finally {
      await client.close();
      await new Promise((r) => server.close(r));
    }
    expect(arrivals).toHaveLength(16);
    // At 20 a second, half a second holds 10 turns (11 with one at each end); the turns that
    // came while the connections were busy, used late, would arrive all at once.
    const most = Math.max(...arrivals.map((t) => arrivals.filter((u) => u >= t && u < t + 500).length));
    expect(most).toBeLessThanOrEqual(12);
  });
});

describe('a budget too small for every interval', () => {
  it('keeps health and the other critical sources at their interval and stretches the rest, least important first', () => {
    const plan = planBudget(DEFAULTS, 1_000, 5);
    const by = new Map(plan.sources.map((s) => [s.name, s]));
    expect(plan.short).toBe(true);
    expect(plan.neededPerHour).toBeGreaterThan(plan.allowedPerHour);
    for (const name of ['health', 'usage', 'nameservers', 'sites', 'jobs']) expect(by.get(name)!.stretch, name).toBe(1);
    expect(by.get('backups')!.stretch).toBeGreaterThan(1);
    // Least important first: nothing of a level stretches further than a less important one.
    expect(by.get('site_extradb')!.stretch).toBeGreaterThanOrEqual(by.get('seo_metrics')!.stretch);
    expect(by.get('seo_metrics')!.stretch).toBeGreaterThanOrEqual(by.get('backups')!.stretch);
    expect(plan.plannedPerHour).toBeLessThanOrEqual(plan.plannedCapacityPerHour + 1);
  });

  it('stretches the low level alone while that is enough', () => {
    // 100 sites: only the low source's cost has to go.
    const inputs: PlanInput[] = [
      { name: 'health', per: 'site', everyMs: 60_000, priority: 'critical', requestsPerPoll: 1 },
      { name: 'backups', per: 'site', everyMs: 600_000, priority: 'high', requestsPerPoll: 1 },
      { name: 'seo', per: 'site', everyMs: 60_000, priority: 'low', requestsPerPoll: 1 },
    ];
    const plan = planBudget(inputs, 100, 3);
    const by = new Map(plan.sources.map((s) => [s.name, s.stretch]));
    expect(by.get('health')).toBe(1);
    expect(by.get('backups')).toBe(1);
    expect(by.get('seo')).toBeGreaterThan(1);
    expect(by.get('seo')).toBeLessThanOrEqual(4);
  });

  it('at equal priority stretches health like every other per-site source', () => {
    const plan = planBudget(DEFAULTS.map((s) => ({ ...s, priority: s.name === 'sites' ? 'critical' : 'normal' })), 1_000, 5);
    const health = plan.sources.find((s) => s.name === 'health')!;
    expect(health.stretch).toBeGreaterThan(1.5);
    expect(plan.sources.find((s) => s.name === 'backups')!.stretch).toBeCloseTo(health.stretch);
  });

  it('is what the scheduler runs: health at its interval, the rest stretched, and the start log says so', async () => {
    world = await startWorld({ sim: { sites: 40 }, config: { api: { max_requests_per_second: 0.25 }, sources: { health: { every: '10m' } } } });
    const app = await world.app();
    const planned = new Promise<void>((resolve) => app.scheduler.on('budget:plan', (p) => p.sites === 40 && resolve()));
    await app.start();
    await planned;
    const progress = new Map(app.scheduler.progress().map((p) => [p.name, p]));
    await app.stop();
    expect(progress.get('health')).toMatchObject({ priority: 'critical', effectiveEveryMs: 600_000, stretch: 1 });
    expect(progress.get('backups')!.priority).toBe('high');
    expect(progress.get('backups')!.effectiveEveryMs).toBeGreaterThan(900_000);
    const line = world.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => String(l['msg']).startsWith('request budget') && l['sites'] === 40);
    expect(line).toMatchObject({ level: 40, sites: 40 });
    expect(String(line!['msg'])).toMatch(/short by [\d,]+ requests\/hour/);
    expect((line!['stretched'] as Record<string, string>)['backups']).toMatch(/^900s→\d+s$/);
  });

  it('is on /metrics: each source\'s effective interval and lag, the budget per hour, the pace', async () => {
    world = await startWorld({ sim: { sites: 40 }, config: { server: { listen: '127.0.0.1:0' }, api: { max_requests_per_second: 0.25 }, sources: { health: { every: '10m' } } } });
    const app = await world.app();
    const planned = new Promise<void>((resolve) => app.scheduler.on('budget:plan', (p) => p.sites === 40 && resolve()));
    await app.start();
    await planned;
    const text = await (await fetch(`${app.serverUrl}/metrics`)).text();
    await app.stop();
    const value = (name: string, labels: string): number => {
      const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
      expect(line, `${name}{${labels}}`).toBeDefined();
      return Number(line!.split(' ').at(-1));
    };
    expect(value('hostwatch_source_effective_interval_seconds', 'source="health"')).toBe(600);
    expect(value('hostwatch_source_effective_interval_seconds', 'source="backups"')).toBeGreaterThan(900);
    expect(value('hostwatch_source_lag_seconds', 'source="health"')).toBeGreaterThanOrEqual(0);
    expect(value('hostwatch_request_budget_per_hour', 'kind="allowed"')).toBe(900);
    expect(value('hostwatch_request_budget_per_hour', 'kind="needed"')).toBeGreaterThan(900);
    expect(text).toMatch(/^hostwatch_api_pace_requests_per_second 0\.25$/m);
    expect(text).toMatch(/^hostwatch_api_paused_seconds 0$/m);
  });

  it('is printed by check: needed and allowed requests per hour, which intervals stretch and by how much', async () => {
    const { dir, cleanup } = tempDir();
    try {
      const file = join(dir, 'hostwatch.yaml');
      writeFileSync(file, 'api: { base_url: https://panel.example.com, key: k-123456 }\n');
      const r = await hostwatch(['check', '-c', file, '--sites', '1000']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/request budget: 1,000 sites \(--sites\) × the enabled sources need [\d,]+ requests\/hour at their intervals; api\.max_requests_per_second 5 allows 18,000/);
      expect(r.stdout).toMatch(/short by [\d,]+ requests\/hour: \d+ sources will be polled less often than configured/);
      expect(r.stdout).toMatch(/^ +backups +high +every 15m → \S+ \(×[\d.]+\)$/m);
      expect(r.stdout).not.toMatch(/^ +health /m);
      expect(r.stdout).toMatch(/keep their intervals: sites, health, usage, nameservers(, [a-z_]+)* \(critical\)/);
      // Without a site count: how many sites fit.
      const fit = await hostwatch(['check', '-c', file]);
      expect(fit.stdout).toMatch(/every interval is met up to [\d,]+ sites at api\.max_requests_per_second 5/);
      // Plenty of budget: nothing stretches.
      const ok = await hostwatch(['check', '-c', file, '--sites', '50']);
      expect(ok.stdout).toMatch(/every interval is met \(\d+% of the budget\)/);
    } finally {
      cleanup();
    }
  });
});

describe('the catch-up after a start', () => {
  it('runs critical sources at once: every site\'s health before any lower per-site source', async () => {
    world = await startWorld({ sim: { sites: 10 }, config: { api: { max_requests_per_second: 5, max_concurrency: 2 } } });
    const app = await world.app();
    await app.start();
    const health = (): number => world!.sim.requests.filter((r) => r.path.endsWith('/health')).length;
    await waitFor(() => health() >= 10, 'every site\'s health', 15_000);
    await app.stop();
    const paths = world.sim.requests.map((r) => r.path);
    const lastHealth = paths.reduce((last, p, i) => (p.endsWith('/health') ? i : last), -1);
    const lower = /\/sites\/\d+\/(dns|backups|security|hourly-backups|botcheck|mail-sending|seo-metrics|extra-databases)$/;
    const firstLower = paths.findIndex((p) => lower.test(p));
    expect(lastHealth).toBeGreaterThan(0);
    if (firstLower >= 0) expect(firstLower).toBeGreaterThan(lastHealth);
    expect(names(world.events)).toEqual([]);
  });

  it('serves an account-wide source with the critical ones: the jobs list is read at once after a start, not after every site\'s critical sources', async () => {
    // At 1,000 sites, jobs and cron_list went unread for over 20 minutes after a start.
    world = await startWorld({ sim: { sites: 10 }, config: { api: { max_requests_per_second: 5, max_concurrency: 2 } } });
    const app = await world.app();
    await app.start();
    const paths = (): string[] => world!.sim.requests.map((r) => r.path);
    await waitFor(() => paths().includes('/api/v1/jobs'), 'the jobs list', 15_000);
    const critical = paths().filter((p) => /\/sites\/\d+\/(health|usage|nameservers)$/.test(p)).length;
    await app.stop();
    // 30 critical per-site requests in the catch-up; the jobs list went before most of them.
    expect(critical).toBeLessThan(15);
  });

  it('shows a source whose polls still wait for the budget as not caught up and lagging, not as caught up with no lag', async () => {
    // Every site's health first (critical): 40 polls at 2 requests/s. backups is due every
    // 10 s, and its first polls wait behind them; its later cycles find them still waiting.
    world = await startWorld({ sim: { sites: 40 }, config: { server: { listen: '127.0.0.1:0' }, api: { max_requests_per_second: 2, max_concurrency: 1 }, sources: { backups: { every: '10s' } } } });
    const app = await world.app();
    await app.start();
    const backups = async (): Promise<Record<string, unknown>> =>
      ((await (await fetch(`${app.serverUrl}/api/sources`)).json()) as { data: Array<Record<string, unknown>> }).data.find((s) => s['name'] === 'backups')!;
    let seen: Record<string, unknown> = {};
    await waitFor(async () => ((seen = await backups())['lag_ms'] as number) > 2_000, 'backups lagging', 20_000, 250);
    const requested = world.sim.requests.filter((r) => r.path.endsWith('/backups')).length;
    await app.stop();
    // Before: caught_up true and lag_ms 0 from its first cycle on, while nothing was read.
    expect(requested).toBe(0);
    expect(seen).toMatchObject({ caught_up: false, last_success_at: null });
  });

  it('shows its progress per source instead of "not polled yet"', async () => {
    world = await startWorld({ sim: { sites: 12 }, config: { server: { listen: '127.0.0.1:0' }, api: { max_requests_per_second: 4, max_concurrency: 1 } } });
    const app = await world.app();
    await app.start();
    await waitFor(() => world!.sim.requests.filter((r) => r.path.endsWith('/health')).length >= 3, 'three health polls', 15_000);
    const body = (await (await fetch(`${app.serverUrl}/api/sources`)).json()) as { data: Array<Record<string, unknown>>; budget: Record<string, unknown> };
    await app.stop();
    const health = body.data.find((s) => s['name'] === 'health')!;
    expect(health['caught_up']).toBe(false);
    expect(health['progress']).toMatchObject({ total: 12 });
    expect((health['progress'] as { done: number }).done).toBeGreaterThanOrEqual(2);
    expect(health['priority']).toBe('critical');
    expect(body.budget).toMatchObject({ sites: 12, allowed_per_hour: 14_400 });
  });
});
