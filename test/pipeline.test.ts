import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { entityOf, sitesSource, sourceByName } from '../src/sources/registry.js';
import { openStore } from '../src/store/db.js';
import { enabledSources } from '../src/sources/select.js';
import { configFrom, names, rows, sqliteOf, startWorld, TEST_KEY, type World } from './harness.js';

/** A config with every default, for asking which sources and scopes it enables. */
function configOf() {
  return configFrom('api: { base_url: https://panel.example.com, key: k }\n', {}, '/tmp');
}

/** Sources that run a cycle of their own (views share their origin's), each writing one state row. */
function cycleSources(app: { config: Parameters<typeof enabledSources>[0] }): string[] {
  return enabledSources(app.config)
    .filter((s) => s.def.from === undefined)
    .map((s) => s.def.name)
    .sort();
}

let world: World;
afterEach(async () => {
  await world?.close();
});

/** Read-only look at the daemon's database, as an operator would. */
function db(w: World): BetterSqlite3.Database {
  return new BetterSqlite3(w.dbPath, { readonly: true });
}

function count(w: World, sql: string, ...args: unknown[]): number {
  const d = db(w);
  try {
    return (d.prepare(sql).get(...args) as { n: number }).n;
  } finally {
    d.close();
  }
}

/** The statements an app's SQLite store runs while `fn` runs: their SQL text and named parameters. */
async function statementsDuring(app: { store: unknown }, fn: () => Promise<unknown>): Promise<Array<{ sql: string; p: Record<string, unknown> }>> {
  type Exec = (s: { compile(d: string): { sql: string } }, p: Record<string, unknown>, ...rest: unknown[]) => unknown;
  const runner = (app.store as { runner: { exec: Exec } }).runner;
  const exec = runner.exec;
  const seen: Array<{ sql: string; p: Record<string, unknown> }> = [];
  runner.exec = function (this: unknown, s, p, ...rest) {
    seen.push({ sql: s.compile('sqlite').sql, p });
    return exec.call(this, s, p, ...rest);
  };
  try {
    await fn();
  } finally {
    runner.exec = exec;
  }
  return seen;
}

describe('a new database', () => {
  it('is not searched for what no poll stored yet: the first cycle reads no snapshot, change-log row or alert state of an entity', async () => {
    world = await startWorld({ sim: { sites: 3 } });
    const app = await world.app();
    const sql = await statementsDuring(app, () => app.runOnce());
    // Every read about an entity (its head, its snapshot, its change log's last version, its
    // alert state) made before the cycle first stored that entity looked for what is not there.
    const stored = new Set<string>();
    const searched: string[] = [];
    for (const { sql: q, p } of sql) {
      if (typeof p['entity'] !== 'string') continue;
      if (q.startsWith('insert into "snapshots"')) stored.add(p['entity']);
      else if (/^select .* from "(snapshots|change_log|alerts)"/.test(q) && !stored.has(p['entity'])) searched.push(`${p['entity']}: ${q.slice(0, 60)}`);
    }
    expect(stored.size).toBeGreaterThan(10);
    expect(searched).toEqual([]);
    // The cycle stored every entity as usual, and a second cycle reads them as before.
    expect(count(world, 'SELECT count(*) n FROM snapshots WHERE site_id = 3')).toBeGreaterThan(3);
    world.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    expect(names(world.events)).toContain('site.offline:firing');
  });

  it('sees an earlier poll of the same entity that is not committed yet: two polls at once store versions 1 and 2, and the second is a change', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    const app = await world.app();
    await app.poller.poll(sitesSource, null);
    const ref = entityOf(sourceByName('backups')!, app.poller.sites()[0]!);
    const backup = (id: number) => ({ id, created_at: '2026-11-20T10:00:00Z', type: 'Manual', state: 'Ok', size_bytes: 1, is_blueprint: false, locked: false });
    // Both in one batch: the second unit runs after the first, in the same transaction.
    const outcomes = await Promise.all([app.poller.ingest(ref, [backup(1)], 0), app.poller.ingest(ref, [backup(2), backup(1)], 0)]);
    expect(outcomes.map((o) => o.status)).toEqual(['baseline', 'changed']);
    expect(rows<{ version: number }>(world, `SELECT version FROM change_log WHERE entity = '${ref.entity}' ORDER BY id`).map((r) => r.version)).toEqual([1, 2]);
    expect(names(world.events).filter((n) => n.startsWith('backup.completed'))).toEqual(['backup.completed']);
  });

  it('is searched as always once it holds rows, and is new only to a process that alone writes it (the daemon\'s SQLite file, never PostgreSQL)', async () => {
    world = await startWorld({ sim: { sites: 2 } });
    const app = await world.app();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    await app.stop();
    // After a restart the stored state is read: the firing alert is not fired again.
    const again = await world.app();
    const sql = await statementsDuring(again, () => again.runOnce());
    expect(sql.filter(({ sql: q }) => q.includes('from "alerts" where "rule" in')).length).toBeGreaterThan(0);
    expect(names(world.events).filter((n) => n === 'site.offline:firing')).toHaveLength(1);
    expect(again.store.soleWriter).toBe(true);
    await again.stop();
    const reader = await openStore({ engine: 'sqlite', path: world.dbPath }, { now: () => 0, daemon: false });
    expect(reader.soleWriter).toBe(false);
    await reader.close();
  });
});

