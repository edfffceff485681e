/**
 * `hostwatch check` is a faithful preflight: whatever `run` would refuse or degrade on, it
 * reports first, with file and line, and it creates nothing. `check --online` asks the API.
 * Plus the CLI basics a first run meets: --version and the default config file.
 */
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { packageRoot } from '../src/paths.js';
import { openStore } from '../src/store/db.js';
import { makeFolders } from '../src/store/storage-path.js';
import { tempDir } from './harness.js';
import { hostwatch } from './run-cli.js';

let tmp: { dir: string; cleanup: () => void };
let sim: Simulator | undefined;
beforeEach(() => {
  tmp = tempDir();
});
afterEach(async () => {
  await sim?.close();
  sim = undefined;
  tmp.cleanup();
});

const KEY = 'preflight-key-0123456789';

function write(name: string, text: string): string {
  const file = join(tmp.dir, name);
  writeFileSync(file, text);
  return file;
}

function config(extra = '', url = 'http://127.0.0.1:9'): string {
  return `api:\n  base_url: ${url}\n  key: \${HW_KEY}\n  timeout: 2s\n  retries: 0\n  max_requests_per_second: 200\nstorage:\n  path: ./state/hostwatch.db\n${extra}`;
}

const env = { HW_KEY: KEY };

