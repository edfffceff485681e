import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/main.js';
import { explainWhyNot, type ExplainDeps } from '../src/rules/explain.js';
import { healthSource } from '../src/sources/registry.js';
import { repos } from '../src/store/repos.js';
import { SilencesRepo } from '../src/store/silences-repo.js';
import { startWorld, TEST_KEY, type World } from './harness.js';
import { hostwatch } from './run-cli.js';

const MIN = 60_000;
let world: World;
let app: App;
let t = Date.parse('2026-11-21T10:00:00Z');
let configPath: string;
let env: Record<string, string>;

const USER_RULES = `rules:
  - { name: site-frozen, mode: shadow }
  - { name: job-failed, enabled: false }
  - name: slow-long
    event: site.slow_long
    kind: alert
    source: health
    for: 10m
    when: "after.online.status == 'slow'"
  - name: went-offline
    event: site.went_offline
    kind: change
    source: health
    when: "before.online.status != 'offline' && after.online.status == 'offline'"
    dedup_key: "after.online.status"
`;

/**
 * One world for every question: site 1 offline (delivered), site 2 healthy then offline
 * twice (a deduplicated change), site 3 slow (pending) and frozen (shadow), and an
 * over-limit alert held back by a silence, and site 4's integrity problems held back while
 * it is offline (inhibition).
 */
beforeAll(async () => {
  world = await startWorld({ sim: { sites: 4 } });
  const rules = join(world.dir, 'mine.yaml');
  writeFileSync(rules, USER_RULES);
  const overrides = { rules: [rules], channels: [{ name: 'screen', type: 'console' }] };
  configPath = join(world.dir, 'config.yaml');
  writeFileSync(configPath, world.yaml(overrides));
  env = { SIM_URL: world.sim.url, API_KEY: TEST_KEY, DB: world.dbPath };
  app = await world.app(overrides, { now: () => t, consoleWrite: () => {} });
  await new SilencesRepo(app.store).add({
    id: 'sil-1',
    match: "name == 'usage.over_limit'",
    starts_at: t - MIN,
    ends_at: t + 60 * MIN,
    comment: 'disk migration',
    created_by: 'test',
    created_at: t,
    expired_at: null,
  });
  world.sim.world.setHealth(1, { status: 'offline' });
  world.sim.world.setHealth(3, { status: 'slow' });
  world.sim.world.setUsage(3, { frozen: true });
  world.sim.world.setUsage(2, { over: ['inodes'] });
  await app.runOnce();
  const site2 = app.poller.sites().find((s) => s.id === 2)!;
  for (const status of ['offline', 'online', 'offline']) {
    t += MIN;
    world.sim.world.setHealth(2, { status });
    await app.poller.poll(healthSource, site2);
  }
  t += MIN;
  await app.poller.poll(healthSource, app.poller.sites().find((s) => s.id === 3)!);
  // Site 4 goes offline, then reports integrity problems: held back by the default inhibition.
  const site4 = app.poller.sites().find((s) => s.id === 4)!;
  for (const change of [{ status: 'offline' }, { problems: 3 }]) {
    world.sim.world.setHealth(4, change);
    await app.poller.poll(healthSource, site4);
  }
  await app.worker.drain(5000);
}, 60_000);
afterAll(async () => {
  await world?.close();
});

function deps(): ExplainDeps {
  return { ...repos(app.store), rules: app.rules, now: t };
}

describe('hostwatch explain EVENT_ID', () => {
  it('shows the rule, the values its condition saw, the snapshots, the diff paths and the deliveries', async () => {
    const e = world.events.find((x) => x.data.name === 'site.offline' && x.subject === 'sites/2/health' && x.data.status === 'firing')!;
    const r = await hostwatch(['explain', e.id, '-c', configPath], { env, cwd: process.cwd() });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines.slice(0, 12)).toEqual([
      `event ${e.id}`,
      `  hostwatch.site.offline sites/2/health at 2026-11-21T10:01:00.000Z`,
      `  summary: ${e.data.summary}`,
      '  severity: critical, status: firing',
      '  labels: {"category":"availability"}',
      'rule site-offline (rules/health.yaml:7), kind alert, mode live',
      "  when: after.online.status == 'offline'",
      '  gave: true',
      '  values seen:',
      '    after.online.status = "offline"',
      'snapshots: health sites/2/health version 2 against version 1',
      '  diff paths: online.status, online.label',
    ]);
    expect(JSON.parse(lines[12]!.slice('  before: '.length))).toMatchObject({ online: { status: 'online' } });
    expect(JSON.parse(lines[13]!.slice('  after: '.length))).toMatchObject({ online: { status: 'offline' } });
    expect(lines.slice(14)).toEqual(['delivery:', '  screen: delivered after 1 attempt(s)', '']);
  });

  it('says what is missing when it is given nothing to explain, or only half of --subject and --rule, exit 2', async () => {
    const tail = ': give an EVENT_ID, or --subject S and --rule R (not both)\n';
    const cases: Array<[string[], string]> = [
      [[], 'nothing to explain was given'],
      [['--subject', 'sites/1/health'], '--rule is missing'],
      [['x', '--subject', 's', '--rule', 'r'], 'an EVENT_ID and --subject/--rule were both given'],
    ];
    for (const [args, said] of cases) {
      const r = await hostwatch(['explain', ...args, '-c', configPath], { env });
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`hostwatch explain: ${said}${tail}`);
    }
  });

  it('says when an event is unknown, exit 1', async () => {
    const r = await hostwatch(['explain', '00000000-0000-8000-8000-000000000000', '-c', configPath], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`hostwatch explain: no event with id 00000000-0000-8000-8000-000000000000 in the SQLite database ${world.dbPath}\n`);
  });
});

