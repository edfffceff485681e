/**
 * `hostwatch events`: the built CLI, run as a user would, reading the event log of a
 * database a daemon (stopped by then) wrote. No API calls, no daemon.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { formatEventLine } from '../src/notify/channels/console.js';
import { openStore } from '../src/store/db.js';
import { startWorld, TEST_KEY, type World } from './harness.js';
import { hostwatch as run, type CliRun } from './run-cli.js';

let w: World;
let config: string;
let env: Record<string, string>;

/** The CLI with this file's environment, minus the variables in `unset`. */
function hostwatch(args: string[], extra: Record<string, string> = {}, unset: string[] = [], closedStdout = false): Promise<CliRun> {
  const merged = { ...env, ...extra };
  for (const name of unset) delete merged[name];
  return run(args, { env: merged, unset, closedStdout });
}

const lines = (text: string): string[] => text.split('\n').filter(Boolean);

beforeAll(async () => {
  w = await startWorld({ sim: { sites: 3 } });
  const app = await w.app();
  await app.runOnce();
  w.sim.world.setHealth(1, { status: 'offline' });
  w.sim.world.setHealth(2, { status: 'slow' });
  await app.runOnce();
  w.sim.world.setHealth(1, { status: 'online' });
  await app.runOnce();
  await app.stop();
  config = join(w.dir, 'config.yaml');
  writeFileSync(config, w.yaml());
  env = { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath };
  // The simulator stays up only so the config's URL is real; the command must not call it.
  w.sim.requests.length = 0;
});

afterAll(async () => {
  await w.close();
});

