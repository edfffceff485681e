import { afterEach, describe, expect, it } from 'vitest';
import { Scheduler, type CycleSummary } from '../src/scheduler/scheduler.js';
import { healthSource, sitesSource } from '../src/sources/registry.js';
import { startWorld, type World } from './harness.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

/** A scheduler on a real app's poller, with intervals short enough for a test. */
async function schedulerFor(w: World, everyMs: number, spreadFraction = 0.5): Promise<{ scheduler: Scheduler; cycles: CycleSummary[] }> {
  const app = await w.app();
  const scheduler = new Scheduler({
    poller: app.poller,
    sources: [
      { def: sitesSource, everyMs: 60_000 },
      { def: healthSource, everyMs },
    ],
    sites: 'all',
    concurrency: 4,
    now: Date.now,
    log: app.log,
    spreadFraction,
  });
  const cycles: CycleSummary[] = [];
  scheduler.on('cycle:end', (c) => cycles.push(c));
  return { scheduler, cycles };
}

function waitFor(cond: () => boolean, ms = 8000): Promise<void> {
  const until = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const t = setInterval(() => {
      if (cond()) {
        clearInterval(t);
        resolve();
      } else if (Date.now() > until) {
        clearInterval(t);
        reject(new Error('timed out waiting'));
      }
    }, 20);
  });
}

describe('the scheduler', () => {
  it('runs the site list first, then spreads per-site polls across the interval instead of a burst', async () => {
    world = await startWorld({ sim: { sites: 6 } });
    const { scheduler, cycles } = await schedulerFor(world, 2_000);
    const order: string[] = [];
    scheduler.on('cycle:start', (c) => order.push(c.source));
    scheduler.start();
    await waitFor(() => cycles.some((c) => c.source === 'health'));
    await scheduler.stop();
    expect(order.slice(0, 2)).toEqual(['sites', 'health']);
    const times = world.sim.requests.filter((r) => r.path.endsWith('/health')).map((r) => Date.parse(r.at));
    expect(times).toHaveLength(6);
    // 6 sites over half of 2 s: about 167 ms apart, so the first and last are ≥ 700 ms apart.
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(700);
  });

  it('never runs two cycles of a source at once, and reports the skipped one', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    world.sim.faults.add({ path: '^/sites/\\d+/health$', kind: 'latency', ms: 1_500 });
    const { scheduler, cycles } = await schedulerFor(world, 1_000, 0);
    const skipped: string[] = [];
    let running = 0;
    let maxRunning = 0;
    scheduler.on('cycle:start', (c) => {
      if (c.source !== 'health') return;
      running++;
      maxRunning = Math.max(maxRunning, running);
    });
    scheduler.on('cycle:end', (c) => {
      if (c.source === 'health') running--;
    });
    scheduler.on('cycle:skipped', (c) => skipped.push(c.source));
    scheduler.start();
    await waitFor(() => cycles.filter((c) => c.source === 'health').length >= 2);
    await scheduler.stop();
    expect(maxRunning).toBe(1);
    expect(skipped).toContain('health');
  });

  it('on stop, waits for polls in flight and starts no new ones', async () => {
    world = await startWorld({ sim: { sites: 4 } });
    world.sim.faults.add({ path: '^/sites/\\d+/health$', kind: 'latency', ms: 400 });
    const { scheduler, cycles } = await schedulerFor(world, 4_000);
    scheduler.start();
    await waitFor(() => world.sim.requests.some((r) => r.path.endsWith('/health')));
    await scheduler.stop();
    const afterStop = world.sim.requests.length;
    const health = cycles.find((c) => c.source === 'health')!;
    // The poll in flight finished (its outcome is recorded); the staggered rest never started.
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
});
