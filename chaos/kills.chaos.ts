/**
 * Kills: the daemon (`hostwatch run`, a real process) is SIGKILLed at random moments, again
 * and again, while the world keeps changing; then it runs cleanly until everything is
 * delivered and is stopped with SIGTERM. Nothing may be lost, nothing invented.
 */
import { afterEach, expect, it } from 'vitest';
import { kill, runCli, startCli } from '../test/daemon-process.js';
import { limits, record, secondsSince, seeded } from './figures.js';
import { catchUpAndStop, chaosWorld, closeWorlds, tally, truthOf } from './world.js';

afterEach(closeWorlds);

it(`loses and invents nothing when the daemon is SIGKILLed ${limits.kills} times at random moments while the world changes`, async () => {
  const rand = seeded(limits.seed);
  const w = await chaosWorld({ sites: limits.kills + 2 });
  await runCli(['poll', '--once', '-c', w.configPath], 60_000);
  w.mark = w.sim.world.history.length;
  const started = Date.now();
  let killed = 0;
  for (let k = 1; k <= limits.kills; k++) {
    // Each round changes things no round changed before, so the truth is exact: a site
    // goes offline, it gets a failed backup, and every third round a usage alarm.
    w.sim.world.setHealth(k, { status: 'offline' });
    w.sim.world.addBackup(k, { state: rand.next() < 0.5 ? 'Error' : 'Ok' });
    if (k % 3 === 0) w.sim.world.setUsage(k, { frozen: true });
    const daemon = startCli(['run', '-c', w.configPath]);
    await new Promise((r) => setTimeout(r, rand.int(200, 2_500)));
    await kill(daemon);
    killed++;
  }
  const truth = truthOf(w);
  const end = await catchUpAndStop(w, truth, startCli(['run', '-c', w.configPath]), 120_000);
  const t = tally(w, truth);
  record('kills (SIGKILL of `hostwatch run`)', {
    'SIGKILLs': killed,
    'world changes (events expected)': t.expected,
    'events delivered': t.delivered,
    lost: t.lost,
    invented: t.invented,
    'redeliveries (same id, at-least-once)': t.duplicates,
    'bad signatures or CloudEvents': t.malformed,
    'dead-lettered': t.deadLettered,
    'catch-up after the last kill (s)': end.caughtUpS,
    'SIGTERM to exit (s)': end.stopS,
    'exit code after SIGTERM': end.code,
    'scenario duration (s)': secondsSince(started),
  });
  expect({ lost: t.lostList, invented: t.inventedList }).toEqual({ lost: [], invented: [] });
  expect(end.caughtUp).toBe(true);
  expect(t.malformed).toBe(0);
  expect(t.deadLettered).toBe(0);
  expect(end.code).toBe(0);
});