describe('hostwatch events', () => {
  it('prints one readable line per event, oldest first, with its time and its id, and calls no API', async () => {
    expect(w.events.length).toBe(3);
    const r = await hostwatch(['events', '-c', config]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // The id ends the line: `explain` and `redeliver` take it.
    expect(lines(r.stdout)).toEqual(w.events.map((e) => `${e.time}  ${formatEventLine(e)}  ${e.id}`));
    expect(w.sim.requests).toEqual([]);
  });

  it('needs none of the secrets it does not use: the API key variable may be unset', async () => {
    const r = await hostwatch(['events', '-c', config], { API_KEY: '' }, ['API_KEY']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toHaveLength(3);
    for (const args of [['deliveries'], ['silence', 'list'], ['explain', w.events[0]!.id], ['rules', 'backtest', '--since', '1d']]) {
      const other = await hostwatch([...args, '-c', config], {}, ['API_KEY']);
      expect({ args, code: other.code, stderr: other.stderr.replace(/^\((no deliveries|no silences)\)\n$/, '') }).toEqual({ args, code: 0, stderr: '' });
    }
    // check, which stands for run, still insists on it.
    const checked = await hostwatch(['check', '-c', config], {}, ['API_KEY']);
    expect(checked.code).toBe(2);
    expect(checked.stderr).toContain('api.key: environment variable API_KEY is not set');
  });

  it('needs no listen address of its own: an unset variable in server.listen (127.0.0.1:${PORT}, one per instance) is no error, but health, which asks the daemon there, names it', async () => {
    const perInstance = join(w.dir, 'per-instance.yaml');
    writeFileSync(perInstance, w.yaml({ server: { listen: '127.0.0.1:${PORT}' } }));
    for (const args of [['events'], ['deliveries'], ['silence', 'list'], ['explain', w.events[0]!.id], ['rules', 'backtest', '--since', '1d']]) {
      const r = await hostwatch([...args, '-c', perInstance], {}, ['PORT']);
      expect({ args, code: r.code, stderr: r.stderr.replace(/^\((no deliveries|no silences)\)\n$/, '') }).toEqual({ args, code: 0, stderr: '' });
    }
    const health = await hostwatch(['health', '-c', perInstance], {}, ['PORT']);
    expect(health.code).toBe(2);
    expect(health.stderr).toContain('server.listen: environment variable PORT is not set');
    const checked = await hostwatch(['check', '-c', perInstance], {}, ['PORT']);
    expect(checked.code).toBe(2);
    expect(checked.stderr).toContain('server.listen: environment variable PORT is not set');
  });

  it('stops quietly with exit code 0 when the reader of its output goes away (hostwatch events | head)', async () => {
    for (const args of [['events', '-c', config], ['events', '-c', config, '--json'], ['explain', w.events[0]!.id, '-c', config]]) {
      const r = await hostwatch(args, {}, [], true);
      expect(r.stderr, args.join(' ')).toBe('');
      expect(r.code, args.join(' ')).toBe(0);
    }
  });

  it('refuses an unknown --type, naming the near miss', async () => {
    const r = await hostwatch(['events', '-c', config, '--type', 'site.ofline']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('hostwatch events: --type: no event is named site.ofline; did you mean site.offline? (docs/events.md lists them)\n');
    // An operator event is known even before one happened.
    const known = await hostwatch(['events', '-c', config, '--type', 'api.unauthorized']);
    expect(known.code).toBe(0);
    expect(known.stdout).toBe('');
    // Nothing printed is said so, on stderr (stdout stays empty for a pipe).
    expect(known.stderr).toBe('(no event matches --type api.unauthorized)\n');
  });

  it('says that the log holds no events yet when it is empty', async () => {
    const path = join(w.dir, 'empty.db');
    await (await openStore({ engine: 'sqlite', path }, { now: Date.now })).close();
    const empty = join(w.dir, 'empty.yaml');
    writeFileSync(empty, w.yaml({ storage: { path } }));
    const r = await hostwatch(['events', '-c', empty]);
    expect(r).toMatchObject({ code: 0, stdout: '', stderr: '(the log holds no events yet)\n' });
  });

  it('finds the events of a type the log holds though no rule raises it any more (a rule removed since), as the API does', async () => {
    const gone = await startWorld({ sim: { sites: 1 } });
    try {
      const rules = join(gone.dir, 'mine.yaml');
      writeFileSync(rules, "rules:\n  - { name: slow-now, event: site.slow_now, kind: alert, source: health, when: \"after.online.status == 'slow'\", summary: slow }\n");
      gone.sim.world.setHealth(1, { status: 'slow' });
      const app = await gone.app({ rules: [rules] });
      await app.runOnce();
      await app.stop();
      const mine = gone.events.filter((e) => e.type === 'hostwatch.site.slow_now');
      expect(mine).toHaveLength(1);
      // The config of today has no such rule.
      const today = join(gone.dir, 'config.yaml');
      writeFileSync(today, gone.yaml());
      for (const type of ['site.slow_now', 'hostwatch.site.slow_now']) {
        const r = await hostwatch(['events', '-c', today, '--json', '--type', type], { SIM_URL: gone.sim.url, API_KEY: TEST_KEY, DB: gone.dbPath });
        expect({ type, code: r.code, stderr: r.stderr }).toEqual({ type, code: 0, stderr: '' });
        expect(lines(r.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).id)).toEqual(mine.map((e) => e.id));
      }
    } finally {
      await gone.close();
    }
  });

  it('finds the watchdog by its documented name hostwatch.watchdog and by its type hostwatch.hostwatch.watchdog', async () => {
    const dogWorld = await startWorld({ config: { watchdog: { every: '1h' } } });
    try {
      const app = await dogWorld.app();
      await app.runOnce();
      await app.stop();
      const dogConfig = join(dogWorld.dir, 'config.yaml');
      writeFileSync(dogConfig, dogWorld.yaml());
      const dogs = dogWorld.events.filter((e) => e.type === 'hostwatch.hostwatch.watchdog');
      expect(dogs).toHaveLength(1);
      for (const type of ['hostwatch.watchdog', 'hostwatch.hostwatch.watchdog']) {
        const r = await hostwatch(['events', '-c', dogConfig, '--json', '--type', type], { SIM_URL: dogWorld.sim.url, DB: dogWorld.dbPath });
        expect({ type, code: r.code, stderr: r.stderr }).toEqual({ type, code: 0, stderr: '' });
        expect(lines(r.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).id), type).toEqual(dogs.map((e) => e.id));
      }
    } finally {
      await dogWorld.close();
    }
  });

  it('prints each event as CloudEvent JSON on its own line with --json', async () => {
    const r = await hostwatch(['events', '-c', config, '--json']);
    expect(r.code).toBe(0);
    const parsed = lines(r.stdout).map((l) => JSON.parse(l) as HostwatchEvent);
    expect(parsed.map((e) => e.id)).toEqual(w.events.map((e) => e.id));
    expect(parsed).toEqual(w.events);
  });

  it('filters by type and age, and keeps the newest with --limit', async () => {
    const [slow, offline, limited] = await Promise.all([
      hostwatch(['events', '-c', config, '--json', '--type', 'site.slow']),
      hostwatch(['events', '-c', config, '--json', '--type', 'hostwatch.site.offline', '--since', '1h']),
      hostwatch(['events', '-c', config, '--json', '--limit', '2']),
    ]);
    expect(lines(slow.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).type)).toEqual(['hostwatch.site.slow']);
    expect(lines(offline.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).data.status)).toEqual(['firing', 'resolved']);
    expect(lines(limited.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).id)).toEqual(w.events.slice(-2).map((e) => e.id));
    expect(limited.stderr).toBe('(the newest 2 shown; --limit N shows more)\n');
  });

  it('exits 2 with a clear message on a bad --since, --type or --limit', async () => {
    const [since, zero, type, limit, huge] = await Promise.all([
      hostwatch(['events', '-c', config, '--since', 'an hour']),
      hostwatch(['events', '-c', config, '--since', '0']),
      // A rule's name: its event's name with dashes.
      hostwatch(['events', '-c', config, '--type', 'site-offline']),
      hostwatch(['events', '-c', config, '--limit', '0']),
      // Past what SQLite takes as a LIMIT: it said "datatype mismatch", exit 1.
      hostwatch(['events', '-c', config, '--limit', '99999999999999999999']),
    ]);
    expect(since.code).toBe(2);
    expect(since.stderr).toContain("option '--since <duration>' argument 'an hour' is invalid. expected a duration greater than 0, like 30m, 1h, 2d or 1h30m");
    // No time at all found nothing and exited 0, as if the log were empty.
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain("argument '0' is invalid. expected a duration greater than 0");
    expect(type.code).toBe(2);
    expect(type.stderr).toContain("argument 'site-offline' is invalid. expected an event type like site.offline or hostwatch.site.offline; did you mean site.offline?");
    // One line of hint after the error, not the whole help.
    expect(type.stderr).toContain('(add --help for usage)');
    expect(type.stderr).not.toContain('Usage:');
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('must be a whole number ≥ 1');
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain("option '--limit <n>' argument '99999999999999999999' is invalid. must be at most 1,000,000");
  });

  it('says which database it cannot open', async () => {
    const missing = join(w.dir, 'missing.yaml');
    writeFileSync(missing, w.yaml({ storage: { path: join(w.dir, 'nowhere', 'none.db') } }));
    const r = await hostwatch(['events', '-c', missing]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^hostwatch: no database at .*none\.db \(storage\.path\); `hostwatch run` creates it/);
    // A file that is no database is named at open, as the commands that write name it.
    const garbage = join(w.dir, 'garbage.db');
    writeFileSync(garbage, 'garbage garbage\n');
    const damaged = join(w.dir, 'damaged.yaml');
    writeFileSync(damaged, w.yaml({ storage: { path: garbage } }));
    const d = await hostwatch(['events', '-c', damaged]);
    expect(d.code).toBe(1);
    expect(d.stderr).toMatch(/^hostwatch: cannot open the SQLite database .*garbage\.db: the SQLite database .*garbage\.db is damaged \(file is not a database\)/);
  });
});
