import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type CycleSummary, type WorkClaims } from '../src/scheduler/scheduler.js';
import { healthSource, sitesSource } from '../src/sources/registry.js';
import { startWorld, type World } from './harness.js';
import { waitFor as waitUntil } from './receiver.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

/** A scheduler on a real app's poller, with intervals short enough for a test; its staggered waits are recorded. */
async function schedulerFor(w: World, everyMs: number, spreadFraction = 0.5, concurrency = 4): Promise<{ scheduler: Scheduler; cycles: CycleSummary[]; waits: number[] }> {
  const app = await w.app();
  const waits: number[] = [];
  const scheduler = new Scheduler({
    poller: app.poller,
    sources: [
      { def: sitesSource, everyMs: 60_000 },
      { def: healthSource, everyMs },
    ],
    sites: 'all',
    concurrency,
    now: Date.now,
    log: app.log,
    spreadFraction,
    sleep: (ms, signal) => {
      waits.push(ms);
      return new Promise((resolve) => {
        const t = setTimeout(resolve, ms);
        signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
      });
    },
  });
  const cycles: CycleSummary[] = [];
  scheduler.on('cycle:end', (c) => cycles.push(c));
  return { scheduler, cycles, waits };
}

/** Wait until `cond` holds (a cycle ended, a request arrived). */
function waitFor(cond: () => boolean, ms = 8000): Promise<void> {
  return waitUntil(cond, 'the scheduler', ms);
}

/**
 * Over six sites, a scheduler whose work claims are `claims`: run until its first health
 * cycle has ended, then stopped.
 */
async function oneHealthCycle(claims: WorkClaims, concurrency: number): Promise<void> {
  world = await startWorld({ sim: { sites: 6 } });
  const app = await world.app();
  const scheduler = new Scheduler({
    poller: app.poller,
    sources: [
      { def: sitesSource, everyMs: 60_000 },
      { def: healthSource, everyMs: 60_000 },
    ],
    sites: 'all',
    concurrency,
    now: Date.now,
    log: app.log,
    claims,
  });
  const cycles: CycleSummary[] = [];
  scheduler.on('cycle:end', (c) => cycles.push(c));
  scheduler.start();
  await waitFor(() => cycles.some((c) => c.source === 'health'));
  await scheduler.stop();
}

