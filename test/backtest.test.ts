import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from '../src/store/db.js';
import { repos } from '../src/store/repos.js';
import { tempDir } from './harness.js';
import { loadRules } from '../src/rules/parse.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';

/** The built-in rules, in load order (what the CLI lists). */
function builtInRuleNames(): string[] {
  return loadRules(join(process.cwd(), 'rules'), [], { sourceNames: SOURCE_NAMES, cwd: process.cwd() }).map((r) => r.name);
}
import { hostwatch } from './run-cli.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

let dir: string;
let cleanup: () => void;
beforeEach(() => {
  ({ dir, cleanup } = tempDir());
});
afterEach(() => cleanup());

const health = (status: string): unknown => ({ site_id: 1, online: { status, label: status }, integrity: { status: 'ok', problems: 0 } });
const usage = (percent: number): unknown => ({ site_id: 2, frozen: false, over: [], disk: { used_mib: percent * 10, limit_mib: 1000, percent, over: false } });

/**
 * A known history, relative to now: what a daemon would have stored. Inside the last 7
 * days: two outages of site 1 (10 minutes and 1 hour), site 1 slow, site 2's disk at 92%
 * then 95%, and a failed backup of site 1.
 */
async function writeHistory(dbPath: string, now: number): Promise<void> {
  const store = await openStore({ engine: 'sqlite', path: dbPath }, { now: () => now });
  try {
    const r = repos(store);
    await r.snapshots.put({
      source: 'sites',
      entity: 'sites',
      site_id: null,
      hash: 'x',
      body: JSON.stringify([{ id: 1, domain: 'a.example' }, { id: 2, domain: 'b.example' }]),
      version: 1,
      changed_at: now - 10 * DAY,
    });
    const h = r.history;
    const rows: Array<[string, string, number, number, unknown]> = [
      ['health', 'sites/1/health', 1, now - 10 * DAY, health('online')], // before the window: the starting state
      ['usage', 'sites/2/usage', 2, now - 8 * DAY, usage(50)],
      ['backups', 'sites/1/backups', 1, now - 9 * DAY, []],
      ['health', 'sites/1/health', 1, now - 6 * DAY, health('offline')],
      ['health', 'sites/1/health', 1, now - 6 * DAY + 10 * MIN, health('online')],
      ['health', 'sites/1/health', 1, now - 5 * DAY, health('offline')],
      ['health', 'sites/1/health', 1, now - 5 * DAY + HOUR, health('online')],
      ['health', 'sites/1/health', 1, now - 4 * DAY, health('slow')],
      ['usage', 'sites/2/usage', 2, now - 3 * DAY, usage(92)],
      ['usage', 'sites/2/usage', 2, now - 2 * DAY, usage(95)],
      ['backups', 'sites/1/backups', 1, now - 1 * DAY, [{ id: 5, state: 'Error', type: 'Manual' }]],
    ];
    const versions = new Map<string, number>();
    for (const [source, entity, site, at, value] of rows) {
      const v = (versions.get(entity) ?? 0) + 1;
      versions.set(entity, v);
      await h.add({ source, entity, site_id: site, version: v, at, body: JSON.stringify(value) });
    }
  } finally {
    await store.close();
  }
}

function config(extra = ''): string {
  const path = join(dir, 'config.yaml');
  writeFileSync(
    path,
    `api: { base_url: http://127.0.0.1:9, key: k }
storage: { path: ./hostwatch.db }
rules: [./mine.yaml]
channels:
  - { name: oncall, type: console }
  - { name: hooks, type: console }
routes:
  - { match: "severity == 'critical'", channels: [oncall] }
  - { channels: [hooks] }
${extra}`,
  );
  return path;
}

/** The lines after the event list: the counts. */
function counts(stdout: string): string {
  return stdout.slice(stdout.indexOf('per rule:'));
}

