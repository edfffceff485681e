/**
 * Webhook delivery end to end: the real daemon (simulator → poller → SQLite → outbox
 * worker → undici) posting to a real HTTP receiver that checks every request with the
 * `standardwebhooks` and `cloudevents` libraries. PRODUCT.md, "Events" and invariants 4–5.
 */
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App, AppOptions } from '../src/main.js';
import { EventsRepo, toEventRow } from '../src/store/events-repo.js';
import { names, startWorld, type World } from './harness.js';
import { freePort, startReceiver, TEST_SECRET, type Answer, type Received, type Receiver } from './receiver.js';

/** Short enough for tests, long enough that the schedule (not the clock's grain) sets the pace. */
const SCHEDULE = ['200ms', '200ms', '300ms', '500ms', '1s'];
const SCHEDULE_MS = [200, 200, 300, 500, 1000];

const worlds: World[] = [];
const receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.allSettled(worlds.splice(0).map((w) => w.close()));
  await Promise.allSettled(receivers.splice(0).map((r) => r.close()));
});

async function world(opts: Parameters<typeof startWorld>[0] = {}): Promise<World> {
  const w = await startWorld(opts);
  worlds.push(w);
  return w;
}

async function receiver(answer?: (r: Received) => Answer, port?: number): Promise<Receiver> {
  const r = await startReceiver({ answer, port });
  receivers.push(r);
  return r;
}

/** An app of `w` whose only channel is a webhook (or several) at `urls`. */
function hookApp(w: World, urls: Record<string, string>, opts: AppOptions = {}, retrySchedule: string[] = SCHEDULE): Promise<App> {
  return w.app(
    {
      channels: Object.entries(urls).map(([name, url]) => ({ name, type: 'webhook', url, secret: TEST_SECRET, timeout: '2s' })),
      delivery: { retry_schedule: retrySchedule },
    },
    opts,
  );
}

