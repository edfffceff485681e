/**
 * The request budget of a cluster on a real PostgreSQL (docs/cluster.md): the members share
 * api.max_requests_per_second and a 429's pause through the database, so two instances
 * together keep to the configured pace, and a Retry-After seen by one holds the other.
 * (One process's budget: budget.test.ts.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SharedBudget } from '../src/cluster/shared-budget.js';
import type { App } from '../src/main.js';
import { startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** Read one site's health from `app`'s API client again and again until `until`, `lanes` at a time. */
async function hammer(app: App, until: number, lanes: number): Promise<void> {
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (Date.now() < until) await app.client.get('/sites/1/health').catch(() => undefined);
    }),
  );
}

describe('the request budget of a cluster', () => {
  it('holds two instances together to api.max_requests_per_second, not to twice it', async () => {
    const rate = 20;
    world = await startWorld({ engine: 'postgres', config: { api: { max_requests_per_second: rate, max_concurrency: 4 }, cluster: { lease: '5s' } } });
    const a = await world.app({ cluster: { instance: 'a' } });
    const b = await world.app({ cluster: { instance: 'b' } });
    expect(a.client.budget).toBeInstanceOf(SharedBudget);
    world.sim.clearRequests();
    const started = Date.now();
    const seconds = 3;
    await Promise.all([hammer(a, started + seconds * 1000, 4), hammer(b, started + seconds * 1000, 4)]);
    const elapsed = (Date.now() - started) / 1000;
    const sent = world.sim.requests.length;
    // Each alone would send `rate` a second (2 × rate together); shared, about `rate`. A
    // generous bound: the last lanes finish their request after the deadline, and a grant
    // may reach a little ahead.
    expect(sent).toBeLessThanOrEqual(Math.ceil(rate * elapsed * 1.4));
    // Both were served (neither starved the other), and the pace was used, not wasted.
    const from = (app: App) => app.client.budget.state();
    expect(from(a).waiting + from(b).waiting).toBe(0);
    expect(sent).toBeGreaterThanOrEqual(Math.floor(rate * seconds * 0.6));
    const rows = await world.query<{ rate: number }>("SELECT rate FROM cluster_budget WHERE name = 'api'");
    expect(rows.map((r) => r.rate)).toEqual([rate]);
  });

  it('pauses every instance when one of them is answered 429 with Retry-After', async () => {
    world = await startWorld({ engine: 'postgres', sim: { sites: 3 }, config: { api: { max_requests_per_second: 50, max_concurrency: 2, retries: 0 }, cluster: { lease: '5s' } } });
    const a = await world.app({ cluster: { instance: 'a' } });
    const b = await world.app({ cluster: { instance: 'b' } });
    // b keeps asking all along; a alone is answered 429 with Retry-After: 2.
    const busy = hammer(b, Date.now() + 4_000, 2);
    await new Promise((r) => setTimeout(r, 500));
    world.sim.faults.add({ path: '^/sites/2/health$', kind: 'rate_limit', retry_after: 2, times: 1 });
    await expect(a.client.get('/sites/2/health')).rejects.toMatchObject({ code: 'rate_limited' });
    // The shared pace is lowered for the whole cluster (and stays so while nobody sends).
    const rate = async () => (await world!.query<{ rate: number }>("SELECT rate FROM cluster_budget WHERE name = 'api'"))[0]!.rate;
    const deadline = Date.now() + 1_000;
    while ((await rate()) >= 50 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await rate()).toBeLessThan(50);
    await busy;
    const log = world.sim.requests;
    const limited = log.find((r) => r.status === 429)!;
    const t = Date.parse(limited.at);
    const fromB = log.filter((r) => r.path === '/api/v1/sites/1/health').map((r) => Date.parse(r.at) - t);
    expect(fromB.filter((ms) => ms < 0).length).toBeGreaterThan(5);
    // b never saw a 429, yet sent nothing during a's pause (past the moment the news takes
    // to reach it: the database's NOTIFY), and went on after it.
    expect(b.client.budget.state().rateLimited).toBe(0);
    expect(fromB.filter((ms) => ms > 250 && ms < 1_900)).toEqual([]);
    expect(fromB.filter((ms) => ms >= 1_900).length).toBeGreaterThan(5);
  });
});
