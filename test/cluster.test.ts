/**
 * The cluster on a real PostgreSQL (docs/cluster.md): membership and its leases judged on
 * the database's clock, the timers owned by one member, outbox rows claimed by one member
 * at a time and recorded only under their claim token, the live feed woken through
 * LISTEN/NOTIFY, /readyz and the metrics of a member, `hostwatch cluster status`, and the
 * refusal of `cluster:` with SQLite. (Real processes killed and paused: cluster-chaos.test.ts.)
 */
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { clusterClaims } from '../src/cluster/delivery-claims.js';
import { clusterWorkClaims, shareOf } from '../src/cluster/work-claims.js';
import { Membership, TIMERS_LEASE } from '../src/cluster/membership.js';
import { clusterStatusLines, readClusterStatus } from '../src/cluster/status.js';
import { configFingerprint } from '../src/cluster/cluster.js';
import { ClusterRepo } from '../src/store/cluster-repo.js';
import { openStore, type Store } from '../src/store/db.js';
import { toEventRow } from '../src/store/events-repo.js';
import { repos } from '../src/store/repos.js';
import { statement } from '../src/store/sql.js';
import { parseConfig } from '../src/config/parse.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { siteEvent } from './events-fixture.js';
import { startWorld } from './harness.js';
import { freshStorage } from './pg.js';
import { waitFor } from './receiver.js';
import { hostwatch } from './run-cli.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

const ATTEMPTS = statement<{ id: number }, { n: number }>((qb, p) =>
  qb.selectFrom('delivery_attempts').select((eb) => eb.fn.countAll<number>().as('n')).where('outbox_id', '=', p.id),
);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Wait `ms` while `m` renews its lease every 200 ms (a member that keeps running). */
async function keepBeating(m: Membership, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    await m.beat();
    await sleep(200);
  }
}

async function pgStore(): Promise<{ store: Store; url: string }> {
  const db = await freshStorage('postgres');
  cleanups.push(db.cleanup);
  const store = await openStore(db.storage, { now: Date.now });
  cleanups.push(() => store.close());
  return { store, url: (db.storage as { url: string }).url };
}

/** A member over `store` whose heartbeats the test makes by hand, with a clock it moves. */
function member(
  store: Store,
  name: string,
  leaseMs: number,
  o: { pid?: number; alive?: (pid: number) => boolean; instance?: string; channels?: string[]; config?: string } = {},
): { m: Membership; clock: { t: number } } {
  const clock = { t: 0 };
  let n = 0;
  const m = new Membership({
    repo: new ClusterRepo(store),
    instance: o.instance ?? name,
    pid: o.pid ?? 1,
    pidAlive: o.alive ?? (() => true),
    host: 'test',
    leaseMs,
    leases: [TIMERS_LEASE],
    monotonic: () => clock.t,
    newId: () => `${name}#${++n}`,
    log: pino({ level: 'silent' }),
    scrub: (s) => s,
    channels: o.channels,
    configHash: o.config,
  });
  return { m, clock };
}

describe('cluster membership on PostgreSQL', () => {
  it('gives the timers to exactly one live member, and to another once its lease has run out on the database clock', async () => {
    const { store } = await pgStore();
    const a = member(store, 'a', 1_000);
    const b = member(store, 'b', 1_000);
    await a.m.beat();
    await b.m.beat();
    expect([a.m.holds(TIMERS_LEASE), b.m.holds(TIMERS_LEASE)]).toEqual([true, false]);
    // b renews while a is silent (paused): nothing moves while a's lease runs.
    await b.m.beat();
    expect(b.m.holds(TIMERS_LEASE)).toBe(false);
    await keepBeating(b.m, 1_200);
    await b.m.beat();
    expect(b.m.holds(TIMERS_LEASE)).toBe(true);
    // a wakes up: its own clock says its lease ran out, so it holds nothing before it beats...
    a.clock.t += 1_200;
    expect(a.m.live()).toBe(false);
    expect(a.m.holds(TIMERS_LEASE)).toBe(false);
    // ...and its renewal is refused: it joins again under a new id, without the timers.
    const lost: string[] = [];
    a.m.on('lost', (e) => lost.push(e.id));
    await a.m.beat();
    expect(lost).toEqual(['a#1']);
    expect(a.m.id).toBe('a#2');
    expect(a.m.live()).toBe(true);
    expect(a.m.holds(TIMERS_LEASE)).toBe(false);
    const leases = await new ClusterRepo(store).leases();
    expect(leases).toEqual([expect.objectContaining({ name: 'timers', holder: 'b#1', token: 2 })]);
  });

  it('hands what a member held to the others at once when it leaves cleanly', async () => {
    const { store } = await pgStore();
    const a = member(store, 'a', 30_000);
    const b = member(store, 'b', 30_000);
    await a.m.beat();
    await b.m.beat();
    expect(a.m.holds(TIMERS_LEASE)).toBe(true);
    await a.m.leave();
    await b.m.beat();
    expect(b.m.holds(TIMERS_LEASE)).toBe(true);
    const members = await new ClusterRepo(store).members(60_000);
    expect(members.map((m) => [m.instance, m.live, m.left_at !== null])).toEqual([
      ['a', false, true],
      ['b', true, false],
    ]);
  });
});

