/**
 * The daemon's key paths on both storage engines, end to end with real parts: the
 * simulator, the real pipeline, a webhook receiver that verifies signatures and CloudEvents,
 * the operator server's feed and live stream. (The crash and restart test on PostgreSQL is
 * in crash.test.ts; every repository on both engines in repos.test.ts.)
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { knownEventNames } from '../src/events/catalog.js';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App } from '../src/main.js';
import type { ServerContext } from '../src/server/context.js';
import { feedRoutes } from '../src/server/routes/feed.js';
import { startServer } from '../src/server/server.js';
import { traceUnits } from '../src/store/commit-queue.js';
import { backupsSource, healthSource } from '../src/sources/registry.js';
import { repos } from '../src/store/repos.js';
import { names, startWorld, type World } from './harness.js';
import { hostwatch } from './run-cli.js';
import { ENGINES } from './pg.js';
import { startReceiver, TEST_SECRET, waitFor, type Receiver } from './receiver.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

describe.each(ENGINES)('the daemon on %s', (engine) => {
  async function setup(): Promise<{ w: World; hook: Receiver; app: App }> {
    const w = await startWorld({ engine });
    cleanups.push(() => w.close());
    const hook = await startReceiver({ secret: TEST_SECRET });
    cleanups.push(() => hook.close());
    const app = await w.app({ channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] });
    return { w, hook, app };
  }

  /** The changes after the baseline: an outage, a failed backup, an integrity problem. */
  function disturb(w: World): void {
    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.addBackup(2, { state: 'Error' });
    w.sim.world.setHealth(3, { problems: 2 });
  }

  it('polls, commits events with their outbox rows, and delivers each once to a receiver that verifies it', async () => {
    const { w, hook, app } = await setup();
    await app.runOnce();
    expect(w.events).toEqual([]); // baseline first
    disturb(w);
    const { pending } = await app.runOnce();
    expect(pending).toBe(0);
    expect(names(w.events).sort()).toEqual(['backup.failed', 'site.integrity_problems:firing', 'site.offline:firing']);
    for (const r of hook.requests) {
      expect(r.signatureError).toBeNull();
      expect(r.cloudEventError).toBeNull();
    }
    expect(hook.acceptedIds()).toEqual(new Set(w.events.map((e) => e.id)));
    expect(hook.requests).toHaveLength(3);
    const stored = await w.query<{ id: string; body: string }>('SELECT id, body FROM events ORDER BY seq');
    expect(stored.map((r) => r.id)).toEqual(w.events.map((e) => e.id));
    // Byte for byte what was signed and sent.
    for (const r of hook.requests) expect(r.body).toBe(stored.find((s) => s.id === r.id)!.body);
    expect(await w.query('SELECT state, count(*) AS n FROM outbox GROUP BY state')).toEqual([{ state: 'delivered', n: 3 }]);
    const attempts = await w.query<{ outcome: string; status_code: number }>('SELECT outcome, status_code FROM delivery_attempts');
    expect(attempts).toEqual(Array.from({ length: 3 }, () => ({ outcome: 'delivered', status_code: 200 })));
  });

  it('makes no network request inside a transaction (invariant 4), through a whole cycle with deliveries', async () => {
    const { w, app } = await setup();
    // Every unit of the commit queue runs in this context; a request made from one is seen.
    const inUnit = new AsyncLocalStorage<true>();
    traceUnits(inUnit);
    cleanups.push(async () => traceUnits(null));
    let requests = 0;
    const during: string[] = [];
    const onRequest = (msg: unknown): void => {
      requests++;
      const { request } = msg as { request: { origin: string; path: string } };
      if (inUnit.getStore()) during.push(`${request.origin}${request.path}`);
    };
    subscribe('undici:request:create', onRequest);
    try {
      await app.runOnce();
      disturb(w);
      await app.runOnce();
      expect(requests).toBeGreaterThan(20); // the API polls and the three deliveries were seen
      expect(during).toEqual([]);
      // The check itself sees a request made inside a unit.
      await app.store.transaction(async () => void (await request(`${w.sim.url}/api/v1/sites`)).body.dump());
      expect(during).toEqual([`${w.sim.url}/api/v1/sites`]);
    } finally {
      unsubscribe('undici:request:create', onRequest);
    }
  });

  it('commits the polls of a cycle in fewer transactions than polls (group commit)', async () => {
    const { app } = await setup();
    const before = { ...app.store.stats };
    await app.runOnce(); // the baseline: every poll writes
    const units = app.store.stats.units - before.units;
    const batches = app.store.stats.batches - before.batches;
    expect(units).toBeGreaterThan(10);
    expect(batches).toBeLessThan(units);
  });

  it('when one poll\'s writes fail in the database, runs the batch it shared again without them: the other polls\' events are stored, queued and delivered once each', async () => {
    const { w, hook, app } = await setup();
    await app.runOnce();
    // From now on the database refuses site 2's backups (a change-log row), as a bug or a
    // constraint would: that poll's unit fails after other polls of its batch wrote.
    await refuse(w, "NEW.source = 'backups' AND NEW.site_id = 2");
    disturb(w);
    // The three changed polls share one batch: a unit ahead of them holds the queue until
    // all three have submitted their writes.
    const submit = app.store.transaction.bind(app.store);
    let polls = 0;
    let allIn!: () => void;
    const three = new Promise<void>((r) => (allIn = r));
    app.store.transaction = (unit, opts) => {
      if (opts?.repeatable && ++polls === 3) allIn();
      return submit(unit, opts);
    };
    // The holder's batch is running before the polls start, so they cannot join it (had a
    // batch still been committing, the holder would have waited in the queue with them, and
    // the polls would have run in savepoints with nothing to run again). It holds until all
    // three are in (the 5 s it had before could let go early on a loaded machine, leaving the
    // failing poll alone in its batch). One of these two made it fail once in CI. 25 s is far
    // above what three polls take (30-130 ms here, on two busy cores); missing it fails the
    // test, saying so.
    let late!: NodeJS.Timeout;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const holder = submit(() => {
      started();
      return Promise.race([three, new Promise((_, reject) => (late = setTimeout(() => reject(new Error(`only ${polls} of the 3 polls submitted their writes within 25 s`)), 25_000)))]).finally(() =>
        clearTimeout(late),
      );
    });
    await running;
    const before = { ...app.store.stats };
    const site = (id: number) => app.poller.sites().find((s) => s.id === id)!;
    const outcomes = await Promise.all([app.poller.poll(healthSource, site(1)), app.poller.poll(backupsSource, site(2)), app.poller.poll(healthSource, site(3))]);
    await holder;
    app.store.transaction = submit;
    expect(outcomes.map((o) => o.status)).toEqual(['changed', 'failed', 'changed']);
    expect(String(outcomes[1]!.error?.message)).toMatch(/refused by the test/);
    // Run first without savepoints, then again with one per unit; the failed poll kept nothing.
    expect(app.store.stats.rerunBatches - before.rerunBatches).toBe(1);
    expect(await w.query("SELECT count(*) AS n FROM change_log WHERE entity = 'sites/2/backups'")).toEqual([{ n: 1 }]);
    expect(await w.query("SELECT consecutive_failures FROM poll_state WHERE entity = 'sites/2/backups'")).toEqual([{ consecutive_failures: 1 }]);
    // Each event of the others once: stored, queued, announced, and delivered.
    expect(names(w.events).sort()).toEqual(['site.integrity_problems:firing', 'site.offline:firing']);
    const stored = await w.query<{ id: string }>('SELECT id FROM events ORDER BY seq');
    expect(stored.map((r) => r.id)).toEqual(w.events.map((e) => e.id));
    expect(await w.query('SELECT count(*) AS n FROM outbox')).toEqual([{ n: 2 }]);
    await app.runOnce();
    expect(hook.requests.map((r) => r.id).sort()).toEqual(w.events.map((e) => e.id).sort());
    // Once the database takes it again, the next poll stores the failed backup's event.
    await refuse(w, null);
    await app.runOnce();
    expect(names(w.events).sort()).toEqual(['backup.failed', 'site.integrity_problems:firing', 'site.offline:firing']);
    expect(hook.requests.map((r) => r.id).sort()).toEqual(w.events.map((e) => e.id).sort());
  }, 60_000);

  it('lets the other polls of a batch stop waiting for a poll once its reply is in, before it submits its own writes, also when the fetch fails', async () => {
    const { w, app } = await setup();
    w.sim.faults.add({ path: '^/sites/2/usage$', kind: 'status', status: 500 });
    // Each poll's expectation is kept in the poll's own async context, so the submission of
    // a poll's writes can be matched to the poll that made it.
    const mine = new AsyncLocalStorage<{ released: boolean }>();
    const expectWrite = app.store.expectWrite.bind(app.store);
    const transaction = app.store.transaction.bind(app.store);
    let expected = 0;
    let outstanding = 0;
    const held: boolean[] = [];
    app.store.expectWrite = () => {
      const token = { released: false };
      mine.enterWith(token);
      expected++;
      outstanding++;
      const release = expectWrite();
      return () => {
        if (!token.released) outstanding--;
        token.released = true;
        release();
      };
    };
    app.store.transaction = (unit, opts) => {
      const token = mine.getStore();
      if (opts?.patient && token) held.push(!token.released);
      return transaction(unit, opts);
    };
    await app.runOnce(); // the baseline: every poll writes
    disturb(w);
    await app.runOnce();
    expect(expected).toBeGreaterThan(20);
    expect(held.length).toBeGreaterThan(20); // polls wrote, the failed one included
    expect(held.filter(Boolean)).toEqual([]); // none submitted while still expected
    expect(outstanding).toBe(0); // and every expectation was let go, the failed poll's too
    expect(await w.query("SELECT consecutive_failures FROM poll_state WHERE entity = 'sites/2/usage'")).toEqual([{ consecutive_failures: 2 }]);
  });

  it('serves the event feed and the live stream from the database, with no gap', async () => {
    const { w, app } = await setup();
    // The feed routes over the app's own store and bus; the test's runAll is the only poller.
    const ctx: ServerContext = { config: app.config, store: app.store, ...repos(app.store), scheduler: app.scheduler, sources: [], metrics: app.metrics, bus: app.bus, now: Date.now, log: app.log, eventNames: knownEventNames(app.rules) };
    const server = await startServer({ listen: '127.0.0.1:0', token: null, routes: feedRoutes(ctx) });
    cleanups.push(() => server.close());
    const url = server.url;
    // The stream is open before the events are committed: they arrive live.
    const ctrl = new AbortController();
    cleanups.push(async () => ctrl.abort());
    const res = await fetch(`${url}/api/events/stream`, { signal: ctrl.signal });
    expect(res.status).toBe(200);
    const live: HostwatchEvent[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buf = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          const data = block.split('\n').find((l) => l.startsWith('data: '));
          if (data) live.push(JSON.parse(data.slice(6)) as HostwatchEvent);
        }
      }
    })().catch(() => {});
    await app.scheduler.runAll();
    disturb(w);
    await app.scheduler.runAll();
    await waitFor(() => live.length >= 3, 'three events on the live stream', 10_000);
    expect(live.map((e) => e.id)).toEqual(w.events.map((e) => e.id));
    const first = (await (await fetch(`${url}/api/events?limit=2`)).json()) as { data: HostwatchEvent[]; cursor: string; has_more: boolean };
    expect(first.data.map((e) => e.id)).toEqual(w.events.slice(0, 2).map((e) => e.id));
    expect(first.has_more).toBe(true);
    const next = (await (await fetch(`${url}/api/events?after=${first.cursor}`)).json()) as { data: HostwatchEvent[]; has_more: boolean };
    expect(next.data.map((e) => e.id)).toEqual(w.events.slice(2).map((e) => e.id));
    expect(next.has_more).toBe(false);
    ctrl.abort();
    await reading;
  });
});