describe('hostwatch rules backtest', () => {
  it('replays a known history and prints exact counts per rule and per channel', async () => {
    await writeHistory(join(dir, 'hostwatch.db'), Date.now());
    writeFileSync(join(dir, 'mine.yaml'), 'rules:\n  - { name: site-slow, mode: shadow }\n');
    const r = await hostwatch(['rules', 'backtest', '--since', '7d', '-c', config()], { cwd: dir });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^backtest since \\S+: ${builtInRuleNames().length} rules, 3 entities, 11 snapshots replayed, 8 events$`, 'm'));
    const events = r.stdout.split('\n').filter((l) => /^\d{4}-/.test(l)).map((l) => l.replace(/^\S+\s+/, ''));
    expect(events).toEqual([
      'site.offline:firing sites/1/health "a.example is offline"  -> oncall',
      'site.offline:resolved sites/1/health "a.example is back online"  -> oncall',
      // An absence rule: site 1's backup list held no Ok backup from the window's start on.
      'backup.stale:firing sites/1/backups "No good backup of a.example in 26 h (none in the list)"  -> hooks',
      'site.offline:firing sites/1/health "a.example is offline"  -> oncall',
      'site.offline:resolved sites/1/health "a.example is back online"  -> oncall',
      'site.slow:firing sites/1/health "a.example is slow" (shadow)  -> shadow',
      'usage.disk_high:firing sites/2/usage "b.example disk at 92% (threshold 90%)"  -> hooks',
      'backup.failed sites/1/backups/5 "Backup 5 of a.example failed"  -> hooks',
    ]);
    expect(counts(r.stdout)).toBe(
      [
        'per rule:',
        '  backup-failed    1 events (0 firing, 0 resolved, 0 repeats, 1 changes)',
        '  backup-stale     1 events (1 firing, 0 resolved, 0 repeats, 0 changes)',
        '  site-offline     4 events (2 firing, 2 resolved, 0 repeats, 0 changes)',
        '  site-slow        1 events (1 firing, 0 resolved, 0 repeats, 0 changes)',
        '  usage-disk-high  1 events (1 firing, 0 resolved, 0 repeats, 0 changes)',
        'per channel:',
        '  (shadow: not delivered)  1',
        '  hooks                    3',
        '  oncall                   4',
        '',
      ].join('\n'),
    );
  });

  it('runs timers between stored changes: with for: 30m only the 1-hour outage fires, 30 minutes in', async () => {
    const now = Date.now();
    await writeHistory(join(dir, 'hostwatch.db'), now);
    writeFileSync(join(dir, 'mine.yaml'), 'rules:\n  - { name: site-offline, for: 30m }\n');
    const r = await hostwatch(['rules', 'backtest', '--since', '7d', '--rule', 'site-offline', '-c', config()], { cwd: dir });
    expect(r.code).toBe(0);
    const events = r.stdout.split('\n').filter((l) => /^\d{4}-/.test(l));
    expect(events).toEqual([
      `${new Date(now - 5 * DAY + 30 * MIN).toISOString()}  site.offline:firing sites/1/health "a.example is offline"  -> oncall`,
      `${new Date(now - 5 * DAY + HOUR).toISOString()}  site.offline:resolved sites/1/health "a.example is back online"  -> oncall`,
    ]);
    expect(counts(r.stdout)).toBe(
      ['per rule:', '  site-offline  2 events (1 firing, 1 resolved, 0 repeats, 0 changes)', 'per channel:', '  oncall  2', ''].join('\n'),
    );
  });

  it('tries a disabled rule named with --rule, and only that rule; --since limits the window', async () => {
    await writeHistory(join(dir, 'hostwatch.db'), Date.now());
    writeFileSync(join(dir, 'mine.yaml'), 'rules:\n  - { name: usage-disk-high, enabled: false, params: { threshold: 95, resolve_below: 95 } }\n');
    const all = await hostwatch(['rules', 'backtest', '--since', '7d', '--rule', 'usage-disk-high', '-c', config()], { cwd: dir });
    expect(counts(all.stdout)).toBe(
      ['per rule:', '  usage-disk-high  1 events (1 firing, 0 resolved, 0 repeats, 0 changes)', 'per channel:', '  hooks  1', ''].join('\n'),
    );
    expect(all.stdout).toContain('"b.example disk at 95% (threshold 95%)"');
    const recent = await hostwatch(['rules', 'backtest', '--since', '36h', '--rule', 'site-offline', '-c', config()], { cwd: dir });
    expect(counts(recent.stdout)).toBe(['per rule:', '  (none)', 'per channel:', '  (none)', ''].join('\n'));
  });

  it('shows its --since default as a duration in --help, not milliseconds', async () => {
    const r = await hostwatch(['rules', 'backtest', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--since <duration> +how far back to replay \(e\.g\. 7d, 30d\) \(default: 30d\)/);
    expect(r.stdout).not.toContain('2592000000');
  });

  it('understands clock and absence rules and site labels: a backup that stopped 3 days ago goes stale 26 h after it, to the channel its client label routes to, and resolves when one arrives', async () => {
    const now = Date.now();
    const store = await openStore({ engine: 'sqlite', path: join(dir, 'hostwatch.db') }, { now: () => now });
    const iso = (t: number): string => new Date(t).toISOString();
    try {
      const h = repos(store).history;
      await h.add({ source: 'sites', entity: 'sites', site_id: null, version: 1, at: now - 9 * DAY, body: JSON.stringify([{ id: 1, domain: 'shop.acme.example' }, { id: 2, domain: 'b.example' }]) });
      await h.add({ source: 'backups', entity: 'sites/1/backups', site_id: 1, version: 1, at: now - 5 * DAY, body: JSON.stringify([{ id: 7, state: 'Ok', created_at: iso(now - 5 * DAY) }]) });
      await h.add({ source: 'backups', entity: 'sites/1/backups', site_id: 1, version: 2, at: now - 1 * DAY, body: JSON.stringify([{ id: 8, state: 'Ok', created_at: iso(now - 1 * DAY) }, { id: 7, state: 'Ok', created_at: iso(now - 5 * DAY) }]) });
    } finally {
      await store.close();
    }
    writeFileSync(join(dir, 'mine.yaml'), 'rules: []\n');
    const path = config(`site_labels:\n  - { match: "glob(domain, '*.acme.example')", labels: { client: acme } }\n`);
    writeFileSync(path, readFileSync(path, 'utf8').replace('routes:\n', "routes:\n  - { match: \"labels.client == 'acme'\", channels: [oncall] }\n"));
    const r = await hostwatch(['rules', 'backtest', '--since', '7d', '--rule', 'backup-stale', '-c', path], { cwd: dir });
    expect(r.code).toBe(0);
    const events = r.stdout.split('\n').filter((l) => /^\d{4}-/.test(l));
    // The second good backup is 24 h old at the end: it does not go stale again.
    expect(events).toHaveLength(2);
    // Every 10 minutes (its `every`) after 26 h without a good backup.
    const firedAt = Date.parse(events[0]!.split(' ')[0]!);
    expect(firedAt - (now - 5 * DAY)).toBeGreaterThanOrEqual(26 * HOUR);
    expect(firedAt - (now - 5 * DAY)).toBeLessThanOrEqual(26 * HOUR + 10 * MIN);
    expect(events[0]).toMatch(/ backup\.stale:firing sites\/1\/backups "No good backup of shop\.acme\.example in 26 h \(the last Ok one is 26 h( \d+ min)? old\)"  -> oncall$/);
    expect(events[1]).toMatch(/ backup\.stale:resolved sites\/1\/backups "shop\.acme\.example has a good backup again"  -> oncall$/);
    expect(Date.parse(events[1]!.split(' ')[0]!)).toBe(now - DAY);
  });

  /**
   * `rules backtest` of site-offline over a change log where six sites went offline two days
   * ago and three came back a day ago, with `channels` (YAML lines) in the config: its event
   * lines, without their times.
   */
  async function outageBacktest(channels: string): Promise<string[]> {
    const now = Date.now();
    const store = await openStore({ engine: 'sqlite', path: join(dir, 'hostwatch.db') }, { now: () => now });
    try {
      const h = repos(store).history;
      const list = Array.from({ length: 6 }, (_, i) => ({ id: i + 1, domain: `s${i + 1}.example` }));
      await h.add({ source: 'sites', entity: 'sites', site_id: null, version: 1, at: now - 9 * DAY, body: JSON.stringify(list) });
      const hh = (id: number, status: string): string => JSON.stringify({ site_id: id, online: { status, label: status }, integrity: { status: 'ok', problems: 0 } });
      for (const { id } of list) await h.add({ source: 'health', entity: `sites/${id}/health`, site_id: id, version: 1, at: now - 8 * DAY, body: hh(id, 'online') });
      for (const { id } of list) await h.add({ source: 'health', entity: `sites/${id}/health`, site_id: id, version: 2, at: now - 2 * DAY + id * 1000, body: hh(id, 'offline') });
      for (const { id } of list.slice(0, 3)) await h.add({ source: 'health', entity: `sites/${id}/health`, site_id: id, version: 3, at: now - DAY + id * 1000, body: hh(id, 'online') });
    } finally {
      await store.close();
    }
    writeFileSync(join(dir, 'mine.yaml'), 'rules: []\n');
    const path = join(dir, 'incident.yaml');
    writeFileSync(path, `api: { base_url: http://127.0.0.1:9, key: k }\nstorage: { path: ./hostwatch.db }\n${channels}`);
    const r = await hostwatch(['rules', 'backtest', '--since', '7d', '--rule', 'site-offline', '-c', path], { cwd: dir });
    expect(r.code).toBe(0);
    return r.stdout.split('\n').filter((l) => /^\d{4}-/.test(l)).map((l) => l.replace(/^\S+\s+/, ''));
  }

  it('understands platform incidents: six sites offline at once show one platform.incident, the later per-site alerts held from people, and its end', async () => {
    const events = await outageBacktest(`channels:
  - { name: oncall, type: console }
  - { name: hooks, type: webhook, url: https://hooks.example/in, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw }
`);
    expect(events).toEqual([
      ...[1, 2, 3, 4, 5].map((id) => `site.offline:firing sites/${id}/health "s${id}.example is offline"  -> oncall, hooks`),
      'platform.incident:firing incidents/site.offline "Platform incident: site.offline on 5 sites (s1.example, s2.example, s3.example, s4.example, s5.example)"  -> oncall, hooks',
      'site.offline:firing sites/6/health "s6.example is offline"  -> hooks  (held from oncall by the platform incident)',
      'site.offline:resolved sites/1/health "s1.example is back online"  -> hooks  (held from oncall by the platform incident)',
      // Five still fire: the incident goes on. The second recovery leaves four: it ends.
      'site.offline:resolved sites/2/health "s2.example is back online"  -> hooks  (held from oncall by the platform incident)',
      'platform.incident:resolved incidents/site.offline "Platform incident over: site.offline on 4 sites now (below 5)"  -> oncall, hooks',
      'site.offline:resolved sites/3/health "s3.example is back online"  -> oncall, hooks',
    ]);
  });

  it('holds the per-site alerts of an incident only from the human channels the incident reaches', async () => {
    const events = await outageBacktest(`channels:
  - { name: oncall, type: console }
  - { name: client, type: console }
routes:
  - { match: "name != 'platform.incident'", channels: [client], continue: true }
  - { channels: [oncall] }
`);
    // The incident never reaches `client`: it keeps getting every per-site alert.
    expect(events.slice(5, 8)).toEqual([
      'platform.incident:firing incidents/site.offline "Platform incident: site.offline on 5 sites (s1.example, s2.example, s3.example, s4.example, s5.example)"  -> oncall',
      'site.offline:firing sites/6/health "s6.example is offline"  -> client  (held from oncall by the platform incident)',
      'site.offline:resolved sites/1/health "s1.example is back online"  -> client  (held from oncall by the platform incident)',
    ]);
  });

  it('says there is no database yet instead of creating an empty one, exit 1', async () => {
    writeFileSync(join(dir, 'mine.yaml'), 'rules: []\n');
    const r = await hostwatch(['rules', 'backtest', '-c', config()], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`hostwatch: no database at ${join(dir, 'hostwatch.db')} (storage.path); \`hostwatch run\` creates it on its first poll\n`);
    expect(existsSync(join(dir, 'hostwatch.db'))).toBe(false);
  });

  it('refuses an unknown rule name with the known ones, exit 2', async () => {
    await writeHistory(join(dir, 'hostwatch.db'), Date.now());
    writeFileSync(join(dir, 'mine.yaml'), 'rules: []\n');
    const r = await hostwatch(['rules', 'backtest', '--rule', 'site-ofline', '-c', config()], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `hostwatch rules backtest: no rule named "site-ofline" (did you mean site-offline?); known: ${builtInRuleNames().join(', ')}\n`,
    );
  });
});