describe('a restart of an instance', () => {
  it('takes over at once from the earlier run of its name on its host when that process is gone, and leaves a live namesake alone', async () => {
    const { store } = await pgStore();
    const first = member(store, 'first', 30_000, { instance: 'web-1', pid: 4242 });
    await first.m.beat();
    expect(first.m.holds(TIMERS_LEASE)).toBe(true);
    // Started again while the first run's process still runs (a twin): nothing is taken.
    const twin = member(store, 'twin', 30_000, { instance: 'web-1', pid: 5151, alive: () => true });
    await twin.m.beat();
    expect(twin.m.holds(TIMERS_LEASE)).toBe(false);
    await twin.m.leave();
    // The first run was SIGKILLed (its pid is gone): the new run takes its work without waiting for the lease.
    const again = member(store, 'again', 30_000, { instance: 'web-1', pid: 6161, alive: (pid) => pid !== 4242 });
    await again.m.beat();
    expect(again.m.holds(TIMERS_LEASE)).toBe(true);
    const members = await new ClusterRepo(store).members(60_000);
    expect(members.filter((m) => m.live).map((m) => m.id)).toEqual(['again#1']);
    // `cluster status` tells the crashed run from the one that stopped cleanly.
    const r = repos(store);
    const status = await readClusterStatus(new ClusterRepo(store), r.events, r.snapshots, Date.now());
    const byId = new Map(status.members.map((m) => [m.member_id, m]));
    expect([byId.get('first#1'), byId.get('twin#1'), byId.get('again#1')].map((m) => [m?.state, m?.ended])).toEqual([
      ['dead', 'replaced'],
      ['left', 'stopped'],
      ['live', null],
    ]);
    const lines = clusterStatusLines(status).join('\n');
    expect(lines).toMatch(/web-1 +dead .*its process was gone; its next run took its work over .* ago .*\(member first#1\)/);
    expect(lines).toMatch(/web-1 +left .*left cleanly .*\(member twin#1\)/);
  });
});

describe('outbox claims on PostgreSQL', () => {
  async function queue(store: Store, n: number, channel = 'hooks'): Promise<void> {
    await store.transaction(async (tx) => {
      const r = repos(tx);
      for (let i = 0; i < n; i++) {
        const e = siteEvent(`claim-${channel}-${i}`, i + 1);
        await r.events.addEvent(toEventRow(e));
        await r.events.enqueue({ event_id: e.id, channel, state: 'pending', attempts: 0, next_attempt_at: 100, last_error: null, created_at: 50, updated_at: 50 });
      }
    });
  }

  it('hands a member only the rows of channels its config has, and those of a channel no live member has (to dead-letter)', async () => {
    const { store } = await pgStore();
    await queue(store, 2, 'hooks');
    await queue(store, 2, 'newch');
    await queue(store, 1, 'gone');
    // A rolling config change: b runs the new config with the channel `newch`, a not yet.
    const a = member(store, 'a', 30_000, { channels: ['hooks'], config: 'aaaaaaaaaaaa' });
    const b = member(store, 'b', 30_000, { channels: ['hooks', 'newch'], config: 'bbbbbbbbbbbb' });
    await a.m.beat();
    await b.m.beat();
    const byA = await clusterClaims(store, a.m, ['hooks']).due(1_000, 25, 25, [], []);
    // Before: a claimed the `newch` rows too, and dead-lettered them ("no longer configured").
    expect(byA.map((r) => r.channel).sort()).toEqual(['gone', 'hooks', 'hooks']);
    const byB = await clusterClaims(store, b.m, ['hooks', 'newch']).due(1_000, 25, 25, [], []);
    expect(byB.map((r) => r.channel)).toEqual(['newch', 'newch']);
    // `cluster status` shows each member's config, and that they differ.
    const lines = clusterStatusLines(await readClusterStatus(new ClusterRepo(store), repos(store).events, repos(store).snapshots, Date.now()));
    expect(lines.find((l) => l.includes(' a '))).toContain('config aaaaaaaaaaaa');
    expect(lines).toContain('configs differ: the live members run 2 different configs (expected during a rolling change; docs/cluster.md)');
  });

  it('are summed up by cluster status as nothing pending, rows due (and how late the oldest is), or rows that wait (and when the next is due)', async () => {
    const { store } = await pgStore();
    const outboxLine = async (now: number): Promise<string | undefined> =>
      clusterStatusLines(await readClusterStatus(new ClusterRepo(store), repos(store).events, repos(store).snapshots, now)).find((l) => l.startsWith('outbox:'));
    expect(await outboxLine(1_000)).toBe('outbox: nothing pending');
    await queue(store, 2);
    // Both rows are due at 100: before then they wait (a retry's backoff, a group's wait).
    expect(await outboxLine(50)).toBe('outbox: 2 pending, none due yet (the next in 0.1s)');
    expect(await outboxLine(5_100)).toBe('outbox: 2 pending, the oldest due 5.0s ago');
    const status = await readClusterStatus(new ClusterRepo(store), repos(store).events, repos(store).snapshots, 5_100);
    expect(status.outbox).toEqual({ pending: 2, oldest_due_lag_ms: 5_000, next_due_in_ms: 0 });
  });

  it('hands each due row to one member when two claim at the same moment', async () => {
    const { store } = await pgStore();
    await queue(store, 40);
    const a = member(store, 'a', 30_000);
    const b = member(store, 'b', 30_000);
    await a.m.beat();
    await b.m.beat();
    const [ra, rb] = await Promise.all([clusterClaims(store, a.m).due(1_000, 25, 25, [], []), clusterClaims(store, b.m).due(1_000, 25, 25, [], [])]);
    const ids = [...ra, ...rb].map((r) => r.id);
    expect(ids.length).toBe(40);
    expect(new Set(ids).size).toBe(40);
    expect(ra.every((r) => r.claimed_by === 'a#1') && rb.every((r) => r.claimed_by === 'b#1')).toBe(true);
    // Claimed rows are nobody else's while their member is live.
    expect(await clusterClaims(store, b.m).due(1_000, 100, 100, rb.map((r) => r.id), [])).toEqual([]);
  });

  it('lets another member take the rows of a member whose lease ran out, and refuses the first member\'s send and record', async () => {
    const { store } = await pgStore();
    await queue(store, 3);
    const a = member(store, 'a', 1_000);
    const b = member(store, 'b', 1_000);
    await a.m.beat();
    await b.m.beat();
    const claimsA = clusterClaims(store, a.m);
    const taken = await claimsA.due(1_000, 10, 10, [], []);
    expect(taken.length).toBe(3);
    expect(claimsA.maySend(taken)).toBe(true);
    // a is paused past its lease; b claims the rows under new tokens and records them sent.
    await keepBeating(b.m, 1_200);
    await b.m.beat();
    const claimsB = clusterClaims(store, b.m);
    const retaken = await claimsB.due(1_000, 10, 10, [], []);
    expect(retaken.map((r) => r.id)).toEqual(taken.map((r) => r.id));
    expect(retaken.every((r, i) => r.claim_token === taken[i]!.claim_token + 1)).toBe(true);
    const record = (row: (typeof taken)[number]) =>
      store.transaction((tx) =>
        repos(tx).events.recordAttempt(
          { id: row.id, state: 'delivered', attempts: 1, next_attempt_at: row.next_attempt_at, last_error: null, updated_at: 2_000, claim_token: row.claim_token },
          { outbox_id: row.id, attempt: 1, at: 2_000, outcome: 'delivered', status_code: 204, error: null, duration_ms: 3 },
        ),
      );
    expect(await record(retaken[0]!)).toBe(true);
    // a wakes: by its own clock its lease ran out, so it sends none of what it had claimed...
    a.clock.t += 1_200;
    expect(claimsA.maySend(taken)).toBe(false);
    // ...and even after it joined again (new id), its old claims are not its own.
    await a.m.beat();
    expect(a.m.live()).toBe(true);
    expect(claimsA.maySend(taken)).toBe(false);
    // A record made under the old claim (a send cut by the pause) is refused.
    expect(await record(taken[1]!)).toBe(false);
    const rows = await repos(store).events.outboxFor(taken[1]!.event_id);
    expect(rows[0]).toMatchObject({ state: 'pending', attempts: 0, claimed_by: 'b#1' });
    expect(await store.get(ATTEMPTS, { id: taken[1]!.id })).toEqual({ n: 0 });
  });
});

describe('a daemon on PostgreSQL as a cluster member', () => {
  it('joins as a live member, says so on /readyz, labels its metrics with its instance name, and owns the timers alone', async () => {
    const w = await startWorld({ engine: 'postgres', config: { server: { listen: '127.0.0.1:0' }, cluster: { instance: 'alpha', lease: '3s' } } });
    cleanups.push(() => w.close());
    const app = await w.app();
    await app.start();
    const ready = await request(`${app.serverUrl}/readyz`);
    const body = (await ready.body.json()) as { cluster: { member: boolean; instance: string; timers: boolean } };
    expect(body.cluster).toMatchObject({ member: true, instance: 'alpha', timers: true });
    const metrics = await (await request(`${app.serverUrl}/metrics`)).body.text();
    expect(metrics).toMatch(/hostwatch_cluster_member\{hostwatch_instance="alpha"\} 1/);
    expect(metrics).toMatch(/hostwatch_build_info\{[^}]*hostwatch_instance="alpha"/);
    // A second instance on the same database joins beside it (no refusal) and owns no timers.
    const beta = await w.app({ cluster: { instance: 'beta', lease: '3s' } });
    expect(beta.cluster?.membership.live()).toBe(true);
    expect(beta.cluster?.ownsTimers()).toBe(false);
    // The instances' one config as docs/cluster.md writes it: what differs per instance (its
    // name, its port on a shared host) comes from variables an operator's shell does not have.
    const configPath = join(w.dir, 'status.yaml');
    writeFileSync(configPath, w.yaml({ server: { listen: '127.0.0.1:${PORT}' }, cluster: { instance: '${HOSTWATCH_INSTANCE}' } }));
    const unset = ['PORT', 'HOSTWATCH_INSTANCE'];
    const out = await hostwatch(['cluster', 'status', '-c', configPath], { env: w.env, unset });
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/members: 2 live/);
    expect(out.stdout).toMatch(/alpha\s+live .*timers/);
    expect(out.stdout).toMatch(/beta\s+live /);
    expect(out.stdout).toMatch(/lease timers: alpha \(token 1/);
    await app.stop();
    // Stopped cleanly: it left, and the other member takes the timers at its next heartbeat.
    await beta.cluster!.membership.beat();
    expect(beta.cluster!.ownsTimers()).toBe(true);
    const json = JSON.parse((await hostwatch(['cluster', 'status', '--json', '-c', configPath], { env: w.env, unset })).stdout) as { members: Array<{ instance: string; state: string }> };
    expect(json.members.map((m) => [m.instance, m.state])).toEqual([
      ['alpha', 'left'],
      ['beta', 'live'],
    ]);
  });

  it('wakes its live event stream when another process commits events (LISTEN/NOTIFY), with no poll of its own', async () => {
    const w = await startWorld({ engine: 'postgres', config: { server: { listen: '127.0.0.1:0' }, sources: { health: { enabled: false } } } });
    cleanups.push(() => w.close());
    const app = await w.app();
    await app.start();
    const ctrl = new AbortController();
    const res = await request(`${app.serverUrl}/api/events/stream?after=${await repos(app.store).events.lastSeq()}`, { signal: ctrl.signal });
    let text = '';
    const reading = (async () => {
      try {
        for await (const chunk of res.body) text += chunk.toString();
      } catch {
        // aborted
      }
    })();
    // Another process's commit: a store of its own (not this app's bus).
    const other = await openStore(w.storage, { now: Date.now });
    cleanups.push(() => other.close());
    const e = siteEvent('from-elsewhere', 9);
    await other.transaction((tx) => repos(tx).events.addEvent(toEventRow(e)));
    // Well before the 15 s keep-alive ping: only the NOTIFY can have woken the stream.
    await waitFor(() => text.includes(e.id), 'the event committed elsewhere on the stream', 3_000);
    ctrl.abort();
    await reading;
  });
});

describe('entity leases', () => {
  it('split the entities of a source fairly: keep what is held up to the share, take vacant ones up to it, give back the excess, and take every entity nobody ever held', () => {
    const keys = ['1', '2', '3', '4', '5', '6'];
    const none = { keep: [], unheld: [], vacant: [], spare: [], release: [] };
    // Nobody ever held them (a new database): the first member to claim takes them all,
    // beyond its share, so none waits a cycle for a member that does not know the sites yet.
    expect(shareOf(keys, [], 'a', 1)).toEqual({ ...none, unheld: keys });
    expect(shareOf(keys, [], 'a', 2)).toEqual({ ...none, unheld: keys });
    // A second member joined: a keeps three and gives three back (after polling them this
    // cycle); b takes nothing held by a live a.
    const heldByA = keys.map((entity) => ({ entity, holder: 'a', live: true }));
    expect(shareOf(keys, heldByA, 'a', 2)).toEqual({ ...none, keep: ['1', '2', '3'], release: ['4', '5', '6'] });
    expect(shareOf(keys, heldByA, 'b', 2)).toEqual(none);
    // a gave 4-6 back (no holder): b takes them, up to its share.
    const given = heldByA.map((l, i) => (i < 3 ? l : { ...l, holder: '', live: false }));
    expect(shareOf(keys, given, 'b', 2)).toEqual({ ...none, vacant: ['4', '5', '6'] });
    // a died: b takes its entities, up to its share; the rest are spares, taken in the place
    // of any that another member claiming at the same moment took first.
    const deadA = keys.map((entity) => ({ entity, holder: 'a', live: false }));
    expect(shareOf(keys, deadA, 'b', 1)).toEqual({ ...none, vacant: keys });
    expect(shareOf(keys, deadA, 'b', 2)).toEqual({ ...none, vacant: ['1', '2', '3'], spare: ['4', '5', '6'] });
    expect(shareOf(keys, [...deadA.slice(0, 3), ...keys.slice(3).map((entity) => ({ entity, holder: 'c', live: true }))], 'b', 2)).toEqual({ ...none, vacant: ['1', '2', '3'] });
    // A new site (no row) beside a full share: taken too.
    expect(shareOf([...keys, '7'], heldByA.slice(0, 3), 'a', 2)).toEqual({ ...none, keep: ['1', '2', '3'], unheld: ['4', '5', '6', '7'] });
  });

  it('stay held for the rest of a cycle only while the member that claimed them is live: not after a pause past the lease, nor under its new id', async () => {
    const { store } = await pgStore();
    const a = member(store, 'a', 1_000);
    await a.m.beat();
    const claims = clusterWorkClaims(store, a.m, () => undefined, pino({ level: 'silent' }));
    const sites = [1, 2, 3].map((id) => ({ id, domain: `s${id}.example` }));
    expect(await claims.claim('health', 0, sites)).toEqual(sites);
    expect(claims.stillHeld?.('health')).toBe(true);
    // Paused: by its own clock the lease may have run out (the others may have taken over).
    a.clock.t += 900;
    expect(claims.stillHeld?.('health')).toBe(false);
    // Back after the database saw the lease run out, it joins again under a new id: what it
    // claimed under the old one is still not its own.
    await sleep(1_100);
    a.clock.t += 1_100;
    await a.m.beat();
    expect(a.m.id).toBe('a#2');
    expect(claims.stillHeld?.('health')).toBe(false);
    // Until the next cycle claims again.
    expect(await claims.claim('health', 1, sites)).toEqual(sites);
    expect(claims.stillHeld?.('health')).toBe(true);
  });

  it('are taken by two members claiming vacant entities at the same moment, each its share and all of them between the two', async () => {
    const { store } = await pgStore();
    const x = member(store, 'x', 1_000);
    await x.m.beat();
    const sites = [1, 2, 3, 4, 5, 6].map((id) => ({ id, domain: `s${id}.example` }));
    const xs = clusterWorkClaims(store, x.m, () => undefined, pino({ level: 'silent' }));
    expect(await xs.claim('health', 0, sites)).toEqual(sites);
    // x dies: its six are vacant once its lease ran out on the database clock.
    await sleep(1_100);
    const [a, b] = [member(store, 'a', 30_000), member(store, 'b', 30_000)];
    await a.m.beat();
    await b.m.beat();
    const claims = [a, b].map((p) => clusterWorkClaims(store, p.m, () => undefined, pino({ level: 'silent' })));
    // Both read the leases before either takes (as two processes may): both see the same
    // first three vacant, and whichever loses them takes the next three instead.
    const read = ClusterRepo.prototype.entityLeases;
    let reads = 0;
    let bothRead = (): void => undefined;
    const barrier = new Promise<void>((r) => (bothRead = r));
    ClusterRepo.prototype.entityLeases = async function (this: ClusterRepo, source: string) {
      const rows = await read.call(this, source);
      if (++reads === 2) bothRead();
      await barrier;
      return rows;
    };
    cleanups.push(async () => void (ClusterRepo.prototype.entityLeases = read));
    const [ta, tb] = await Promise.all(claims.map((c) => c.claim('health', 1, sites)));
    ClusterRepo.prototype.entityLeases = read;
    expect([ta!.length, tb!.length]).toEqual([3, 3]);
    expect([...ta!, ...tb!].map((s) => s!.id).sort()).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('let two daemons on one database poll every site of each cycle once between them: the first to claim a new database\'s sites takes them all, the next cycles split them', async () => {
    const w = await startWorld({ engine: 'postgres', sim: { sites: 6 }, config: { cluster: { lease: '5s' } } });
    cleanups.push(() => w.close());
    const a = await w.app({ cluster: { instance: 'a' } });
    const b = await w.app({ cluster: { instance: 'b' } });
    // a polls the site list and, first to claim them, every site of every source: b did not
    // know the sites yet, and taking only a's share would have left half unpolled a cycle.
    const all = [1, 2, 3, 4, 5, 6].map((id) => `/api/v1/sites/${id}/health`).sort();
    const healthPolls = (): string[] => w.sim.requests.filter((r) => /\/sites\/\d+\/health$/.test(r.path)).map((r) => r.path).sort();
    w.sim.requests.length = 0;
    await a.scheduler.runAll();
    expect(healthPolls()).toEqual(all);
    await b.poller.refreshSites();
    const health = (app: typeof a) => app.scheduler.runCycle({ def: app.scheduler['deps'].sources.find((s) => s.def.name === 'health')!.def, everyMs: 10_000 } as never, false);
    const cycle = async (): Promise<{ polled: string[]; a: number; b: number }> => {
      w.sim.requests.length = 0;
      const [ra, rb] = await Promise.all([health(a), health(b)]);
      return { polled: healthPolls(), a: ra.outcomes.length, b: rb.outcomes.length };
    };
    // a's share is three now: it polls all six once more and gives three back when done.
    expect(await cycle()).toEqual({ polled: all, a: 6, b: 0 });
    // From the next cycle on, three each.
    expect(await cycle()).toEqual({ polled: all, a: 3, b: 3 });
    expect(await cycle()).toEqual({ polled: all, a: 3, b: 3 });
    const leases = await w.query<{ holder: string; n: number }>("SELECT holder, count(*)::int AS n FROM entity_leases WHERE source = 'health' GROUP BY holder ORDER BY holder");
    expect(leases.map((l) => l.n)).toEqual([3, 3]);
  });
});

describe('cluster config', () => {
  const parse = (yaml: string) => parseConfig(yaml, 'hostwatch.yaml', {}, { sourceNames: SOURCE_NAMES });

  it('fingerprints a member\'s config without its secrets, its storage and its heartbeat, and tells configs with other channels apart', () => {
    const config = (key: string, secret: string, pw: string, extra = '') => {
      const r = parse(
        `api: { base_url: https://panel.example.com, key: ${key} }\nstorage: { url: "postgres://u:${pw}@db-${pw}:5432/hw" }\ncluster: { instance: web-${key} }\n` +
          `heartbeat: { url: "https://hc.example.com/ping/${key}" }\nchannels:\n  - { name: hooks, type: webhook, url: https://hooks.example.com/x, secret: ${secret} }\n${extra}`,
      );
      if (!r.ok) throw new Error(JSON.stringify(r.errors));
      return configFingerprint(r.config, []);
    };
    const a = config('key-aaaaaaaa', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'pw1');
    // Another instance name, API key, webhook secret, database password and host, heartbeat: the same.
    expect(config('key-bbbbbbbb', 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0', 'pw2')).toBe(a);
    expect(a).toMatch(/^[0-9a-f]{12}$/);
    expect(config('key-aaaaaaaa', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'pw1', '  - { name: log, type: console }\n')).not.toBe(a);
    // The name is every event's CloudEvents source: a member with another one differs.
    expect(config('key-aaaaaaaa', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'pw1', 'name: agency-staging\n')).not.toBe(a);
  });

  it('refuses cluster settings with SQLite, naming the key and what to do', () => {
    const r = parse('api: { base_url: https://panel.example.com, key: k }\nstorage: { path: ./x.db }\ncluster: { lease: 30s }\n');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toEqual([
      expect.objectContaining({ path: 'cluster', line: 3, message: expect.stringMatching(/^needs PostgreSQL \(storage\.url\): .*SQLite file \(storage\.path\) is used by one daemon at a time/) }),
    ]);
  });

  it('accepts the compose example\'s config, each instance named by its environment', () => {
    const text = readFileSync(join(process.cwd(), 'examples', 'cluster', 'hostwatch.yaml'), 'utf8');
    const env = { HOSTWATCH_INSTANCE: 'hostwatch-2', PGPASS: 'pw', HOSTWATCH_API_KEY: 'k', HOSTWATCH_TOKEN: 't', WEBHOOK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' };
    const r = parseConfig(text, 'hostwatch.yaml', env, { sourceNames: SOURCE_NAMES });
    expect(r.ok ? { storage: r.config.storage.engine, cluster: r.config.cluster } : r.errors).toEqual({ storage: 'postgres', cluster: { instance: 'hostwatch-2', lease_ms: 30_000 } });
  });

  it('takes cluster.instance and cluster.lease with PostgreSQL, defaulting the lease to 30 s, and refuses a lease under a second', () => {
    const base = 'api: { base_url: https://panel.example.com, key: k }\nstorage: { url: "postgres://u:p@db:5432/hw" }\n';
    const ok = parse(`${base}cluster: { instance: web-1, lease: 10s }\n`);
    expect(ok.ok && ok.config.cluster).toEqual({ instance: 'web-1', lease_ms: 10_000 });
    const dflt = parse(base);
    expect(dflt.ok && dflt.config.cluster).toEqual({ instance: null, lease_ms: 30_000 });
    const bad = parse(`${base}cluster: { instance: "a b", lease: 200ms }\n`);
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.errors.map((e) => e.path).sort()).toEqual(['cluster.instance', 'cluster.lease']);
  });
});

describe('a member frozen inside a write transaction', () => {
  it('holds the cluster-wide write lock no longer than its idle limit (the lease): the others commit again', async () => {
    const { url } = await pgStore();
    const storage = { engine: 'postgres' as const, url };
    const frozen = await openStore(storage, { now: Date.now, idleInTransactionMs: 1_000 });
    cleanups.push(() => frozen.close());
    const other = await openStore(storage, { now: Date.now, idleInTransactionMs: 1_000 });
    cleanups.push(() => other.close());
    // The frozen member's transaction takes the write lock at BEGIN and then waits, as a
    // process stopped between two statements would.
    let thaw!: () => void;
    const stuck = frozen.transaction(() => new Promise<void>((r) => (thaw = r)));
    await sleep(200);
    let committed = false;
    const next = other.transaction(async () => 'done').then((v) => ((committed = true), v));
    // Without the limit this waits for good (the lock is held by a live connection).
    await waitFor(() => committed, 'the other member to commit', 15_000, 50);
    expect(await next).toBe('done');
    thaw();
    // The frozen member's work is refused, not committed late over the others'.
    await expect(stuck).rejects.toThrow();
  });
});