/** Query the daemon's database read-only, as an operator would. */
function query<T>(w: World, sql: string, ...args: unknown[]): T[] {
  const db = new BetterSqlite3(w.dbPath, { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all(...args) as T[];
  } finally {
    db.close();
  }
}

interface OutboxView {
  event_id: string;
  channel: string;
  state: string;
  attempts: number;
  last_error: string | null;
}
interface AttemptView {
  event_id: string;
  channel: string;
  attempt: number;
  at: number;
  outcome: string;
  status_code: number | null;
  error: string | null;
}

const outbox = (w: World): OutboxView[] =>
  query<OutboxView>(w, 'SELECT event_id, channel, state, attempts, last_error FROM outbox ORDER BY id');
const attempts = (w: World): AttemptView[] =>
  query<AttemptView>(
    w,
    `SELECT o.event_id, o.channel, a.attempt, a.at, a.outcome, a.status_code, a.error
       FROM delivery_attempts a JOIN outbox o ON o.id = a.outbox_id ORDER BY a.id`,
  );
const eventRows = (w: World): Array<{ id: string; body: string }> => query(w, 'SELECT id, body FROM events ORDER BY seq');

const countBy = <T>(xs: readonly T[], key: (x: T) => string): Map<string, number> => {
  const m = new Map<string, number>();
  for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
  return m;
};

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('what a webhook receiver gets', () => {
  it('every delivered event verifies and validates as CloudEvents 1.0, with webhook-id equal to the event id, type hostwatch.<name>, source hostwatch://test, and data exactly as PRODUCT.md describes', async () => {
    const w = await world();
    const hook = await receiver();
    const app = await hookApp(w, { hooks: hook.url });
    await app.runOnce(); // baseline
    expect(hook.requests).toHaveLength(0);

    const sim = w.sim.world;
    sim.setHealth(2, { status: 'offline' });
    const broken = sim.addBackup(3, { state: 'Error' });
    const usage1 = sim.getUsage(1)!;
    sim.setUsage(1, { diskUsedMib: usage1.disk.limit_mib + 100 });
    expect(await app.runOnce()).toMatchObject({ pending: 0, failed: 0 });
    sim.setHealth(2, { status: 'online' });
    expect(await app.runOnce()).toMatchObject({ pending: 0, failed: 0 });

    // Exactly the events the world changes call for, each delivered once.
    expect(hook.requests.map((r) => (r.event!.data.status ? `${r.event!.data.name}:${r.event!.data.status}` : r.event!.data.name)).sort()).toEqual(
      ['backup.failed', 'site.offline:firing', 'site.offline:resolved', 'usage.disk_high:firing', 'usage.over_limit:firing'],
    );
    const stored = new Map(eventRows(w).map((e) => [e.id, e.body]));
    expect(stored.size).toBe(5);

    const nowSec = Date.now() / 1000;
    for (const r of hook.requests) {
      expect(r.signatureError, `signature of ${r.id}`).toBeNull();
      expect(r.cloudEventError, `CloudEvent ${r.id}`).toBeNull();
      expect(r.method).toBe('POST');
      expect(r.headers['content-type']).toMatch(/^application\/cloudevents\+json(;|$)/);
      expect(Math.abs(Number(r.headers['webhook-timestamp']) - nowSec)).toBeLessThan(60);
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);

      const e = r.event!;
      const ce = r.cloudEvent!;
      expect(r.id).toBe(e.id);
      expect(ce.id).toBe(e.id);
      expect(ce.specversion).toBe('1.0');
      expect(ce.source).toBe('hostwatch://test');
      expect(ce.type).toBe(`hostwatch.${e.data.name}`);
      expect(ce.subject).toBe(e.subject);
      expect(ce.datacontenttype).toBe('application/json');
      expect(e.time).toMatch(ISO);
      expect(ce.time).toBe(e.time);
      expect(ce.data).toEqual(e.data);
      // The envelope has the CloudEvents attributes of PRODUCT.md and nothing else.
      expect(Object.keys(e).sort()).toEqual(['data', 'datacontenttype', 'id', 'source', 'specversion', 'subject', 'time', 'type']);
      // What was signed and sent is byte for byte the stored event.
      expect(r.body).toBe(stored.get(e.id));

      const alert = e.data.rule.startsWith('site-') || e.data.rule.startsWith('usage-');
      const keys = ['changes', 'domain', 'name', 'observed_at', 'rule', 'severity', 'site_id', 'summary', ...(alert ? ['status', 'alert_id'] : [])];
      // An alert's firing carries its own id as alert_id (its resolution carries the same one).
      if (e.data.status === 'firing') expect(e.data['alert_id']).toBe(e.id);
      // PRODUCT.md's fields, plus only the additions of the rule language (docs/events.md).
      const added = ['labels', 'description'];
      expect(Object.keys(e.data).filter((k) => !added.includes(k)).sort()).toEqual(keys.sort());
      expect(e.data['labels']).toEqual(expect.objectContaining({ category: expect.any(String) }));
      expect(e.data.observed_at).toMatch(ISO);
      expect(['info', 'warning', 'critical']).toContain(e.data.severity);
      expect(e.data.summary.length).toBeGreaterThan(0);
      expect(Array.isArray(e.data.changes)).toBe(true);
    }

    const byName = (n: string, status?: string): HostwatchEvent =>
      hook.requests.map((r) => r.event!).find((e) => e.data.name === n && e.data.status === status)!;
    const d2 = sim.getSite(2)!.domain;
    const offline = byName('site.offline', 'firing');
    expect(offline.subject).toBe('sites/2/health');
    expect(offline.data).toMatchObject({
      name: 'site.offline',
      severity: 'critical',
      status: 'firing',
      summary: `${d2} is offline`,
      site_id: 2,
      domain: d2,
      rule: 'site-offline',
    });
    expect(offline.data.changes).toContainEqual({ path: 'online.status', before: 'online', after: 'offline' });
    const back = byName('site.offline', 'resolved');
    expect(back.data).toMatchObject({ status: 'resolved', summary: `${d2} is back online`, site_id: 2, domain: d2, rule: 'site-offline' });
    expect(back.data.changes).toContainEqual({ path: 'online.status', before: 'offline', after: 'online' });
    expect(back.id).not.toBe(offline.id);

    const failed = byName('backup.failed');
    const d3 = sim.getSite(3)!.domain;
    expect(failed.subject).toBe(`sites/3/backups/${broken.id}`);
    expect(failed.data).toMatchObject({ name: 'backup.failed', severity: 'warning', site_id: 3, domain: d3, rule: 'backup-failed', summary: `Backup ${broken.id} of ${d3} failed` });
    expect('status' in failed.data).toBe(false);
    expect(failed.data.changes).toEqual([{ path: `[id=${broken.id}]`, before: null, after: expect.objectContaining({ id: broken.id, state: 'Error' }) }]);

    const over = byName('usage.over_limit', 'firing');
    expect(over.subject).toBe('sites/1/usage');
    expect(over.data).toMatchObject({ severity: 'critical', site_id: 1, domain: sim.getSite(1)!.domain, rule: 'usage-over-limit' });
    expect(over.data.changes).toContainEqual({ path: 'disk.over', before: false, after: true });
  });
});

