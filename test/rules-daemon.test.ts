import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import type { App } from '../src/main.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { healthSource, usageSource } from '../src/sources/registry.js';
import { HistoryRepo } from '../src/store/history-repo.js';
import { openStore } from '../src/store/db.js';
import { names, startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';

let world: World | null = null;
let receiver: Receiver | null = null;
afterEach(async () => {
  await world?.close();
  await receiver?.close();
  world = null;
  receiver = null;
});

const MIN = 60_000;
const START = Date.parse('2026-11-21T10:00:00Z');

/** A clock the test moves by hand. */
function clock(start = START): { now: () => number; advance: (ms: number) => void; set: (t: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms), set: (v) => (t = v) };
}

/** Write a user rule file into the world's folder and return its path. */
function ruleFile(w: World, name: string, text: string): string {
  const path = join(w.dir, name);
  writeFileSync(path, text);
  return path;
}

function query<T>(w: World, sql: string, ...args: unknown[]): T[] {
  const db = new BetterSqlite3(w.dbPath, { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all(...args) as T[];
  } finally {
    db.close();
  }
}

/** Poll the health of site 1 once. */
async function pollHealth(app: App): Promise<void> {
  const site = app.poller.sites().find((s) => s.id === 1)!;
  await app.poller.poll(healthSource, site);
}

const TIMED = `rules:
  - { name: site-offline, for: 3m, keep_firing_for: 3m }
`;

describe('alert timers in the daemon', () => {
  it('turn flapping input (offline/online/offline every poll) into one firing and one resolved', async () => {
    world = await startWorld();
    const c = clock();
    const app = await world.app({ rules: [ruleFile(world, 'timed.yaml', TIMED)] }, { now: c.now });
    await app.runOnce();
    const sequence = [
      // A short flap before the outage: never held for 3m, so nothing fires.
      'offline', 'online', 'offline', 'online',
      // The outage: held 3m, fires once.
      'offline', 'offline', 'offline', 'offline',
      // It flaps while recovering: each online poll is shorter than keep_firing_for.
      'online', 'offline', 'online', 'offline', 'online', 'offline',
      // Stable again: resolves once after 3m.
      'online', 'online', 'online', 'online', 'online',
    ] as const;
    for (const status of sequence) {
      c.advance(MIN);
      world.sim.world.setHealth(1, { status });
      await pollHealth(app);
    }
    const offline = world.events.filter((e) => e.data.name === 'site.offline');
    expect(names(offline)).toEqual(['site.offline:firing', 'site.offline:resolved']);
    // Fired 3 minutes after the outage began (offline from the 10:05 poll, fired at 10:08)…
    expect(offline[0]!.time).toBe('2026-11-21T10:08:00.000Z');
    // …and resolved 3 minutes after it was last seen online for good (10:15 → 10:18).
    expect(offline[1]!.time).toBe('2026-11-21T10:18:00.000Z');
  });

  it('keep a pending alert across a restart: a new app on the same SQLite file fires when `for` has passed', async () => {
    world = await startWorld();
    const c = clock();
    const rules = [ruleFile(world, 'timed.yaml', TIMED)];
    const first = await world.app({ rules }, { now: c.now });
    await first.runOnce();
    c.advance(MIN);
    world.sim.world.setHealth(1, { status: 'offline' });
    await pollHealth(first); // pending from 10:01
    c.advance(MIN);
    await pollHealth(first); // 10:02, still pending
    expect(world.events.filter((e) => e.data.name === 'site.offline')).toEqual([]);
    await first.stop();
    expect(query(world, "SELECT status, seq, pending_since FROM alerts WHERE rule = 'site-offline' AND subject = 'sites/1/health'")).toEqual([
      { status: 'resolved', seq: 0, pending_since: START + MIN },
    ]);

    const second = await world.app({ rules }, { now: c.now });
    c.advance(MIN); // 10:03: two minutes pending, not yet three
    await second.runOnce();
    expect(world.events.filter((e) => e.data.name === 'site.offline')).toEqual([]);
    c.advance(MIN); // 10:04: three minutes since 10:01, and the snapshot has not changed
    await pollHealth(second);
    const fired = world.events.filter((e) => e.data.name === 'site.offline');
    expect(names(fired)).toEqual(['site.offline:firing']);
    expect(fired[0]!.time).toBe('2026-11-21T10:04:00.000Z');
  });

  it('re-send a still-firing alert every `repeat` with a new id, on unchanged polls', async () => {
    world = await startWorld();
    const c = clock();
    const app = await world.app({ rules: [ruleFile(world, 'repeat.yaml', 'rules:\n  - { name: site-offline, repeat: 4h }\n')] }, { now: c.now });
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    for (let i = 0; i < 9; i++) {
      c.advance(60 * MIN);
      await pollHealth(app);
    }
    const offline = world.events.filter((e) => e.data.name === 'site.offline');
    expect(offline.map((e) => [e.time, e.data['repeat'] ?? 0])).toEqual([
      ['2026-11-21T10:00:00.000Z', 0],
      ['2026-11-21T14:00:00.000Z', 1],
      ['2026-11-21T18:00:00.000Z', 2],
    ]);
    expect(new Set(offline.map((e) => e.id)).size).toBe(3);
    // Every re-send names the same alert: the firing's id (a pager adds it to the same incident).
    expect(offline.map((e) => e.data['alert_id'])).toEqual([offline[0]!.id, offline[0]!.id, offline[0]!.id]);
  });

  it('write nothing on an unchanged poll when no timer runs, and only what a timer needs when one does', async () => {
    world = await startWorld();
    const c = clock();
    const app = await world.app({ rules: [ruleFile(world, 'timed.yaml', 'rules:\n  - { name: site-offline, for: 10m }\n')] }, { now: c.now });
    await app.runOnce();
    const watcher = new BetterSqlite3(world.dbPath, { readonly: true });
    const version = (): number => watcher.pragma('data_version', { simple: true }) as number;
    try {
      const v0 = version();
      for (let i = 0; i < 3; i++) {
        c.advance(MIN);
        await pollHealth(app);
      }
      expect(version()).toBe(v0);
      world.sim.world.setHealth(1, { status: 'offline' });
      c.advance(MIN);
      await pollHealth(app); // a changed snapshot and a pending timer: one commit
      const v1 = version();
      expect(v1).not.toBe(v0);
      c.advance(MIN);
      await pollHealth(app); // pending, unchanged, not yet 10m: planned but nothing to write
      expect(version()).toBe(v1);
      c.advance(10 * MIN);
      await pollHealth(app); // 10m held: fires without a new snapshot
      expect(version()).not.toBe(v1);
      expect(names(world.events.filter((e) => e.data.name === 'site.offline'))).toEqual(['site.offline:firing']);
    } finally {
      watcher.close();
    }
  });
});

describe('rate of change over a window in the daemon', () => {
  it('reads `past` from the stored change log', async () => {
    world = await startWorld();
    const c = clock();
    const rules = ruleFile(
      world,
      'growth.yaml',
      `rules:
  - name: disk-growth
    event: usage.disk_growth
    kind: alert
    source: usage
    window: 1h
    when: "past != null && after.disk.used_mib - past.disk.used_mib >= 100.0"
    summary: "{{ domain }} disk grew from {{ past.disk.used_mib }} to {{ after.disk.used_mib }} MiB in an hour"
`,
    );
    const app = await world.app({ rules: [rules] }, { now: c.now });
    const used = world.sim.world.getUsage(1)!.disk.used_mib;
    await app.runOnce();
    const site = app.poller.sites().find((s) => s.id === 1)!;
    for (const [minutes, extra] of [[30, 60], [60, 90], [90, 160]] as const) {
      c.set(START + minutes * MIN);
      world.sim.world.setUsage(1, { diskUsedMib: used + extra });
      await app.poller.poll(usageSource, site);
    }
    // At 60m the reading an hour old is the baseline (+90: no); at 90m it is the 30m one (+100: fires).
    const growth = world.events.filter((e) => e.data.name === 'usage.disk_growth');
    expect(growth.map((e) => [e.time, e.data.summary])).toEqual([
      ['2026-11-21T11:30:00.000Z', `${growth[0]?.data.domain} disk grew from ${used + 60} to ${used + 160} MiB in an hour`],
    ]);
    // The disk stays where it is (no new snapshot; the poll may be a 304). An hour on, the
    // growth is out of the window: the alert resolves on time alone.
    c.set(START + 160 * MIN);
    await app.poller.poll(usageSource, site);
    expect(world.events.filter((e) => e.data.name === 'usage.disk_growth').map((e) => [e.time, e.data.status])).toEqual([
      ['2026-11-21T11:30:00.000Z', 'firing'],
      ['2026-11-21T12:40:00.000Z', 'resolved'],
    ]);
  });
});

describe('shadow rules', () => {
  it('store their events, marked shadow, and deliver nothing to a real webhook receiver', async () => {
    receiver = await startReceiver();
    world = await startWorld();
    const rules = ruleFile(
      world,
      'shadow.yaml',
      `rules:
  - { name: site-offline, mode: shadow }
  - name: slow-try
    event: site.slow_try
    kind: alert
    source: health
    mode: shadow
    when: "after.online.status == 'slow'"
`,
    );
    const app = await world.app({ rules: [rules], channels: [{ name: 'hooks', type: 'webhook', url: receiver.url, secret: TEST_SECRET }] });
    world.sim.world.setHealth(1, { status: 'offline' });
    world.sim.world.setHealth(2, { status: 'slow' });
    world.sim.world.setUsage(3, { frozen: true }); // a live rule, delivered: the receiver works
    await app.runOnce();
    const logged = query<{ type: string; body: string }>(world, 'SELECT type, body FROM events ORDER BY seq');
    expect(logged.map((r) => r.type).sort()).toEqual(['hostwatch.site.frozen', 'hostwatch.site.offline', 'hostwatch.site.slow', 'hostwatch.site.slow_try'].sort());
    const shadow = logged.filter((r) => JSON.parse(r.body).data.shadow === true).map((r) => r.type);
    expect(shadow.sort()).toEqual(['hostwatch.site.offline', 'hostwatch.site.slow_try']);
    expect(query(world, "SELECT count(*) AS n FROM outbox o JOIN events e ON e.id = o.event_id WHERE e.type IN ('hostwatch.site.offline', 'hostwatch.site.slow_try')")).toEqual([{ n: 0 }]);
    expect(receiver.accepted().map((r) => r.event!.type).sort()).toEqual(['hostwatch.site.frozen', 'hostwatch.site.slow']);
  });
});

describe('the change log', () => {
  it('gets every stored snapshot version, in the poll transaction, and evidence for each event', async () => {
    world = await startWorld();
    const c = clock();
    const app = await world.app({}, { now: c.now });
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    c.advance(MIN);
    await pollHealth(app);
    c.advance(MIN);
    await pollHealth(app); // unchanged: no new version
    const rows = query<{ version: number; at: number }>(world, "SELECT version, at FROM change_log WHERE entity = 'sites/1/health' ORDER BY id");
    expect(rows).toEqual([{ version: 1, at: START }, { version: 2, at: START + MIN }]);
    const fired = world.events.find((e) => e.data.name === 'site.offline')!;
    const ev = JSON.parse(query<{ body: string }>(world, 'SELECT body FROM event_evidence WHERE event_id = ?', fired.id)[0]!.body);
    expect(ev).toMatchObject({ rule: 'site-offline', expr: 'when', verdict: { value: true }, seen: { 'after.online.status': 'offline' }, versions: { before: 1, after: 2 } });
  });

  it('is pruned past history.retention, keeping the newest version of each entity, at start and on schedule', async () => {
    world = await startWorld();
    const c = clock();
    const app = await world.app({ history: { retention: '1d' } }, { now: c.now });
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    c.advance(MIN);
    await pollHealth(app);
    world.sim.world.setHealth(1, { status: 'online' });
    c.advance(MIN);
    await pollHealth(app);
    const total = (): number => query<{ n: number }>(world!, 'SELECT count(*) AS n FROM change_log')[0]!.n;
    const entities = query<{ n: number }>(world, 'SELECT count(DISTINCT source || entity) AS n FROM change_log')[0]!.n;
    expect(total()).toBe(entities + 2);
    expect(await app.pruneHistory()).toEqual({ changeLog: 0, evidence: 0, deliveries: 0 });
    c.advance(2 * 86_400_000);
    await app.stop();
    // A new daemon prunes at start: two old health versions and both events' evidence go;
    // every entity keeps its newest version.
    const second = await world.app({ history: { retention: '1d', prune_every: '1h' } }, { now: c.now });
    // Only setInterval is faked: the prune schedule runs when the test says, the rest is real.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      await second.start();
      expect(total()).toBe(entities);
      expect(query(world, 'SELECT count(*) AS n FROM event_evidence')).toEqual([{ n: 0 }]);
      expect(query(world, "SELECT version FROM change_log WHERE entity = 'sites/1/health'")).toEqual([{ version: 3 }]);
      // Old history written later (by another process on the same file) goes at the next
      // scheduled prune, except the newest version of its entity.
      const writer = new BetterSqlite3(world.dbPath);
      const add = writer.prepare("INSERT INTO change_log (source, entity, site_id, version, at, body) VALUES ('health', 'sites/99/health', 99, ?, ?, '{}')");
      add.run(1, START);
      add.run(2, START + MIN);
      writer.close();
      expect(total()).toBe(entities + 2);
      vi.advanceTimersByTime(3_600_000);
      // The scheduled prune commits through the store's commit queue (which may gather for a few ms).
      for (let i = 0; i < 200 && total() !== entities + 1; i++) await new Promise((r) => setTimeout(r, 5));
      expect(total()).toBe(entities + 1);
      expect(query(world, "SELECT version FROM change_log WHERE entity = 'sites/99/health'")).toEqual([{ version: 2 }]);
    } finally {
      vi.useRealTimers();
    }
    await second.stop();
    // The repo on its own: nothing newer than the cut-off is touched.
    const store = await openStore({ engine: 'sqlite', path: world.dbPath }, { now: c.now });
    try {
      const h = new HistoryRepo(store);
      await h.add({ source: 'health', entity: 'sites/1/health', site_id: 1, version: 4, at: c.now(), body: '{}' });
      expect(await store.transaction((tx) => new HistoryRepo(tx).prune(c.now() - 1))).toEqual({ changeLog: 1, evidence: 0 });
      expect((await h.ofEntity('health', 'sites/1/health')).map((r) => r.version)).toEqual([4]);
    } finally {
      await store.close();
    }
  });
});

describe('the history config', () => {
  it('defaults to 90 days kept and an hourly prune, and refuses a retention under an hour with file and line', () => {
    const base = 'api:\n  base_url: https://panel.example.com\n  key: k\n';
    const ok = parseConfig(base, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/' });
    expect(ok.ok && ok.config.history).toEqual({ retention_ms: 90 * 86_400_000, prune_every_ms: 3_600_000 });
    const set = parseConfig(`${base}history:\n  retention: 30d\n`, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/' });
    expect(set.ok && set.config.history.retention_ms).toBe(30 * 86_400_000);
    const bad = parseConfig(`${base}history:\n  retention: 5m\n  prune_evry: 1h\n`, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/' });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.errors.map((e) => `${e.line}: ${e.path}: ${e.message}`)).toEqual([
      '5: history.retention: must be a duration of at least 1h, like 1h or 6h (got "5m")',
      '6: history.prune_evry: unknown key (did you mean prune_every?); allowed: retention, prune_every',
    ]);
  });
});
