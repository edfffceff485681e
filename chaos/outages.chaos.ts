/**
 * Outages: for CHAOS_SECONDS, every half second one random thing happens to a running
 * daemon (a real process): the world changes, the API fails in one of the ways a real
 * panel or network does (5xx, 429, a reset, a cut-off body, a slow answer, on one endpoint
 * or on all), the webhook receiver goes down or hangs, or the faults clear. Then
 * everything heals and the daemon catches up. A failed fetch must never become a change,
 * and nothing may be lost.
 */
import { afterEach, expect, it } from 'vitest';
import type { FaultSpec } from '../src/simulator/index.js';
import { runCli, startCli } from '../test/daemon-process.js';
import { limits, record, seeded } from './figures.js';
import { catchUpAndStop, chaosWorld, closeWorlds, tally, truthOf } from './world.js';

afterEach(closeWorlds);

const PATHS = ['^/sites$', '^/sites/\\d+/health$', '^/sites/\\d+/usage$', '^/sites/\\d+/backups$', '^/jobs$', '.*'];
const FAULTS: readonly Omit<FaultSpec, 'path'>[] = [
  { kind: 'status', status: 500 },
  { kind: 'status', status: 502 },
  { kind: 'status', status: 503 },
  { kind: 'rate_limit', retry_after: 1 },
  { kind: 'reset' },
  { kind: 'truncated' },
  { kind: 'latency', ms: 2_500 },
  { kind: 'status', status: 500, page: 2 },
];

it(`invents no change from ${limits.seconds} s of API failures and receiver outages, and loses no event`, async () => {
  const rand = seeded(limits.seed + 1);
  const sites = 40;
  const w = await chaosWorld({ sites, config: { sites: 'all' } });
  await runCli(['poll', '--once', '-c', w.configPath], 60_000);
  w.mark = w.sim.world.history.length;
  let down = false;
  w.hook.respond(() => (down ? (rand.next() < 0.3 ? { status: 200, delayMs: 6_000 } : { status: 503 }) : { status: 204 }));
  const daemon = startCli(['run', '-c', w.configPath]);
  const counts = { changes: 0, faults: 0, clears: 0, receiverOutages: 0 };
  let nextSite = 1;
  const started = Date.now();
  while (Date.now() - started < limits.seconds * 1_000) {
    const roll = rand.next();
    if (roll < 0.3 && nextSite <= sites) {
      // A change no earlier step made: the truth stays exact.
      const site = nextSite++;
      if (rand.next() < 0.5) w.sim.world.setHealth(site, { status: 'offline' });
      else w.sim.world.addBackup(site, { state: 'Error' });
      counts.changes++;
    } else if (roll < 0.7) {
      w.sim.faults.add({ ...rand.pick(FAULTS), path: rand.pick(PATHS), times: rand.int(1, 40) });
      counts.faults++;
    } else if (roll < 0.85) {
      down = !down;
      if (down) counts.receiverOutages++;
    } else {
      w.sim.faults.clear();
      counts.clears++;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  w.sim.faults.clear();
  down = false;
  const truth = truthOf(w);
  const end = await catchUpAndStop(w, truth, daemon, 180_000);
  const t = tally(w, truth);
  record('outages (API faults and receiver outages under `hostwatch run`)', {
    'seconds of chaos': limits.seconds,
    'API faults injected': counts.faults,
    'fault sets cleared': counts.clears,
    'receiver outages (503s or 6 s answers)': counts.receiverOutages,
    'world changes (events expected)': t.expected,
    'events delivered': t.delivered,
    lost: t.lost,
    invented: t.invented,
    'redeliveries (same id, at-least-once)': t.duplicates,
    'operator events (api.*, source.*)': t.operator,
    'dead-lettered': t.deadLettered,
    'catch-up once healed (s)': end.caughtUpS,
    'SIGTERM to exit (s)': end.stopS,
    'exit code after SIGTERM': end.code,
  });
  expect({ lost: t.lostList, invented: t.inventedList }).toEqual({ lost: [], invented: [] });
  expect(end.caughtUp).toBe(true);
  expect(t.malformed).toBe(0);
  expect(t.deadLettered).toBe(0);
  expect(end.code).toBe(0);
});