describe('the scheduler', () => {
  it('runs the site list first and catches up at once after a start, then spreads later cycles across the interval', async () => {
    world = await startWorld({ sim: { sites: 6 } });
    const { scheduler, cycles, waits } = await schedulerFor(world, 2_000);
    const order: string[] = [];
    // Waits recorded when the second health cycle starts: all of them were the catch-up's.
    let catchUpWaits: number[] | null = null;
    scheduler.on('cycle:start', (c) => {
      if (c.source === 'health' && order.includes('health')) catchUpWaits ??= [...waits];
      order.push(c.source);
    });
    scheduler.start();
    await waitFor(() => catchUpWaits !== null);
    // The catch-up: every site's health at once, no staggered wait.
    expect(catchUpWaits).toEqual([]);
    const health = (): Array<{ path: string; at: string }> => world.sim.requests.filter((r) => r.path.endsWith('/health'));
    // Two cycles' polls. On a loaded machine a catch-up poll can still be running when the
    // second cycle reaches its site, which then passes it over (a site is never polled twice
    // at once) and the third cycle polls it: wait for the polls, not only for two cycles.
    await waitFor(() => cycles.filter((c) => c.source === 'health').length >= 2 && health().length >= 12, 15_000);
    await scheduler.stop();
    expect(order.slice(0, 2)).toEqual(['sites', 'health']);
    const polls = health();
    // The catch-up polled every site once, before any later poll.
    expect(new Set(polls.slice(0, 6).map((r) => r.path)).size).toBe(6);
    const times = polls.map((r) => Date.parse(r.at));
    // The second cycle waited for its slots: 6 sites over half of 2 s, about 167 ms apart,
    // so its first and last polls are ≥ 700 ms apart.
    expect(waits.length).toBeGreaterThanOrEqual(5);
    const second = times.slice(6, 12);
    expect(Math.max(...second) - Math.min(...second)).toBeGreaterThanOrEqual(700);
  });

  it('never holds the other sites for one slow site, and never polls one site twice at once', async () => {
    world = await startWorld({ sim: { sites: 3 } });
    world.sim.faults.add({ path: '^/sites/2/health$', kind: 'latency', ms: 2_500 });
    const { scheduler, cycles } = await schedulerFor(world, 1_000, 0);
    scheduler.start();
    await waitFor(() => cycles.filter((c) => c.source === 'health').length >= 3, 10_000);
    await scheduler.stop();
    const health = world.sim.requests.filter((r) => r.path.endsWith('/health'));
    const times = (site: number): number[] => health.filter((r) => r.path === `/api/v1/sites/${site}/health`).map((r) => Date.parse(r.at));
    const slow = times(2);
    // Site 1 was polled again (the next cycle ran) while site 2's first reply was still coming.
    expect(times(1).filter((t) => t < slow[0]! + 2_500).length).toBeGreaterThanOrEqual(2);
    // Site 2 is passed over while its poll runs: its polls never overlap.
    for (let i = 1; i < slow.length; i++) expect(slow[i]! - slow[i - 1]!).toBeGreaterThanOrEqual(2_400);
  });

  it('starts the next cycle of a late source as soon as the last one has handed out its polls, never skipping one', async () => {
    world = await startWorld({ sim: { sites: 4 } });
    world.sim.faults.add({ path: '^/sites/\\d+/health$', kind: 'latency', ms: 400 });
    // One poll at a time: a cycle of 4 sites takes about 1.6 s against an interval of 1 s.
    const { scheduler, cycles } = await schedulerFor(world, 1_000, 0, 1);
    const late: number[] = [];
    scheduler.on('cycle:late', (c) => c.source === 'health' && late.push(c.lateMs));
    scheduler.start();
    await waitFor(() => cycles.filter((c) => c.source === 'health').length >= 3, 12_000);
    await scheduler.stop();
    expect(late.length).toBeGreaterThanOrEqual(1);
    const times = world.sim.requests.filter((r) => r.path.endsWith('/health')).map((r) => Date.parse(r.at));
    // Back to back: no gap of an interval between two polls (a skipped cycle would leave one).
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeLessThan(1_000);
  });

  it('on stop, waits for polls in flight and starts no new ones', async () => {
    world = await startWorld({ sim: { sites: 4 } });
    world.sim.faults.add({ path: '^/sites/\\d+/health$', kind: 'latency', ms: 400 });
    const { scheduler, cycles } = await schedulerFor(world, 4_000, 0.5, 1);
    scheduler.start();
    await waitFor(() => world.sim.requests.some((r) => r.path.endsWith('/health')));
    await scheduler.stop();
    const afterStop = world.sim.requests.length;
    const health = cycles.find((c) => c.source === 'health')!;
    // The poll in flight finished (its outcome is recorded); the rest never started.
    expect(health.outcomes.length).toBeGreaterThanOrEqual(1);
    expect(health.outcomes.length).toBeLessThan(4);
    expect(health.outcomes.every((o) => o.status !== 'failed')).toBe(true);
    await new Promise((r) => setTimeout(r, 1500));
    expect(world.sim.requests.length).toBe(afterStop);
    expect(scheduler.running).toBe(false);
  });

  it('turns missed heartbeats (a blocked event loop) into one log line, never raw node-cron text on stdout', async () => {
    world = await startWorld({ sim: { sites: 1 } });
    const { scheduler } = await schedulerFor(world, 60_000);
    const printed: string[] = [];
    const writeOut = process.stdout.write.bind(process.stdout);
    const warn = console.warn;
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      printed.push(String(chunk));
      return writeOut(chunk, ...rest);
    }) as typeof process.stdout.write;
    console.warn = (...args: unknown[]) => void printed.push(args.map(String).join(' '));
    try {
      scheduler.start();
      await new Promise((r) => setTimeout(r, 1200));
      // Block the event loop for several heartbeats, as a huge commit would.
      const until = Date.now() + 3500;
      while (Date.now() < until) {
        /* busy */
      }
      await waitFor(() => world.logs.text.includes('scheduler heartbeat missed'), 5000);
    } finally {
      process.stdout.write = writeOut;
      console.warn = warn;
      await scheduler.stop();
    }
    expect(printed.filter((p) => p.includes('NODE-CRON') || p.includes('missed execution'))).toEqual([]);
    const lines = world.logs.lines.filter((l) => l.includes('scheduler heartbeat missed'));
    expect(lines).toHaveLength(1);
    expect((JSON.parse(lines[0]!) as { missed: number }).missed).toBeGreaterThanOrEqual(1);
  });

  it('stops a cycle\'s polls once its claim is no longer held (a member paused past its lease), and says so', async () => {
    let asked = 0;
    await oneHealthCycle(
      {
        claim: (_source, _dueAt, entities) => entities,
        // Held for the first two polls of the health cycle, then lost.
        stillHeld: (source) => source !== 'health' || ++asked <= 2,
      },
      1,
    );
    expect(world.sim.requests.filter((r) => r.path.endsWith('/health'))).toHaveLength(2);
    expect(world.logs.text).toContain('the cluster lease ran out during this cycle');
  });

  it('polls only the entities its work claims take (the seam a cluster fills), and asks once per due cycle', async () => {
    const asked: Array<{ source: string; entities: number }> = [];
    await oneHealthCycle(
      {
        claim: (source, _dueAt, entities) => {
          asked.push({ source, entities: entities.length });
          // Another instance holds the even sites.
          return entities.filter((e) => e === null || e.id % 2 === 1);
        },
      },
      2,
    );
    const polled = world.sim.requests.filter((r) => r.path.endsWith('/health')).map((r) => Number(r.path.split('/')[4]));
    expect(polled.sort()).toEqual([1, 3, 5]);
    expect(asked).toEqual([
      { source: 'sites', entities: 1 },
      { source: 'health', entities: 6 },
    ]);
  });
});