describe('hostwatch check reports what run would refuse', () => {
  it('a server reachable from other machines without a token, at its line; run refuses it too, before creating the database', async () => {
    const file = write('config.yaml', config('server:\n  listen: 0.0.0.0:8080\n'));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `${file}:10:11: server.listen: is reachable from other machines, so it needs server.token (a bearer token, like token: \${HOSTWATCH_TOKEN}); or listen on 127.0.0.1 (got "0.0.0.0:8080")\n`,
    );
    const run = await hostwatch(['run', '-c', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('server.listen: is reachable from other machines');
    expect(existsSync(join(tmp.dir, 'state'))).toBe(false);
    // With a token it is fine.
    const ok = await hostwatch(['check', '-c', write('ok.yaml', config('server:\n  listen: 0.0.0.0:8080\n  token: t-0123456789\n'))], { env });
    expect(ok.code).toBe(0);
  });

  it('an unknown template variable in a rule, with the near miss, instead of a fallback summary at run time', async () => {
    const rules = write(
      'my-rules.yaml',
      'rules:\n  - name: slow-shop\n    event: site.slow_shop\n    kind: alert\n    source: health\n    when: "after.online.status == \'slow\'"\n    summary: "{{ domian }} is slow ({{ after.online.label }})"\n',
    );
    const file = write('config.yaml', config(`rules: [${rules}]\n`));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'my-rules.yaml:7: rules[0].summary: unknown template variable "domian" (did you mean domain?); a template sees event, subject, site_id, domain, before, after, past, changes, params, labels, status',
    );
  });

  it('a misspelt parameter in a rule\'s expression or template, with the near miss, instead of a rule that never fires', async () => {
    const rules = write(
      'my-rules.yaml',
      'rules:\n  - name: my-disk-high\n    event: usage.disk_high\n    kind: alert\n    source: usage\n    params: { threshold: 90, resolve_below: 85 }\n' +
        '    when: "after.disk.percent >= params.treshold"\n    resolve_when: "after.disk.percent < params.resolve_below"\n    summary: "{{ domain }} over {{ params.threshhold }}%"\n',
    );
    const file = write('config.yaml', config(`rules: [${rules}]\n`));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('my-rules.yaml:7: rules[0].when: params.treshold: unknown parameter (did you mean threshold?); allowed: threshold, resolve_below\n');
    expect(r.stderr).toContain('my-rules.yaml:9: rules[0].summary: params.threshhold: unknown parameter (did you mean threshold?); allowed: threshold, resolve_below\n');
    expect(r.stderr.trim().split('\n')).toHaveLength(2);
  });

  it('a storage path that cannot be created, naming the path and the reason, and run says the same', async () => {
    write('not-a-folder', 'a file');
    const file = write('config.yaml', config().replace('./state/hostwatch.db', './not-a-folder/hostwatch.db'));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${file}:8:9: storage.path: cannot create ${join(tmp.dir, 'not-a-folder')}: ${join(tmp.dir, 'not-a-folder')} is a file, not a folder\n`);
    const run = await hostwatch(['run', '-c', file], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`hostwatch: cannot start: storage.path: cannot create ${join(tmp.dir, 'not-a-folder')}: ${join(tmp.dir, 'not-a-folder')} is a file, not a folder\n`);
  });

  it('a folder that cannot be made although the one above it exists: run says which and why at once, instead of trying again forever', async () => {
    // A link to nothing: the walk up finds the folder it is in, but nothing can be made under it.
    symlinkSync(join(tmp.dir, 'gone'), join(tmp.dir, 'link'));
    const file = write('config.yaml', config().replace('./state/hostwatch.db', './link/state/hostwatch.db'));
    const run = await hostwatch(['poll', '--once', '-c', file], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`hostwatch: cannot start: storage.path: cannot create the folder ${join(tmp.dir, 'link', 'state')} (ENOENT)\n`);
    // Under /proc nothing can be made: as root, who may write anywhere, Node's recursive mkdir looped there forever.
    expect(makeFolders('/proc/hostwatch-nope/state/hostwatch.db')).toMatch(/^cannot create the folder \/proc\/hostwatch-nope \((ENOENT|EACCES)\)$/);
  });

  it('an inhibit source or an incident alert that no rule sends, with the near miss; run refuses it too', async () => {
    // incidents before inhibit in the file: the errors come in file order, each at its line and column.
    const file = write('config.yaml', config('incidents: { alerts: [site.offline, backup.stal] }\ninhibit: [{ source: site.ofline }]\n'));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    const tail = '; the events are those of docs/events.md and the event: of your rules';
    expect(r.stderr).toBe(
      `${file}:9:37: incidents.alerts[1]: no rule sends the event backup.stal (did you mean backup.stale?)${tail}\n${file}:10:21: inhibit[0].source: no rule sends the event site.ofline (did you mean site.offline?)${tail}\n`,
    );
    const run = await hostwatch(['poll', '--once', '-c', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(r.stderr);
    // An event of a rule of the user's own is known too.
    write('mine.yaml', 'rules:\n  - { name: my-slow, event: site.very_slow, kind: alert, source: health, severity: warning, when: "after.status == \'slow\'", summary: "{{ domain }} is very slow" }\n');
    const own = write('own.yaml', config('rules: [./mine.yaml]\ninhibit: [{ source: site.very_slow }]\n'));
    const ok = await hostwatch(['check', '-c', own], { env });
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    // A change event, or one about hostwatch itself, never starts an inhibition nor gathers an incident.
    const never = write('never.yaml', config('incidents: { alerts: [dns.record_changed] }\ninhibit: [{ source: site.added }, { source: source.degraded }, { source: platform.incident }]\n'));
    const no = await hostwatch(['check', '-c', never], { env });
    expect(no.code).toBe(2);
    expect(no.stderr).toBe(
      `${never}:9:23: incidents.alerts[0]: dns.record_changed is a change event, not an alert: an incident gathers only sites' alerts (kind: alert) as they fire\n` +
        `${never}:10:21: inhibit[0].source: site.added is a change event, not an alert: an inhibition starts only from a site's alert (kind: alert) as it fires\n` +
        `${never}:10:45: inhibit[1].source: source.degraded is about hostwatch itself, not about a site: an inhibition starts only from a site's alert (kind: alert) as it fires\n` +
        `${never}:10:74: inhibit[2].source: platform.incident is about many sites at once, not about one site: an inhibition starts only from a site's alert (kind: alert) as it fires\n`,
    );
  });

  it('a route or maintenance match comparing name or type with an event no rule sends, with the near miss; run refuses it too', async () => {
    const file = write(
      'config.yaml',
      config(
        'channels: [{ name: ops, type: console }]\nroutes: [{ match: "name in [\'site.ofline\', \'site.slow\']", channels: [ops] }]\nmaintenance: [{ name: nightly, schedule: "0 2 * * *", duration: 1h, match: "type == \'backup.failed\'" }]\n',
      ),
    );
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    const tail = '; the events are those of docs/events.md and the event: of your rules';
    expect(r.stderr).toBe(
      `${file}:10:19: routes[0].match: compares name with "site.ofline", which no event has (did you mean site.offline?)${tail}\n` +
        `${file}:11:76: maintenance[0].match: compares type with "backup.failed", which no event has (did you mean hostwatch.backup.failed?)${tail}\n`,
    );
    const run = await hostwatch(['poll', '--once', '-c', file], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(r.stderr);
  });

  it('a rules path that does not exist, named as its entry of the config\'s rules list at its line, with the file\'s other errors; run says the same', async () => {
    write('mine.yaml', 'rules: []\n');
    write('config.yaml', config('rules: [./mine.yaml, ./nope.yaml]\n').replace('  timeout: 2s', '  timeout: soon'));
    const r = await hostwatch(['check', '-c', 'config.yaml'], { env, cwd: tmp.dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'config.yaml:4:12: api.timeout: must be a duration greater than 0, like 10s, 1m (got "soon")\nconfig.yaml:9:22: rules[1]: nope.yaml: no such file or folder\n',
    );
    const run = await hostwatch(['poll', '--once', '-c', 'config.yaml'], { env, cwd: tmp.dir });
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(r.stderr);
  });

  it('a storage path that names a folder', async () => {
    mkdirSync(join(tmp.dir, 'state'));
    const file = write('config.yaml', config().replace('./state/hostwatch.db', './state'));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`storage.path: ${join(tmp.dir, 'state')} is a folder; storage.path names the database file inside it, like ${join(tmp.dir, 'state')}/hostwatch.db`);
  });

  it('a database that a newer hostwatch migrated (a downgrade), naming the file; run refuses it with the same words, and the file is left as it was', async () => {
    const db = join(tmp.dir, 'state', 'hostwatch.db');
    makeFolders(db);
    const store = await openStore({ engine: 'sqlite', path: db }, { now: Date.now });
    await store.close();
    const raw = new BetterSqlite3(db);
    raw.prepare("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'c', 0)").run();
    raw.close();
    const file = write('config.yaml', config());
    const refusal = `the SQLite database ${db}: the database was migrated by a newer hostwatch (migration 9999_future.sql); upgrade hostwatch or restore a backup`;
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${file}: storage.path: ${refusal}\n`);
    const run = await hostwatch(['run', '-c', file], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`cannot start: ${refusal}`);
    const after = new BetterSqlite3(db, { readonly: true });
    expect(after.prepare('SELECT max(version) FROM schema_migrations').pluck().get()).toBe(9999);
    after.close();
  });

  it('a file at storage.path that is no database, as run would refuse it (it said OK)', async () => {
    const db = join(tmp.dir, 'state', 'hostwatch.db');
    makeFolders(db);
    writeFileSync(db, 'garbage garbage\n');
    const file = write('config.yaml', config());
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `${file}: storage.path: the SQLite database ${db} is damaged (file is not a database); hostwatch does not run on it. Restore it from a backup (docs/operations.md, "Back up the database"), or keep what can be read: sqlite3 ${db} .recover | sqlite3 ${db}.recovered, then set storage.path to the new file\n`,
    );
    const run = await hostwatch(['run', '-c', file], { env });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`the SQLite database ${db} is damaged (file is not a database)`);
  });

  it('a bad storage path together with the config\'s other errors, each at its line, in one run', async () => {
    write('not-a-folder', 'a file');
    const file = write('config.yaml', config('channels: [{ name: Ops, type: console }]\n').replace('./state/hostwatch.db', './not-a-folder/hostwatch.db'));
    const r = await hostwatch(['check', '-c', file], { env });
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toEqual([
      `${file}:8:9: storage.path: cannot create ${join(tmp.dir, 'not-a-folder')}: ${join(tmp.dir, 'not-a-folder')} is a file, not a folder`,
      `${file}:9:20: channels[0].name: must be lowercase letters, digits, "_" or "-", like ops or oncall (got "Ops")`,
    ]);
    // The default path (./data/hostwatch.db beside the config) is looked at too, and said to be the default.
    write('data', 'a file');
    const plain = write('plain.yaml', `api:\n  base_url: http://127.0.0.1:9\n  key: \${HW_KEY}\n`);
    const d = await hostwatch(['check', '-c', plain], { env });
    expect(d.code).toBe(2);
    expect(d.stderr).toBe(`${plain}: storage.path: cannot create ${join(tmp.dir, 'data')}: ${join(tmp.dir, 'data')} is a file, not a folder (the default path)\n`);
  });
});