describe('the first poll', () => {
  it('is a baseline: no change events, even though every backup and site is new', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    expect(world.events).toEqual([]);
    // sites, jobs, 3 × (health, usage, backups); the other sources have their own tests.
    expect(count(world, "SELECT count(*) n FROM snapshots WHERE source IN ('sites', 'jobs', 'health', 'usage', 'backups')")).toBe(1 + 1 + 3 * 3);
  });

  it('writes no per-entity poll state; an entity gets a row when it fails, reset (not dropped) once it recovers', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const perEntity = (): unknown[] => rows(world, "SELECT entity, consecutive_failures, last_error_code FROM poll_state WHERE entity != '' ORDER BY entity");
    expect(perEntity()).toEqual([]);
    // Each source still has its own row, with the cycle's last success.
    expect(count(world, "SELECT count(*) n FROM poll_state WHERE entity = '' AND last_success_at IS NOT NULL")).toBe(cycleSources(app).length);
    world.sim.faults.add({ path: '^/sites/2/usage$', kind: 'status', status: 500 });
    await app.runOnce();
    expect(perEntity()).toEqual([{ entity: 'sites/2/usage', consecutive_failures: 1, last_error_code: 'internal_error' }]);
    world.sim.faults.clear();
    await app.runOnce();
    expect(perEntity()).toEqual([{ entity: 'sites/2/usage', consecutive_failures: 0, last_error_code: null }]);
    // A restart reads the failing entities from this table: nothing is left counted as failing.
    await app.stop();
    const again = await world.app();
    world.sim.faults.add({ path: '^/sites/2/usage$', kind: 'status', status: 500 });
    await again.runOnce();
    expect(perEntity()).toEqual([{ entity: 'sites/2/usage', consecutive_failures: 1, last_error_code: 'internal_error' }]);
  });

  it('evaluates alert conditions, so a site already offline fires once', async () => {
    world = await startWorld();
    world.sim.world.setHealth(2, { status: 'offline' });
    await (await world.app()).runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    expect(world.events[0]!.subject).toBe('sites/2/health');
    expect(world.events[0]!.data.site_id).toBe(2);
  });
});

