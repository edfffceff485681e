/**
 * SIGTERM ends the daemon within the stop timeout the docs recommend: no new send starts
 * once it is asked to stop (a backlog to a slow receiver is not worked off first), what is
 * in flight may finish within a bound, and nothing is lost: unsent rows stay pending and
 * go out after the next start, with the same ids.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { rows, type World } from './harness.js';
import { closeHookedWorlds, hookedWorld } from './hooked-world.js';
import { waitFor, type Receiver } from './receiver.js';

let hook: Receiver | undefined;
afterEach(closeHookedWorlds);

const SITES = 40;
const CONCURRENCY = 4;

const until = (what: string, cond: () => boolean): Promise<void> => waitFor(cond, what, 20_000, 20);

/** A daemon whose first cycle finds every site offline: SITES alerts for one webhook. */
async function backlog(answerDelayMs: number | 'hold', timeout = '5s'): Promise<World> {
  const h = await hookedWorld({
    sites: SITES,
    answer: () => (answerDelayMs === 'hold' ? 'hold' : { status: 204, delayMs: answerDelayMs }),
    timeout,
    // Inhibition and incidents as configured by default: a stop must not care.
    config: { delivery: { concurrency: CONCURRENCY }, sources: { rank: { enabled: false } }, inhibit: null, incidents: null },
  });
  hook = h.hook;
  for (let id = 1; id <= SITES; id++) h.w.sim.world.setHealth(id, { status: 'offline' });
  return h.w;
}

const offline = (w: World): number => rows<{ n: number }>(w, "SELECT count(*) AS n FROM events WHERE type = 'hostwatch.site.offline'")[0]!.n;
const total = (w: World): number => rows<{ n: number }>(w, 'SELECT count(*) AS n FROM outbox')[0]!.n;
const pending = (w: World): number => rows<{ n: number }>(w, "SELECT count(*) AS n FROM outbox WHERE state = 'pending'")[0]!.n;

/** Nothing is lost: a daemon started again (with the receiver answering) delivers every row, with the same ids. */
async function restartDeliversEverything(w: World): Promise<void> {
  hook!.respond(() => ({ status: 204 }));
  const again = await w.app();
  await again.start();
  await until('every event delivered', () => hook!.acceptedIds().size === total(w));
  await again.stop();
  expect(pending(w)).toBe(0);
  const ids = rows<{ id: string }>(w, 'SELECT event_id AS id FROM outbox').map((r) => r.id);
  expect([...hook!.acceptedIds()].sort()).toEqual(ids.sort());
}

describe('stopping with a backlog for a slow receiver', () => {
  it('starts no new send once asked to stop; the rows not sent stay pending and are delivered after the next start', async () => {
    const w = await backlog(2_000);
    const app = await w.app();
    await app.start();
    await until('every alert stored and the first sends', () => offline(w) === SITES && hook!.requests.length >= CONCURRENCY);
    const asked = Date.now();
    const before = hook!.requests.length;
    await app.stop();
    const after = hook!.requests.filter((r) => r.at >= asked).length;
    // Only requests already on their way when stop was asked may still arrive.
    expect(after).toBeLessThanOrEqual(CONCURRENCY);
    expect(hook!.requests.length).toBeLessThan(SITES / 2);
    // Every row is delivered (each once) or still pending: none dead, none lost.
    expect(rows(w, "SELECT state, count(*) AS n FROM outbox GROUP BY state")).toEqual([
      { state: 'delivered', n: hook!.acceptedIds().size },
      { state: 'pending', n: total(w) - hook!.acceptedIds().size },
    ]);
    expect(hook!.accepted()).toHaveLength(hook!.acceptedIds().size);
    expect(before).toBeGreaterThanOrEqual(CONCURRENCY);
    await restartDeliversEverything(w);
  });

  it('closes after the stop timeout even when a receiver never answers, and delivers that row after the next start', async () => {
    const w = await backlog('hold', '1h');
    const app = await w.app({}, { stopTimeoutMs: 500 });
    await app.start();
    await until('every alert stored and a send held by the receiver', () => offline(w) === SITES && hook!.requests.length >= 1);
    // Without the bound this waits for the channel timeout (an hour).
    await app.stop();
    expect(w.logs.text).toContain('stop timeout reached');
    expect(pending(w)).toBe(total(w));
    await restartDeliversEverything(w);
  });
});