describe('a receiver that is down for a while', () => {
  it('gets every event once it answers 503 / 429 / 408 / 500 no more: the same ids as first attempted, none missing', async () => {
    const w = await world();
    let down = true;
    const failures = [503, 429, 408, 500];
    const hook = await receiver((r) => (down ? { status: failures[r.n % failures.length]!, body: 'not now' } : { status: 204 }));
    const app = await hookApp(w, { hooks: hook.url });
    await app.scheduler.runAll(); // baseline: nothing to deliver

    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.setHealth(2, { status: 'slow' });
    w.sim.world.addBackup(3, { state: 'Error' });
    await app.scheduler.runAll();
    const committed = new Set(w.events.map((e) => e.id));
    expect(names(w.events).sort()).toEqual(['backup.failed', 'site.offline:firing', 'site.slow:firing']);

    // While down: the first attempts and the retries after 200 ms and 400 ms fail; all stay pending.
    expect(await app.worker.drain(650)).toBe(3);
    const attemptedWhileDown = new Set(hook.requests.map((r) => r.id));
    expect(attemptedWhileDown).toEqual(committed);
    expect(hook.accepted()).toHaveLength(0);
    for (const [id, n] of countBy(hook.requests, (r) => r.id)) expect(n, `attempts of ${id} while down`).toBeGreaterThanOrEqual(2);

    down = false;
    expect(await app.worker.drain(5_000)).toBe(0);

    // Every event arrived, under the id it was first attempted with, exactly once accepted.
    expect(hook.acceptedIds()).toEqual(attemptedWhileDown);
    expect([...countBy(hook.accepted(), (r) => r.id).values()]).toEqual([1, 1, 1]);
    // Every attempt of one event carried the same id and the same body.
    for (const id of committed) {
      const bodies = new Set(hook.requests.filter((r) => r.id === id).map((r) => r.body));
      expect(bodies.size, `bodies sent for ${id}`).toBe(1);
    }
    for (const r of hook.requests) expect(r.signatureError).toBeNull();
    expect(outbox(w).map((o) => o.state)).toEqual(['delivered', 'delivered', 'delivered']);
    // The database saw every attempt the receiver saw, with the status it answered.
    const log = attempts(w);
    expect(log).toHaveLength(hook.requests.length);
    expect(log.filter((a) => a.outcome === 'retry').map((a) => a.status_code).every((s) => failures.includes(s!))).toBe(true);
    expect(log.filter((a) => a.outcome === 'delivered')).toHaveLength(3);
  });

  it('gets every event once it listens again after not listening at all: the same ids as first attempted, none missing', async () => {
    const w = await world();
    const port = await freePort();
    const tried: Array<{ id: string; ok: boolean; statusCode: number | null; error: string | null }> = [];
    const app = await hookApp(
      w,
      { hooks: `http://127.0.0.1:${port}/hook` },
      { onAttempt: (a) => tried.push({ id: a.event.id, ok: a.result.ok, statusCode: a.result.statusCode, error: a.result.ok ? null : a.result.error }) },
    );
    await app.scheduler.runAll(); // baseline

    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.setHealth(3, { problems: 2 });
    w.sim.world.addBackup(2, { state: 'Ok' });
    await app.scheduler.runAll();
    const committed = new Set(w.events.map((e) => e.id));
    expect(names(w.events).sort()).toEqual(['backup.completed', 'site.integrity_problems:firing', 'site.offline:firing']);

    expect(await app.worker.drain(650)).toBe(3);
    const attemptedWhileDown = new Set(tried.map((t) => t.id));
    expect(attemptedWhileDown).toEqual(committed);
    for (const t of tried) {
      expect(t.ok).toBe(false);
      expect(t.statusCode).toBeNull();
      expect(t.error).toMatch(/connection failed/);
    }
    // The attempts are in the database too, with the reason.
    expect(new Set(attempts(w).map((a) => a.event_id))).toEqual(committed);
    expect(outbox(w).every((o) => o.state === 'pending' && o.attempts >= 2 && /connection failed/.test(o.last_error ?? ''))).toBe(true);

    const hook = await receiver(undefined, port);
    expect(await app.worker.drain(5_000)).toBe(0);
    expect(hook.acceptedIds()).toEqual(attemptedWhileDown);
    expect(hook.requests).toHaveLength(3);
    for (const r of hook.requests) {
      expect(r.signatureError).toBeNull();
      expect(r.cloudEventError).toBeNull();
      expect(r.id).toBe(r.event!.id);
    }
    expect(outbox(w).map((o) => o.state)).toEqual(['delivered', 'delivered', 'delivered']);
  });
});

