/**
 * SIGTERM with a backlog: a running daemon (a real process) has a few hundred alerts due
 * for a receiver that takes 1.5 s per request when it is asked to stop. It must exit well
 * inside the 60 s stop timeout the service files give, and the next start must deliver
 * everything it left.
 */
import { afterEach, expect, it } from 'vitest';
import { runCli, startCli } from '../test/daemon-process.js';
import { waitFor } from '../test/receiver.js';
import { record, secondsSince } from './figures.js';
import { catchUpAndStop, chaosWorld, closeWorlds, tally, truthOf } from './world.js';
import BetterSqlite3 from 'better-sqlite3';

afterEach(closeWorlds);

const SITES = 300;

it(`exits within seconds of SIGTERM with ${SITES} alerts due for a slow receiver, and delivers them after the next start`, async () => {
  const w = await chaosWorld({ sites: SITES, config: { incidents: { enabled: false } } });
  await runCli(['poll', '--once', '-c', w.configPath], 120_000);
  w.mark = w.sim.world.history.length;
  for (let id = 1; id <= SITES; id++) w.sim.world.setHealth(id, { status: 'offline' });
  const truth = truthOf(w);
  w.hook.respond(() => ({ status: 204, delayMs: 1_500 }));
  const daemon = startCli(['run', '-c', w.configPath]);
  const committed = (): number => {
    const db = new BetterSqlite3(w.dbPath, { readonly: true, fileMustExist: true });
    try {
      return (db.prepare("SELECT count(*) AS n FROM outbox WHERE state = 'pending'").get() as { n: number }).n;
    } finally {
      db.close();
    }
  };
  await waitFor(() => committed() >= SITES * 0.8 && w.hook.requests.length >= 8, 'a backlog and the first sends', 60_000, 100);
  const due = committed();
  const asked = Date.now();
  daemon.proc.kill('SIGTERM');
  const { code } = await daemon.exited;
  const stopS = secondsSince(asked);
  const sentAfter = w.hook.requests.filter((r) => r.at > asked).length;
  w.hook.respond(() => ({ status: 204 }));
  const end = await catchUpAndStop(w, truth, startCli(['run', '-c', w.configPath]), 120_000);
  const t = tally(w, truth);
  record('SIGTERM with a backlog (`hostwatch run`, receiver 1.5 s per request)', {
    'alerts due when SIGTERM came': due,
    'SIGTERM to exit (s)': stopS,
    'exit code': code ?? 'signal',
    'requests arriving after SIGTERM (sent before it)': sentAfter,
    'events expected': t.expected,
    'delivered after the next start': t.delivered,
    lost: t.lost,
    invented: t.invented,
  });
  expect(code).toBe(0);
  expect(stopS).toBeLessThan(30);
  expect(end.caughtUp).toBe(true);
  expect({ lost: t.lostList, invented: t.inventedList }).toEqual({ lost: [], invented: [] });
});