describe('the daemon on postgres: the database password', () => {
  it('is written as ${PGPASS} in the config, connects, and appears in no log line, event or stored row', async () => {
    const w = await startWorld({ engine: 'postgres' });
    cleanups.push(() => w.close());
    expect(w.yaml()).toContain('${PGPASS}');
    const password = decodeURIComponent(new URL((w.storage as { url: string }).url).password);
    expect(password.length).toBeGreaterThanOrEqual(4);
    const app = await w.app({ log: { level: 'debug' } });
    await app.runOnce();
    w.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    expect(w.events.length).toBeGreaterThan(0);
    // A log line that would carry the URL is scrubbed (the scrubber knows the URL and the password).
    app.log.error({ url: (w.storage as { url: string }).url }, `connecting to ${(w.storage as { url: string }).url}`);
    expect(w.logs.text).not.toContain(password);
    expect(w.logs.text).toContain('[REDACTED]');
    const texts = await w.query<{ t: string }>(
      "SELECT body AS t FROM events UNION ALL SELECT body FROM snapshots UNION ALL SELECT coalesce(last_error, '') FROM poll_state UNION ALL SELECT body FROM event_evidence",
    );
    expect(texts.length).toBeGreaterThan(0);
    for (const { t } of texts) expect(t).not.toContain(password);
  });
});