describe('failures that retrying cannot fix', () => {
  it('a 4xx other than 408/429 is dead-lettered at once, with the reason stored in outbox.last_error and delivery_attempts', async () => {
    const w = await world();
    // 410 is permanent too, and disables the channel besides: test/delivery-channels.test.ts.
    const permanent = [400, 401, 403, 404, 413, 422];
    const retryable = [408, 429];
    const urls: Record<string, string> = {};
    const hooks = new Map<number, Receiver>();
    for (const status of [...permanent, ...retryable]) {
      const r = await receiver(() => ({ status, body: `nope ${status}` }));
      hooks.set(status, r);
      urls[`c${status}`] = r.url;
    }
    // A retry far away, so the retryable rows cannot be retried while the test looks.
    const app = await hookApp(w, urls, {}, ['1m']);
    await app.scheduler.runAll(); // baseline
    w.sim.world.setHealth(1, { status: 'offline' });
    await app.scheduler.runAll();
    expect(names(w.events)).toEqual(['site.offline:firing']);
    const id = w.events[0]!.id;

    await app.worker.deliverDue();

    const rows = new Map(outbox(w).map((o) => [o.channel, o]));
    const log = attempts(w);
    for (const status of permanent) {
      expect(hooks.get(status)!.requests.map((r) => r.id), `requests to the ${status} receiver`).toEqual([id]);
      expect(rows.get(`c${status}`), `outbox row of the ${status} channel`).toMatchObject({
        event_id: id,
        state: 'dead',
        attempts: 1,
        last_error: `permanent failure: HTTP ${status}: nope ${status}`,
      });
      expect(log.filter((a) => a.channel === `c${status}`)).toEqual([
        expect.objectContaining({ attempt: 1, outcome: 'dead', status_code: status, error: `HTTP ${status}: nope ${status}` }),
      ]);
    }
    // 408 and 429 are the 4xx that mean "later": pending, not dead.
    for (const status of retryable) {
      expect(rows.get(`c${status}`)).toMatchObject({ state: 'pending', attempts: 1 });
      expect(log.filter((a) => a.channel === `c${status}`)).toEqual([expect.objectContaining({ outcome: 'retry', status_code: status })]);
    }
    // A dead row is never tried again.
    expect(await app.worker.drain(300)).toBe(2);
    for (const status of permanent) expect(hooks.get(status)!.requests).toHaveLength(1);
  });

  it('a 3xx redirect is not followed (the redirect target receives nothing) and counts as a failure', async () => {
    const w = await world();
    const target = await receiver();
    const statuses = [301, 302, 303, 307, 308];
    const urls: Record<string, string> = {};
    const hooks = new Map<number, Receiver>();
    for (const status of statuses) {
      const r = await receiver(() => ({ status, headers: { location: target.url } }));
      hooks.set(status, r);
      urls[`r${status}`] = r.url;
    }
    const app = await hookApp(w, urls);
    await app.scheduler.runAll(); // baseline
    w.sim.world.setHealth(2, { status: 'offline' });
    await app.scheduler.runAll();
    expect(w.events).toHaveLength(1);

    expect(await app.worker.drain(1_000)).toBe(0);
    expect(target.requests).toEqual([]);
    const rows = new Map(outbox(w).map((o) => [o.channel, o]));
    for (const status of statuses) {
      expect(hooks.get(status)!.requests, `requests to the ${status} receiver`).toHaveLength(1);
      const row = rows.get(`r${status}`)!;
      expect(row.state, `outbox row of the ${status} channel`).not.toBe('delivered');
      expect(row.state).toBe('dead');
      expect(row.last_error).toContain(`HTTP ${status} (redirects are not followed)`);
      expect(attempts(w).filter((a) => a.channel === `r${status}`)).toEqual([expect.objectContaining({ status_code: status, outcome: 'dead' })]);
    }
  });

  it('when the retry schedule runs out the row is dead after exactly schedule.length + 1 attempts, each one sent', async () => {
    const w = await world();
    const hook = await receiver(() => ({ status: 503, body: 'try later' }));
    const app = await hookApp(w, { hooks: hook.url });
    await app.runOnce(); // baseline
    w.sim.world.setHealth(3, { status: 'offline' });
    expect(await app.runOnce()).toMatchObject({ pending: 0, failed: 0 });

    expect(w.events).toHaveLength(1);
    const id = w.events[0]!.id;
    expect(hook.requests.map((r) => r.id)).toEqual(Array(SCHEDULE_MS.length + 1).fill(id));
    expect(new Set(hook.requests.map((r) => r.body)).size).toBe(1);
    for (const r of hook.requests) expect(r.signatureError).toBeNull();
    // Each attempt is signed afresh (a receiver rejects timestamps older than 5 minutes, and
    // the real schedule retries for days): the timestamps follow the ~2.2 s the retries took.
    const stamps = hook.requests.map((r) => Number(r.headers['webhook-timestamp']));
    expect([...stamps].sort((a, b) => a - b)).toEqual(stamps);
    expect(stamps.at(-1)! - stamps[0]!).toBeGreaterThanOrEqual(2);
    // Each retry waited (at least the jittered lower bound of) its step of the schedule.
    for (let i = 1; i < hook.requests.length; i++) {
      const gap = hook.requests[i]!.at - hook.requests[i - 1]!.at;
      expect(gap, `gap before attempt ${i + 1}`).toBeGreaterThanOrEqual(SCHEDULE_MS[i - 1]! * 0.8 - 5);
    }

    expect(outbox(w)).toEqual([
      {
        event_id: id,
        channel: 'hooks',
        state: 'dead',
        attempts: SCHEDULE_MS.length + 1,
        last_error: `gave up after ${SCHEDULE_MS.length + 1} attempts: HTTP 503: try later`,
      },
    ]);
    const log = attempts(w);
    expect(log.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(log.map((a) => a.outcome)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'dead']);
    expect(log.every((a) => a.status_code === 503)).toBe(true);
    // Dead means dead: nothing more is sent.
    expect(await app.worker.drain(300)).toBe(0);
    expect(hook.requests).toHaveLength(SCHEDULE_MS.length + 1);
  });
});