describe('read-only commands', () => {
  it('never create the storage folder or the database: only run does', async () => {
    const file = write('config.yaml', config());
    expect((await hostwatch(['check', '-c', file], { env })).code).toBe(0);
    for (const args of [['events'], ['deliveries'], ['silence', 'list'], ['explain', 'no-such-id'], ['rules', 'backtest']]) {
      const r = await hostwatch([...args, '-c', file], { env });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(/no database at .*state\/hostwatch\.db|cannot open the database .*state\/hostwatch\.db/);
    }
    expect(existsSync(join(tmp.dir, 'state'))).toBe(false);
  });
});

describe('hostwatch check --online', () => {
  it('calls GET /sites with the key and says per source whether its scope works, writing nothing', async () => {
    sim = await startSimulator({ sites: 2, keys: { [KEY]: '*', 'scoped-key-0123456789': ['sites:read', 'backups:read', 'account:read'] } });
    const file = write('config.yaml', config('sources:\n  rank: { enabled: true }\n', sim.url));
    const r = await hostwatch(['check', '--online', '-c', file], { env });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`online: ${sim.url}: the key works; GET /sites: 2 sites`);
    // The budget is planned for the sites the API just listed, not "not known yet".
    expect(r.stdout).toMatch(/^request budget: 2 sites \(GET \/sites, just now\) × /m);
    expect(r.stdout).not.toContain('not known yet');
    expect(r.stdout).toMatch(/^ {2}sites +sites:read +ok {2}GET \/sites: ok$/m);
    expect(r.stdout).toMatch(/^ {2}health +sites:read +ok {2}GET \/sites: ok \(same scope\)$/m);
    expect(r.stdout).toMatch(/^ {2}backups +backups:read +ok {2}GET \/sites\/1\/backups: ok$/m);
    expect(r.stdout).toMatch(/^ {2}rank +rank:read +ok/m);
    expect(new Set(sim.requests.map((q) => q.method))).toEqual(new Set(['GET']));
    // One request per scope, not one per source and site.
    const probed = r.stdout.slice(r.stdout.indexOf('online:')).split('\n').filter((l) => l.startsWith('  '));
    const scopes = new Set(probed.map((l) => l.trim().split(/\s+/)[1]));
    expect(sim.requests.length).toBe(scopes.size + 1);
    expect(existsSync(join(tmp.dir, 'state'))).toBe(false);

    const scoped = await hostwatch(['check', '--online', '-c', file], { env: { HW_KEY: 'scoped-key-0123456789' } });
    expect(scoped.code).toBe(1);
    expect(scoped.stdout).toMatch(/^ {2}health +sites:read +ok/m);
    expect(scoped.stdout).toMatch(/^ {2}rank +rank:read +SCOPE MISSING {2}GET \/rank: the key lacks rank:read$/m);
    expect(scoped.stderr).toMatch(/^online: \d+ of \d+ enabled sources cannot read; add the scopes to the key \(hostwatch scopes lists them\) or set enabled: false for those sources\n$/);
  });

  it('says when run would refuse the site list the API answers (more than sites.max), or skip a listed site it lacks; and refuses a --sites plan over sites.max', async () => {
    sim = await startSimulator({ sites: 2, keys: { [KEY]: '*', 'no-sites-key-0123456789': ['backups:read'] } });
    const [tooMany, missing, planned, unread] = await Promise.all([
      hostwatch(['check', '--online', '-c', write('max.yaml', config('sites: { max: 1 }\n', sim.url))], { env }),
      hostwatch(['check', '--online', '-c', write('listed.yaml', config('sites: [1, 99]\n', sim.url))], { env }),
      hostwatch(['check', '--sites', '20000', '-c', write('plan.yaml', config('', sim.url))], { env }),
      // A key that cannot read the site list: the scopes say so, and no site is called missing.
      hostwatch(['check', '--online', '-c', write('unread.yaml', config('sites: [1]\n', sim.url))], { env: { HW_KEY: 'no-sites-key-0123456789' } }),
    ]);
    expect(unread.code).toBe(1);
    expect(unread.stderr).toMatch(/^online: \d+ of \d+ enabled sources cannot read; /);
    expect(unread.stderr).not.toContain('not in the account');
    expect(tooMany.code).toBe(1);
    expect(tooMany.stderr).toBe('online: GET /sites lists 2 sites, more than sites.max (1): run would refuse the site list and poll no site; raise sites.max, or list the sites to watch in sites:\n');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('online: sites: 99 is not in the account (GET /sites lists 2 sites): run would skip it\n');
    // It printed 442708333333333d-long intervals and exit 0.
    expect(planned.code).toBe(2);
    expect(planned.stderr).toBe('--sites 20000: more than sites.max (10,000): run would refuse a site list that long and poll no site; raise sites.max\n');
  });

  it('says when the key is refused or the panel cannot be reached, and never prints the key', async () => {
    sim = await startSimulator({ sites: 1, keys: { 'another-key-0123456789': '*' } });
    const refused = await hostwatch(['check', '--online', '-c', write('config.yaml', config('', sim.url))], { env });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`online: ${sim.url}: the API refuses the key (401 on GET /sites): check api.key\n`);
    const down = await hostwatch(['check', '--online', '-c', write('down.yaml', config('', 'http://127.0.0.1:9'))], { env });
    expect(down.code).toBe(1);
    expect(down.stderr).toBe('online: http://127.0.0.1:9: the API cannot be reached (network on GET /sites): check api.base_url and the network\n');
    expect(refused.stdout + refused.stderr + down.stdout + down.stderr).not.toContain(KEY);
  });
});