describe('the commands on PostgreSQL without a hostwatch database', () => {
  it('refuse an empty database as they refuse a missing SQLite file, naming it without the password, and create nothing in it', async () => {
    const w = await startWorld({ engine: 'postgres' });
    cleanups.push(() => w.close());
    const url = new URL((w.storage as { url: string }).url);
    const password = decodeURIComponent(url.password);
    const config = join(w.dir, 'config.yaml');
    writeFileSync(config, w.yaml());
    const database = url.pathname.slice(1);
    for (const args of [['events'], ['cluster', 'status'], ['deliveries'], ['explain', 'x']]) {
      const r = await hostwatch([...args, '-c', config], { env: w.env });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe(
        `hostwatch: no hostwatch database in the PostgreSQL database ${database} on ${url.host} (storage.url): it holds no hostwatch tables (no schema_migrations); \`hostwatch run\` creates it on its first start\n`,
      );
      expect(r.stderr + r.stdout).not.toContain(password);
    }
    expect(await w.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")).toEqual([]);
  });

  it('say that the database of storage.url cannot be reached, with its host and port, when run cannot connect', async () => {
    const w = await startWorld({ engine: 'postgres' });
    cleanups.push(() => w.close());
    const config = join(w.dir, 'config.yaml');
    const unreachable = (w.base['storage'] as { url: string }).url.replace(/@[^/]+\//, '@127.0.0.1:1/');
    writeFileSync(config, w.yaml({ storage: { url: unreachable } }));
    const r = await hostwatch(['run', '-c', config], { env: w.env });
    expect(r.code).toBe(1);
    const database = new URL((w.storage as { url: string }).url).pathname.slice(1);
    expect(r.stderr).toContain(`hostwatch: cannot start: cannot connect to the PostgreSQL database ${database} on 127.0.0.1:1 (storage.url): connect ECONNREFUSED 127.0.0.1:1\n`);
    expect(r.stderr).not.toContain(w.env['PGPASS']!);
  });
});

/** Make the world's database refuse change-log rows `when` holds (a SQL condition on NEW), or (null) take them again. */
async function refuse(w: World, when: string | null): Promise<void> {
  if (w.storage.engine === 'sqlite') {
    const db = new BetterSqlite3(w.dbPath);
    try {
      db.exec('DROP TRIGGER IF EXISTS test_refuse');
      if (when) db.exec(`CREATE TRIGGER test_refuse BEFORE INSERT ON change_log WHEN ${when} BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: w.storage.url });
  await c.connect();
  try {
    await c.query('DROP TRIGGER IF EXISTS test_refuse ON change_log');
    if (when) {
      await c.query("CREATE OR REPLACE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$");
      await c.query(`CREATE TRIGGER test_refuse BEFORE INSERT ON change_log FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION test_refuse()`);
    }
  } finally {
    await c.end();
  }
}