describe('idempotent commits', () => {
  /** The world changes both tests below make after the baseline. */
  function disturb(w: World): void {
    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.addBackup(2, { state: 'Error' });
    const { backup } = w.sim.world.startBackup(3);
    w.sim.world.setBackupState(3, backup.id, 'Ok');
  }

  it('the same event is never inserted twice into the outbox when the same poll result is committed twice, and its id is stable', async () => {
    const w = await world();
    const hook = await receiver();
    const a = await hookApp(w, { hooks: hook.url });
    // Not as daemons: the one-daemon lock would stop b (and c). This is what a second process
    // that commits the same results would do, which group commit and a cluster must survive.
    const b = await hookApp(w, { hooks: hook.url }, { daemon: false });
    await a.scheduler.runAll(); // baseline
    disturb(w);

    // Two daemons on one database poll the same changed world at the same time, then again.
    await Promise.all([a.scheduler.runAll(), b.scheduler.runAll()]);
    await b.scheduler.runAll();
    const c = await hookApp(w, { hooks: hook.url }, { daemon: false }); // and a restart
    await c.scheduler.runAll();

    const rows = eventRows(w);
    const expected = ['backup.completed', 'backup.failed', 'job.completed', 'site.offline:firing'];
    expect(names(rows.map((r) => JSON.parse(r.body) as HostwatchEvent)).sort()).toEqual(expected);
    expect(names(w.events).sort()).toEqual(expected); // handed to the outbox once each, by whichever app won
    const box = outbox(w);
    expect(box).toHaveLength(rows.length);
    expect([...countBy(box, (o) => `${o.event_id}/${o.channel}`).values()].every((n) => n === 1)).toBe(true);

    // Committing the stored events again (a replayed transaction) inserts nothing.
    for (const row of rows) {
      const e = JSON.parse(row.body) as HostwatchEvent;
      const again = await a.store.transaction(async (tx) => {
        const repo = new EventsRepo(tx);
        const inserted = await repo.addEvent(toEventRow(e, row.body));
        await repo.enqueue({ event_id: e.id, channel: 'hooks', state: 'pending', attempts: 0, next_attempt_at: 0, last_error: null, created_at: 0, updated_at: 0 });
        return inserted;
      });
      expect(again).toBe(false);
    }
    expect(outbox(w)).toEqual(box);
    expect(eventRows(w)).toEqual(rows);

    expect(await a.worker.drain(5_000)).toBe(0);
    expect(hook.acceptedIds()).toEqual(new Set(rows.map((r) => r.id)));
    expect(hook.accepted()).toHaveLength(rows.length);

    // The ids are a function of what happened, not of the run: a fresh database and a fresh
    // simulator going through the same steps give the same ids.
    const w2 = await world();
    const a2 = await w2.app();
    await a2.scheduler.runAll();
    disturb(w2);
    await a2.scheduler.runAll();
    expect(new Set(w2.events.map((e) => e.id))).toEqual(new Set(rows.map((r) => r.id)));
  });
});