describe('changes after the baseline', () => {
  it('emit exactly the change events the simulator caused, with subjects and data', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const { backup } = world.sim.world.startBackup(1);
    world.sim.world.setBackupState(1, backup.id, 'Error');
    const site = world.sim.world.addSite();
    await app.runOnce();
    const got = names(world.events).sort();
    expect(got).toEqual(['backup.failed', 'job.failed', 'site.added'].sort());
    const failed = world.events.find((e) => e.data.name === 'backup.failed')!;
    expect(failed.subject).toBe(`sites/1/backups/${backup.id}`);
    expect(failed.type).toBe('hostwatch.backup.failed');
    expect(failed.data.status).toBeUndefined();
    expect(failed.data.changes).toEqual([{ path: `[id=${backup.id}]`, before: null, after: expect.objectContaining({ state: 'Error' }) }]);
    const added = world.events.find((e) => e.data.name === 'site.added')!;
    expect(added.subject).toBe(`sites/${site.id}`);
    expect(added.data.domain).toBe(site.domain);
  });

  it('report a state transition of a known record with its before and after values', async () => {
    world = await startWorld();
    const app = await world.app();
    const { backup } = world.sim.world.startBackup(2);
    await app.runOnce(); // baseline sees the backup Pending
    world.sim.world.setBackupState(2, backup.id, 'Ok');
    await app.runOnce();
    const done = world.events.find((e) => e.data.name === 'backup.completed')!;
    expect(done.data.changes).toContainEqual({ path: 'state', before: 'Pending', after: 'Ok' });
    expect(done.data.changes.map((c) => c.path)).not.toContain('id');
    expect(names(world.events).sort()).toEqual(['backup.completed', 'job.completed']);
  });

  it('a reordered list with the same records is not a change', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const before = count(world, 'SELECT sum(version) n FROM snapshots');
    // Same backups, listed in another order: the simulator lists newest first, so adding
    // and removing nothing but re-listing must be a no-op; run twice to be sure.
    await app.runOnce();
    await app.runOnce();
    expect(world.events).toEqual([]);
    expect(count(world, 'SELECT sum(version) n FROM snapshots')).toBe(before);
  });
});

describe('an unchanged poll', () => {
  it('writes no snapshot row and no per-site poll state: one state row per source, whatever the number of sites', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const d = db(world);
    // total_changes() on the daemon's own connection: every row it inserted, updated or deleted.
    const changes = (): number => (sqliteOf(app.store).prepare('SELECT total_changes() n').get() as { n: number }).n;
    const snap = d.prepare('SELECT source, entity, version, changed_at FROM snapshots ORDER BY 1, 2').all();
    const state = d.prepare("SELECT * FROM poll_state WHERE entity != '' ORDER BY 1, 2").all();
    const c0 = changes();
    await app.runOnce();
    expect(d.prepare('SELECT source, entity, version, changed_at FROM snapshots ORDER BY 1, 2').all()).toEqual(snap);
    expect(d.prepare("SELECT * FROM poll_state WHERE entity != '' ORDER BY 1, 2").all()).toEqual(state);
    // Exactly one write per source (its cycle state), none per site.
    expect(changes() - c0).toBe(cycleSources(app).length);
    const perSource = d.prepare("SELECT count(*) n FROM poll_state WHERE entity = ''").get() as { n: number };
    expect(perSource.n).toBe(cycleSources(app).length);
    d.close();
  });
});