describe('hostwatch explain --subject S --rule R says why an event did not arrive', () => {
  it('delivered: it did arrive', async () => {
    expect((await explainWhyNot(deps(), 'sites/1/health', 'site-offline')).reason).toBe('delivered');
  });

  it('condition false, with the values it saw', async () => {
    const w = (await explainWhyNot(deps(), 'sites/1/health', 'site-slow'));
    expect(w.reason).toBe('condition_false');
    expect(w.lines).toContain('  after.online.status = "offline"');
  });

  it('pending for part of its `for`, and when it will fire', async () => {
    const w = (await explainWhyNot(deps(), 'sites/3/health', 'slow-long'));
    expect(w.reason).toBe('pending');
    expect(w.lines).toContain("when: after.online.status == 'slow' is true; pending since 2026-11-21T10:00:00.000Z (4m of for: 10m)");
    expect(w.lines).toContain('it fires at the first poll after 2026-11-21T10:10:00.000Z if it still holds');
  });

  it('deduplicated: the same dedup key was sent before', async () => {
    const w = (await explainWhyNot(deps(), 'sites/2/health', 'went-offline'));
    expect(w.reason).toBe('deduplicated');
    expect(w.lines.at(-1)).toMatch(/^the last change made event \S+ again \(dedup_key after\.online\.status\); it was first stored at 2026-11-21T10:01:00\.000Z and is not sent twice$/);
  });

  it('shadow: stored, never delivered', async () => {
    expect((await explainWhyNot(deps(), 'sites/3/usage', 'site-frozen')).reason).toBe('shadow');
  });

  it('silenced, naming the silence', async () => {
    const w = (await explainWhyNot(deps(), 'sites/2/usage', 'usage-over-limit'));
    expect(w.reason).toBe('silenced');
    expect(w.lines).toContain('silenced by sil-1: stored, not delivered');
  });

  it('inhibited: held back while site.offline fires for the same site', async () => {
    const w = (await explainWhyNot(deps(), 'sites/4/health', 'site-integrity-problems'));
    expect(w.reason).toBe('inhibited');
    expect(w.lines.at(-1)).toBe('inhibited while site.offline fires for site 4; held until that alert resolves: stored, not delivered');
  });

  it('disabled, no data, and only a baseline', async () => {
    expect((await explainWhyNot(deps(), 'jobs/1', 'job-failed')).reason).toBe('disabled');
    expect((await explainWhyNot(deps(), 'sites/99/health', 'site-offline')).reason).toBe('no_data');
    // A record id that the entity's snapshot does not have: no data, not a condition that
    // cannot be evaluated on nothing.
    const wrongId = await explainWhyNot(deps(), 'sites/1/backups/999999', 'backup-failed');
    expect(wrongId.reason).toBe('no_data');
    expect(wrongId.lines.at(-1)).toBe('the snapshot of sites/1/backups has no record 999999: a wrong id, or one not seen in its last two versions');
    expect((await explainWhyNot(deps(), 'sites/1/backups/999999', 'backup-stuck')).reason).toBe('no_data');
    expect((await explainWhyNot(deps(), 'sites/1/backups/1', 'backup-failed')).reason).toBe('baseline_only');
  });

  it('pruned: an event older than history.retention whose delivery records were pruned is not said to wait for its channel', async () => {
    const DAY = 86_400_000;
    await app.store.transaction((tx) => repos(tx).delivery.pruneDelivered(t + 1));
    const w = await explainWhyNot({ ...deps(), now: t + 2 * DAY, retentionMs: DAY }, 'sites/1/health', 'site-offline');
    expect(w.reason).toBe('pruned');
    expect(w.lines).toContain('  no record: older than history.retention, whose prune removes the records of deliveries that succeeded (or no route matched it)');
    // Within the retention, no record means no route: never queued, so not said to be.
    const within = await explainWhyNot({ ...deps(), retentionMs: DAY }, 'sites/1/health', 'site-offline');
    expect(within.reason).toBe('not_routed');
    expect(within.lines.at(-1)).toMatch(/^ {2}never queued for a channel: no route sent it to one \(hostwatch explain \S+ says why, by the routes of the config now\)$/);
  });

  it('prints the same through the CLI', async () => {
    const r = await hostwatch(['explain', '--subject', 'sites/2/usage', '--rule', 'usage-over-limit', '-c', configPath], { env });
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n').slice(0, 2)).toEqual([
      'rule usage-over-limit (rules/usage.yaml:13), kind alert, mode live, about sites/2/usage',
      'why: silenced',
    ]);
  });
});