describe('the command line', () => {
  it('prints the version with --version', async () => {
    const { version } = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
    const r = await hostwatch(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${version}\n`);
  });

  it('says what check found in words that agree with the counts: 1 channel, 2 channels', async () => {
    const hook = (name: string): string => `  - { name: ${name}, type: webhook, url: http://127.0.0.1:9/hook, secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw }\n`;
    const one = await hostwatch(['check', '-c', write('one.yaml', config(`channels:\n${hook('a')}`))], { env });
    expect(one.stdout.split('\n')[0]).toMatch(/: OK \(\d+ rules, 1 channel\)$/);
    const two = await hostwatch(['check', '-c', write('two.yaml', config(`channels:\n${hook('a')}${hook('b')}`))], { env });
    expect(two.stdout.split('\n')[0]).toMatch(/: OK \(\d+ rules, 2 channels\)$/);
  });

  it('reads $HOSTWATCH_CONFIG, else ./hostwatch.yaml, when -c is left out, and says what to do when neither is there', async () => {
    const named = write('named.yaml', config());
    const fromEnv = await hostwatch(['check'], { env: { ...env, HOSTWATCH_CONFIG: named }, cwd: tmp.dir });
    expect(fromEnv.stdout.split('\n')[0]).toBe(`${named}: OK (${fromEnv.stdout.match(/\((\d+) rules/)?.[1]} rules, 0 channels)`);
    const cwd = join(tmp.dir, 'here');
    mkdirSync(cwd);
    writeFileSync(join(cwd, 'hostwatch.yaml'), config());
    const local = await hostwatch(['check'], { env, cwd, unset: ['HOSTWATCH_CONFIG'] });
    expect(local.code).toBe(0);
    expect(local.stdout).toContain(`${join(cwd, 'hostwatch.yaml')}: OK`);
    const none = await hostwatch(['check'], { env, cwd: tmp.dir, unset: ['HOSTWATCH_CONFIG'] });
    expect(none.code).toBe(2);
    expect(none.stderr).toBe('hostwatch: no config file: pass -c FILE, set HOSTWATCH_CONFIG, or put hostwatch.yaml in the current folder (start from config.example.yaml)\n');
  });
});