describe('a failed fetch', () => {
  const faults = [
    { label: 'a 500', spec: { kind: 'status', status: 500 } },
    { label: 'a 503', spec: { kind: 'status', status: 503 } },
    { label: 'a 429 with Retry-After', spec: { kind: 'rate_limit', retry_after: 0 } },
    { label: 'truncated JSON', spec: { kind: 'truncated' } },
    { label: 'a reset connection', spec: { kind: 'reset' } },
    { label: 'a timeout', spec: { kind: 'latency', ms: 1500 } },
  ] as const;

  for (const f of faults) {
    it(`(${f.label}) emits no change event and keeps the previous snapshot`, async () => {
      world = await startWorld({ config: { api: { timeout: '500ms' } } });
      const app = await world.app();
      await app.runOnce();
      const snapBefore = count(world, "SELECT version n FROM snapshots WHERE entity = 'sites/1/backups'");
      world.sim.faults.add({ path: '^/sites/1/backups$', ...f.spec });
      world.sim.faults.add({ path: '^/sites$', ...f.spec });
      // The world changes while the fetch fails: no event may come of a failed fetch.
      const { backup } = world.sim.world.startBackup(1);
      world.sim.world.setBackupState(1, backup.id, 'Error');
      world.sim.world.removeSite(3);
      await app.runOnce();
      expect(names(world.events).filter((n) => !n.startsWith('job.'))).toEqual([]);
      expect(count(world, "SELECT version n FROM snapshots WHERE entity = 'sites/1/backups'")).toBe(snapBefore);
      const st = db(world).prepare("SELECT consecutive_failures, last_error_code FROM poll_state WHERE entity = 'sites/1/backups'").get() as {
        consecutive_failures: number;
        last_error_code: string;
      };
      expect(st.consecutive_failures).toBe(1);
      expect(world.logs.text).toContain('/sites/1/backups');
      // Once the API answers again, the change is seen exactly once.
      world.sim.faults.clear();
      await app.runOnce();
      expect(names(world.events).filter((n) => !n.startsWith('job.')).sort()).toEqual(['backup.failed', 'site.removed']);
    });
  }

  it('on the second page of a paged list is not a removal of the records on it', async () => {
    world = await startWorld();
    const app = await world.app();
    const known = Array.from({ length: 5 }, () => world.sim.world.addJob({ type: 'backup', state: 'running' }));
    await app.runOnce();
    // 205 newer jobs: page 1 (200 records) holds none of the known ones, so reading goes on to page 2.
    for (let i = 0; i < 205; i++) world.sim.world.addJob({ type: 'backup', state: 'running' });
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500, page: 2 });
    // A known job (now on page 2) finishes meanwhile: the list as a whole failed, so it is not reported yet.
    world.sim.world.setJobState(known[0]!.id, 'done');
    await app.runOnce();
    expect(world.events).toEqual([]);
    const row = db(world).prepare("SELECT body FROM snapshots WHERE entity = 'jobs'").get() as { body: string };
    expect((JSON.parse(row.body) as unknown[]).length).toBe(5);
    world.sim.faults.clear();
    await app.runOnce();
    expect(names(world.events)).toEqual(['job.completed']);
  });

  it('with bad data (a record without id) is logged with the endpoint and changes nothing', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.faults.add({ path: '^/sites$', kind: 'truncated' });
    await app.runOnce();
    const line = world.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l['endpoint'] === '/sites');
    expect(line).toMatchObject({ code: 'bad_response', source: 'sites' });
    expect(world.events).toEqual([]);
  });
});

describe('an alert', () => {
  it('fires once, stays quiet while the condition holds, and resolves once', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    await app.runOnce();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'online' });
    await app.runOnce();
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing', 'site.offline:resolved']);
    const [fired, resolved] = world.events;
    expect(fired!.id).not.toBe(resolved!.id);
    expect(resolved!.data.summary).toMatch(/back online/);
  });

  it('that fires a second time gets new ids', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    for (const status of ['offline', 'online', 'offline', 'online']) {
      world.sim.world.setHealth(1, { status });
      await app.runOnce();
    }
    expect(names(world.events)).toEqual([
      'site.offline:firing',
      'site.offline:resolved',
      'site.offline:firing',
      'site.offline:resolved',
    ]);
    expect(new Set(world.events.map((e) => e.id)).size).toBe(4);
  });

  it('is not re-sent after a restart while its condition still holds', async () => {
    world = await startWorld();
    world.sim.world.setHealth(1, { status: 'offline' });
    const first = await world.app();
    await first.runOnce();
    await first.stop();
    const second = await world.app();
    await second.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
  });

  it('puts the events of records found in one poll in the feed oldest first, though the API lists them newest first', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const base = world.events.length;
    const ids = [1, 2, 3].map(() => world!.sim.world.addBackup(1, { state: 'Ok', type: 'Manual' }).id);
    await app.runOnce();
    const got = world.events.slice(base).filter((e) => e.data.name === 'backup.completed');
    expect(got.map((e) => e.subject)).toEqual(ids.map((id) => `sites/1/backups/${id}`));
    // The feed's order is the commit's: the same, by seq.
    expect(rows<{ subject: string }>(world, "SELECT subject FROM events WHERE type = 'hostwatch.backup.completed' ORDER BY seq").map((r) => r.subject)).toEqual(
      got.map((e) => e.subject),
    );
  });

  it('resolves when its site disappears from the site list', async () => {
    world = await startWorld();
    const app = await world.app();
    world.sim.world.setHealth(3, { status: 'offline' });
    await app.runOnce();
    world.sim.world.removeSite(3);
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing', 'site.removed', 'site.offline:resolved']);
    // Not "is back online": the site did not come back, it left.
    expect(world.events[2]!.data.summary).toBe('site-3.example.com was removed from the account, so its site.offline alert is resolved');
  });

  it('on disk use honours a threshold parameter overridden in a user rule file', async () => {
    const { writeFileSync } = await import('node:fs');
    world = await startWorld();
    const file = `${world.dir}/overrides.yaml`;
    writeFileSync(file, 'rules:\n  - name: usage-disk-high\n    params: { threshold: 50 }\n');
    const app = await world.app({ rules: [file] });
    await app.runOnce();
    const usage = world.sim.world.getUsage(1)!;
    world.sim.world.setUsage(1, { diskUsedMib: Math.round(usage.disk.limit_mib * 0.6) });
    await app.runOnce();
    expect(names(world.events)).toContain('usage.disk_high:firing');
    expect(world.events.find((e) => e.data.name === 'usage.disk_high')!.data.summary).toContain('threshold 50%');
  });
});