describe('hostwatch explain EVENT_ID of an event that no route sent', () => {
  it('names the route that matched but takes no resolutions (send_resolved: false), not "no route matched"', async () => {
    const w = await startWorld({ sim: { sites: 2 } });
    try {
      const overrides = {
        channels: [{ name: 'screen', type: 'console' }],
        routes: [{ match: "severity == 'critical'", channels: ['screen'], send_resolved: false }],
      };
      const path = join(w.dir, 'routes.yaml');
      writeFileSync(path, w.yaml(overrides));
      const a = await w.app(overrides, { consoleWrite: () => {} });
      await a.runOnce();
      for (const status of ['offline', 'online']) {
        w.sim.world.setHealth(1, { status });
        await a.runOnce();
      }
      await a.stop();
      const resolved = w.events.find((e) => e.data.name === 'site.offline' && e.data.status === 'resolved')!;
      const r = await hostwatch(['explain', resolved.id, '-c', path], { env: { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath } });
      expect(r.code).toBe(0);
      expect(r.stdout.trimEnd().split('\n').at(-1)).toBe(
        'delivery: none (routes[0] matched it but has send_resolved: false, and no route after took this resolution; judged by the routes of the config now)',
      );
    } finally {
      await w.close();
    }
  });
});

describe('hostwatch explain --subject --rule of a rule that reads site', () => {
  it('evaluates it with the site the daemon gave it (id, domain, the labels of site_labels), not with no site', async () => {
    const w = await startWorld({ sim: { sites: 2 } });
    try {
      const rules = join(w.dir, 'site-rules.yaml');
      writeFileSync(
        rules,
        `rules:
  - name: beta-offline
    event: site.beta_offline
    kind: change
    source: health
    when: "after.online.status == 'offline' && site.labels.client == 'beta'"
`,
      );
      const overrides = {
        rules: [rules],
        channels: [{ name: 'screen', type: 'console' }],
        site_labels: [{ match: 'id == 1', labels: { client: 'acme' } }],
      };
      const path = join(w.dir, 'site.yaml');
      writeFileSync(path, w.yaml(overrides));
      const a = await w.app(overrides, { consoleWrite: () => {} });
      await a.runOnce();
      w.sim.world.setHealth(1, { status: 'offline' });
      await a.runOnce();
      await a.stop();
      const r = await hostwatch(['explain', '--subject', 'sites/1/health', '--rule', 'beta-offline', '-c', path], { env: { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath } });
      expect(r.stderr).toBe('');
      const lines = r.stdout.trimEnd().split('\n');
      expect(lines[1]).toBe('why: condition_false');
      expect(lines).toContain('  site.labels.client = "acme"');
    } finally {
      await w.close();
    }
  });

  it('says what became of the last resolution of an alert that holds no more: silenced, it never reached anyone', async () => {
    const w = await startWorld({ sim: { sites: 2 } });
    try {
      let now = Date.parse('2026-11-21T10:00:00Z');
      const overrides = { channels: [{ name: 'screen', type: 'console' }] };
      const a = await w.app(overrides, { now: () => now, consoleWrite: () => {} });
      await a.runOnce();
      w.sim.world.setHealth(1, { status: 'offline' });
      now += MIN;
      await a.runOnce();
      // Silenced from here on: the resolution is stored, not delivered.
      await new SilencesRepo(a.store).add({ id: 'sil-r', match: "name == 'site.offline' && site_id == 1", starts_at: now, ends_at: now + 60 * MIN, comment: 'move', created_by: 'test', created_at: now, expired_at: null });
      w.sim.world.setHealth(1, { status: 'online' });
      now += MIN;
      await a.runOnce();
      const resolution = w.events.find((e) => e.data.name === 'site.offline' && e.data.status === 'resolved')!;
      expect(resolution).toBeDefined();
      const why = await explainWhyNot({ ...repos(a.store), rules: a.rules, now }, 'sites/1/health', 'site-offline');
      expect(why.reason).toBe('condition_false');
      expect(why.lines).toContain(`its resolution, event ${resolution.id}, delivery: none (silenced by sil-r)`);
      await a.stop();
    } finally {
      await w.close();
    }
  });
});