describe('the site list', () => {
  it('forgets a removed site, so its failed polls do not keep source.degraded firing', async () => {
    world = await startWorld();
    const app = await world.app();
    world.sim.faults.add({ path: '^/sites/3/health$', kind: 'status', status: 500 });
    for (let i = 0; i < 3; i++) await app.runOnce();
    expect(names(world.events)).toEqual(['source.degraded:firing']);
    expect(world.events[0]!.data['failing']).toBe(1);
    world.sim.world.removeSite(3);
    await app.runOnce();
    expect(names(world.events)).toEqual(['source.degraded:firing', 'site.removed', 'source.degraded:resolved']);
    expect(count(world, 'SELECT count(*) n FROM snapshots WHERE site_id = 3')).toBe(0);
    expect(count(world, 'SELECT count(*) n FROM poll_state WHERE site_id = 3')).toBe(0);
  });

  it('a site that leaves the list and comes back goes on with its version numbers, so a later change is a new event, not a stored id', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    const site3 = app.poller.sites().find((s) => s.id === 3)!;
    const hourly = sourceByName('hourly_backups')!;
    const ref = entityOf(hourly, site3);
    const reply = (lastError: string): Record<string, unknown> => ({ enabled: true, last_run_at: '2026-11-21T10:00:00Z', last_error: lastError });
    const sitesRef = entityOf(sitesSource, null);
    const siteList = [...world.sim.world.sites];
    await app.poller.ingest(ref, reply(''), 0); // version 2 (after the cycle's baseline)
    await app.poller.ingest(ref, reply('disk full'), 0); // version 3: hourly_backup.failed
    await app.poller.ingest(sitesRef, siteList.filter((s) => s.id !== 3), 0); // site 3 leaves: its snapshots go
    await app.poller.ingest(sitesRef, siteList, 0); // and comes back
    await app.poller.ingest(ref, reply(''), 0); // a new baseline
    await app.poller.ingest(ref, reply('quota'), 0); // another failure
    await app.poller.ingest(ref, reply('disk full'), 0); // the first failure again, as many changes later
    const failed = world.events.filter((e) => e.data.name === 'hourly_backup.failed');
    expect(failed.map((e) => e.data.summary)).toEqual([
      'Hourly backup of site-3.example.com failed: disk full',
      'Hourly backup of site-3.example.com failed: quota',
      'Hourly backup of site-3.example.com failed: disk full',
    ].map((t) => t.replace('site-3.example.com', site3.domain)));
    expect(new Set(failed.map((e) => e.id)).size).toBe(3);
  });

  it('with `sites: [ids]` only those sites are polled, and events about others are not sent', async () => {
    world = await startWorld({ sim: { sites: 4 }, config: { sites: [1, 2] } });
    const app = await world.app();
    await app.runOnce();
    world.sim.world.addSite();
    world.sim.world.setHealth(2, { status: 'offline' });
    world.sim.world.setHealth(3, { status: 'offline' });
    world.sim.world.addJob({ type: 'backup', site_id: 4, state: 'failed' });
    await app.runOnce();
    expect(names(world.events)).toEqual(['site.offline:firing']);
    expect(world.events[0]!.data.site_id).toBe(2);
    const polled = new Set(world.sim.requests.map((r) => /^\/api\/v1\/sites\/(\d+)\//.exec(r.path)?.[1]).filter(Boolean));
    expect(polled).toEqual(new Set(['1', '2']));
  });
});

describe('source state', () => {
  it('is recorded once per cycle with the last success and the last error', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    await app.runOnce();
    const rows = db(world).prepare("SELECT source, last_success_at, consecutive_failures, last_error_code FROM poll_state WHERE entity = '' ORDER BY source").all() as Array<{
      source: string;
      last_success_at: number | null;
      consecutive_failures: number;
      last_error_code: string | null;
    }>;
    expect(rows.map((r) => r.source)).toEqual(cycleSources(app));
    const jobs = rows.find((r) => r.source === 'jobs')!;
    expect(jobs).toMatchObject({ consecutive_failures: 1, last_error_code: 'internal_error' });
    expect(jobs.last_success_at).not.toBeNull();
    expect(rows.find((r) => r.source === 'health')).toMatchObject({ consecutive_failures: 0, last_error_code: null });
  });
});

describe('a key without a scope', () => {
  it('yields one source.scope_missing naming the scope, while other sources keep working', async () => {
    const key = 'limited-key-abcdef';
    world = await startWorld({
      // Every read scope the sources need except backups:read.
      sim: { sites: 8, keys: { [key]: [...new Set(enabledSources(configOf()).map((s) => s.def.scope))].filter((x) => x !== 'backups:read') } },
      env: { API_KEY: key },
      config: { api: { max_concurrency: 2 } },
    });
    const app = await world.app();
    await app.runOnce();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    // backups and hourly_backups both need backups:read: one event each, then the change.
    expect(names(world.events)).toEqual(['source.scope_missing:firing', 'source.scope_missing:firing', 'site.offline:firing']);
    expect(world.events.slice(0, 2).map((e) => e.subject).sort()).toEqual(['sources/backups', 'sources/hourly_backups']);
    const ev = world.events.find((e) => e.subject === 'sources/backups')!;
    expect(ev.data['required']).toBe('backups:read');
    // A failing scope is not a storm: the per-site source stops at the first 403 of a cycle.
    // Without that, 3 cycles × 8 sites would make 24 calls; with it, at most 2 (the pool) a cycle.
    const backupCalls = world.sim.requests.filter((r) => r.path.endsWith('/backups')).length;
    expect(backupCalls).toBeLessThanOrEqual(3 * 2);
  });
});

describe('secrets', () => {
  it('(the API key and the webhook secret) never appear in logs, the database or events', async () => {
    const secret = 'whsec_c3VwZXItc2VjcmV0LXdlYmhvb2sta2V5LTEyMw==';
    const secretBytes = secret.slice('whsec_'.length);
    world = await startWorld({ sim: { keys: { [TEST_KEY]: ['sites:read'] } }, env: { HOOK_SECRET: secret } });
    // A receiver that is not there: delivery errors get logged and stored.
    const app = await world.app({
      channels: [{ name: 'hook', type: 'webhook', url: 'http://127.0.0.1:9/hook', secret: '${HOOK_SECRET}' }],
      delivery: { retry_schedule: ['100ms'], drain_timeout: '1s' },
    });
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    await app.stop();
    expect(world.logs.lines.length).toBeGreaterThan(5);
    expect(world.logs.text).toContain('delivery'); // the failing deliveries were logged
    const { readFileSync, readdirSync } = await import('node:fs');
    for (const needle of [TEST_KEY, secret, secretBytes]) {
      expect(world.logs.text).not.toContain(needle);
      for (const f of readdirSync(world.dir)) {
        expect(readFileSync(`${world.dir}/${f}`).includes(needle), `${f} holds a secret`).toBe(false);
      }
      expect(JSON.stringify(world.events)).not.toContain(needle);
    }
    const attempts = count(world, 'SELECT count(*) n FROM delivery_attempts WHERE error IS NOT NULL');
    expect(attempts).toBeGreaterThan(0);
    // And the requests did carry the key: the check above is not vacuous.
    expect(world.sim.requests.length).toBeGreaterThan(0);
  });
});

describe('polling', () => {
  it('only ever sends GET requests', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    expect(world.sim.requests.length).toBeGreaterThan(10);
    expect(new Set(world.sim.requests.map((r) => r.method))).toEqual(new Set(['GET']));
  });
});
