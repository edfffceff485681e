/**
 * `hostwatch deliveries`, `hostwatch redeliver` and `hostwatch silence add|list|expire`:
 * the built CLI against the database a daemon wrote; a daemon started afterwards sends
 * what the CLI queued, with the same event id.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hostwatchWithEnv as hostwatch } from './run-cli.js';
import { startWorld, TEST_KEY, type World, rows } from './harness.js';
import { startReceiver, TEST_SECRET, type Answer, type Receiver } from './receiver.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const lines = (text: string): string[] => text.split('\n').filter(Boolean);

/** Each test starts the built CLI many times; under a loaded machine that takes a while. */
const SLOW = 120_000;

async function setup(answers: Record<string, () => Answer>): Promise<{ w: World; hooks: Record<string, Receiver>; overrides: Record<string, unknown>; config: string; env: Record<string, string> }> {
  const w = await startWorld();
  cleanups.push(() => w.close());
  const hooks: Record<string, Receiver> = {};
  for (const [name, answer] of Object.entries(answers)) {
    hooks[name] = await startReceiver({ answer: () => answer() });
    cleanups.push(() => hooks[name]!.close());
  }
  const overrides = { channels: Object.entries(hooks).map(([name, r]) => ({ name, type: 'webhook', url: r.url, secret: TEST_SECRET })) };
  const config = join(w.dir, 'config.yaml');
  writeFileSync(config, w.yaml(overrides));
  return { w, hooks, overrides, config, env: { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath } };
}

/** A daemon's baseline poll, then one that sees `site` offline; stopped after. */
async function siteGoesOffline(w: World, overrides: Record<string, unknown>, site: number): Promise<void> {
  const app = await w.app(overrides);
  await app.runOnce();
  w.sim.world.setHealth(site, { status: 'offline' });
  await app.runOnce();
  await app.stop();
}

describe('hostwatch deliveries and redeliver', () => {
  it('lists what was sent where with attempts and the last answer; --failed and --channel filter; redeliver sends a dead one again with the same id', async () => {
    let refuse = true;
    const { w, hooks, overrides, config, env } = await setup({ ok: () => ({ status: 200 }), picky: () => (refuse ? { status: 404, body: 'no such hook' } : { status: 200 }) });
    await siteGoesOffline(w, overrides, 1);
    const id = w.events[0]!.id;

    const all = await hostwatch(['deliveries', '-c', config], env);
    expect(all.code).toBe(0);
    expect(lines(all.stdout)).toHaveLength(2);
    const [picky, ok] = lines(all.stdout);
    expect(picky).toMatch(new RegExp(`dead\\s+picky\\s+attempts 1  last 404  hostwatch\\.site\\.offline sites/1/health  ${id} \\(#2\\)  permanent failure: HTTP 404: no such hook$`));
    expect(ok).toMatch(new RegExp(`delivered\\s+ok\\s+attempts 1  last 200  hostwatch\\.site\\.offline sites/1/health  ${id} \\(#1\\)$`));
    const failed = await hostwatch(['deliveries', '--failed', '-c', config], env);
    expect(lines(failed.stdout)).toEqual([picky]);
    const onlyOk = await hostwatch(['deliveries', '--channel', 'ok', '--json', '-c', config], env);
    expect(lines(onlyOk.stdout).map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      // As GET /api/deliveries shows a row: ISO times, and no next attempt once delivered.
      expect.objectContaining({ event_id: id, channel: 'ok', state: 'delivered', attempts: 1, last_status: 200, next_attempt_at: null, updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/) }),
    ]);

    const none = await hostwatch(['redeliver', '-c', config], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('hostwatch redeliver: nothing was given: give an event id (or #row), or --dead\n');
    const both = await hostwatch(['redeliver', id, '--dead', '-c', config], env);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('hostwatch redeliver: both were given: give an event id (or #row) or --dead, not both');

    const again = await hostwatch(['redeliver', '--dead', '-c', config], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('1 delivery queued again');
    // Once more: nothing is dead now, which is no failure (a script may run it after a move).
    const nothing = await hostwatch(['redeliver', '--dead', '-c', config], env);
    expect(nothing).toMatchObject({ code: 0, stdout: 'hostwatch redeliver: nothing dead-lettered to send again (see hostwatch deliveries --failed)\n' });
    expect(rows(w, "SELECT state, attempts FROM outbox WHERE channel = 'picky'")).toEqual([{ state: 'pending', attempts: 0 }]);
    // --pending: the rows still to send (here the one queued again), the drain check of a move.
    const pending = await hostwatch(['deliveries', '--pending', '-c', config], env);
    expect(lines(pending.stdout)).toHaveLength(1);
    expect(pending.stdout).toMatch(/pending\s+picky\s+attempts 0 /);

    refuse = false;
    const back = await w.app(overrides);
    expect(await back.worker.drain(3_000)).toBe(0);
    expect(hooks['picky']!.requests.map((r) => r.id)).toEqual([id, id]);
    expect(hooks['picky']!.accepted().map((r) => r.id)).toEqual([id]);
    // Its history stays: the 404, then the new attempt.
    expect(rows(w, "SELECT a.attempt, a.outcome, a.status_code FROM delivery_attempts a JOIN outbox o ON o.id = a.outbox_id WHERE o.channel = 'picky' ORDER BY a.id")).toEqual([
      { attempt: 1, outcome: 'dead', status_code: 404 },
      { attempt: 1, outcome: 'delivered', status_code: 200 },
    ]);
    await back.stop();

    // One event on one channel, by event id.
    const one = await hostwatch(['redeliver', id, '--channel', 'ok', '-c', config], env);
    expect(one.stdout).toContain('1 delivery queued again');
    const third = await w.app(overrides);
    expect(await third.worker.drain(3_000)).toBe(0);
    expect(hooks['ok']!.accepted().map((r) => r.id)).toEqual([id, id]);
    const unknown = await hostwatch(['redeliver', 'no-such-event', '-c', config], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toBe('hostwatch redeliver: no event with id "no-such-event" (hostwatch events lists them, each with its whole id)\n');
    const noRow = await hostwatch(['redeliver', '#99', '-c', config], env);
    expect(noRow.code).toBe(1);
    expect(noRow.stderr).toBe('hostwatch redeliver: no outbox row #99 (see hostwatch deliveries)\n');
    // Nothing left to send: --pending says so (on stderr, as every empty list does).
    const drained = await hostwatch(['deliveries', '--pending', '-c', config], env);
    expect({ out: drained.stdout, err: drained.stderr }).toEqual({ out: '', err: '(no deliveries)\n' });
    // A mistyped channel is an error that names the channels, not an empty answer or "nothing to send".
    for (const args of [['deliveries', '--channel', 'okk'], ['redeliver', id, '--channel', 'okk']]) {
      const typo = await hostwatch([...args, '-c', config], env);
      expect({ args, code: typo.code, stderr: typo.stderr }).toEqual({ args, code: 2, stderr: `hostwatch ${args[0]}: --channel: no channel named "okk" in the config or the outbox (its channels: ok, picky)\n` });
    }
    // --held lists held events, which have no outbox rows: a row filter given with it is refused, not ignored.
    const heldFiltered = await hostwatch(['deliveries', '--held', '--channel', 'ok', '-c', config], env);
    expect(heldFiltered.code).toBe(2);
    expect(heldFiltered.stderr).toBe('hostwatch deliveries: --held lists the held events of every channel, which have no outbox rows: --channel cannot filter it\n');
    // A row number mistyped is named as one, not looked for as an event id.
    const badRow = await hostwatch(['redeliver', '#4x', '-c', config], env);
    expect(badRow.code).toBe(2);
    expect(badRow.stderr).toBe('hostwatch redeliver: #4x is not an outbox row number: give #N as hostwatch deliveries prints it (like #42), or an event id\n');
  }, SLOW);

  it('shows a disabled channel, and redeliver --dead --channel enables it again', async () => {
    let gone = true;
    const { w, hooks, overrides, config, env } = await setup({ hook: () => (gone ? { status: 410, body: 'unsubscribed' } : { status: 200 }) });
    await siteGoesOffline(w, overrides, 2);
    const listed = await hostwatch(['deliveries', '-c', config], env);
    expect(listed.stderr).toMatch(/^channel hook is DISABLED since .*Z: HTTP 410: unsubscribed \(hostwatch redeliver --dead --channel hook enables it\)$/m);
    gone = false;
    const re = await hostwatch(['redeliver', '--dead', '--channel', 'hook', '-c', config], env);
    expect(re.stdout).toContain('channel hook enabled again');
    // The event only: the channel.disabled about this channel went to the others, never to it.
    expect(re.stdout).toContain('1 delivery queued again');
    const back = await w.app(overrides);
    expect(await back.worker.drain(3_000)).toBe(0);
    expect(hooks['hook']!.accepted().map((r) => r.event!.data.name).sort()).toEqual(['site.offline']);
  }, SLOW);
});

describe('hostwatch silence', () => {
  it('adds a silence when the config\'s rules do not load, saying that its event names were not checked', async () => {
    const { w, overrides, env } = await setup({ hook: () => ({ status: 200 }) });
    const app = await w.app(overrides);
    await app.runOnce();
    await app.stop();
    // A rule file that does not load does not stop a silence: its names are not checked, and it says so.
    const broken = join(w.dir, 'broken-rules.yaml');
    writeFileSync(broken, 'rules:\n  - name: [\n');
    const brokenConfig = join(w.dir, 'broken.yaml');
    writeFileSync(brokenConfig, w.yaml({ ...overrides, rules: [broken] }));
    const anyway = await hostwatch(['silence', 'add', '--match', "name == 'site.ofline'", '--for', '1m', '--comment', 'x', '-c', brokenConfig], env);
    expect(anyway.code).toBe(0);
    expect(anyway.stderr).toBe('(the rules of this config do not load, so the event names in --match were not checked; hostwatch check says why)\n');

  });

  it('adds a silence before the daemon ever ran, creating the database and its folder where the config puts it, but not for a silence it refuses', async () => {
    const { config, env, w } = await setup({ hook: () => ({ status: 200 }) });
    const fresh = { ...env, DB: join(w.dir, 'not-yet', 'hostwatch.db') };
    const refused = await hostwatch(['silence', 'add', '--match', 'site_id == 12', '--for', '2 hours', '--comment', 'x', '-c', config], fresh);
    expect(refused.code).toBe(2);
    expect(existsSync(join(w.dir, 'not-yet'))).toBe(false);
    const added = await hostwatch(['silence', 'add', '--match', 'site_id == 12', '--for', '2h', '--comment', 'moving to a new server', '-c', config], fresh);
    expect(added.stderr).toBe('');
    expect(added.code).toBe(0);
    expect(existsSync(fresh.DB)).toBe(true);
    const listed = await hostwatch(['silence', 'list', '-c', config], fresh);
    expect(lines(listed.stdout)).toEqual([expect.stringMatching(/ active +until .* site_id == 12 +— moving to a new server /)]);
  }, SLOW);

  it('adds a silence that holds back delivery but not storage, lists it with what it held back, and expires it', async () => {
    const { w, hooks, overrides, config, env } = await setup({ hook: () => ({ status: 200 }) });
    const app = await w.app(overrides);
    await app.runOnce();
    await app.stop();

    const bad = await hostwatch(['silence', 'add', '--match', 'site_idd == 1', '--for', '2 hours', '--comment', 'x', '-c', config], env);
    expect(bad.code).toBe(2);
    expect(lines(bad.stderr)).toEqual([
      'hostwatch silence add: --match: CEL error: unknown variable "site_idd"; a match can use type, name, severity, status, subject, site_id, domain, rule, labels',
      'hostwatch silence add: --for: a positive duration like 30m, 2h or 1d12h (got "2 hours")',
    ]);
    const long = await hostwatch(['silence', 'add', '--match', 'true', '--for', '3650d', '--comment', 'x', '-c', config], env);
    expect(long.code).toBe(2);
    expect(lines(long.stderr)).toEqual([
      'hostwatch silence add: --for: a silence lasts at most 30d (silences.max_duration; got 3650d); for planned quiet periods use maintenance windows in the config',
    ]);
    // An event no rule of the config sends would be a silence of nothing, as a route's match would be.
    const typo = await hostwatch(['silence', 'add', '--match', "name == 'site.ofline' || type == 'site.offline'", '--for', '2h', '--comment', 'x', '-c', config], env);
    expect(typo.code).toBe(2);
    expect(lines(typo.stderr)).toEqual([
      'hostwatch silence add: --match: compares name with "site.ofline", which no event has (did you mean site.offline?); the events are those of docs/events.md and the event: of your rules',
      'hostwatch silence add: --match: compares type with "site.offline", which no event has (did you mean hostwatch.site.offline?); the events are those of docs/events.md and the event: of your rules',
    ]);

    const add = await hostwatch(['silence', 'add', '--match', 'site_id == 1', '--for', '2h', '--comment', 'moving to a new server', '--by', 'ana', '-c', config], env);
    expect(add.code).toBe(0);
    const id = add.stdout.split(' ')[0]!;
    expect(add.stdout).toMatch(/^[0-9a-f-]{36}  active   until .*Z  \(ends in 2h\)  site_id == 1  — moving to a new server \(ana; 0 held back\)\n$/);

    const daemon = await w.app(overrides);
    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.setHealth(2, { status: 'offline' });
    await daemon.runOnce();
    await daemon.stop();
    expect(hooks['hook']!.accepted().map((r) => r.event!.data.site_id)).toEqual([2]);
    expect(rows(w, "SELECT site_id, silenced_by FROM events WHERE type = 'hostwatch.site.offline' ORDER BY site_id")).toEqual([
      { site_id: 1, silenced_by: id },
      { site_id: 2, silenced_by: null },
    ]);
    const heldJson = await hostwatch(['deliveries', '--held', '--json', '-c', config], env);
    expect(lines(heldJson.stdout).map((l) => JSON.parse(l) as unknown)).toEqual([
      expect.objectContaining({ type: 'hostwatch.site.offline', subject: 'sites/1/health', silenced_by: id, time: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/) }),
    ]);
    // redeliver says why a silenced event has nothing to send again.
    const held = w.events.find((e) => e.data.name === 'site.offline' && e.data.site_id === 1)!;
    const re = await hostwatch(['redeliver', held.id, '-c', config], env);
    expect(re.code).toBe(1);
    expect(re.stderr).toBe(`hostwatch redeliver: event ${held.id} was stored but never queued for delivery: it was silenced (by ${id}); hostwatch explain ${held.id} says more\n`);

    const list = await hostwatch(['silence', 'list', '-c', config], env);
    expect(lines(list.stdout)).toHaveLength(1);
    expect(list.stdout).toContain(`${id}  active`);
    expect(list.stdout).toContain('(ana; 1 held back)');
    expect(lines((await hostwatch(['silence', 'list', '--expiring', '3h', '-c', config], env)).stdout)).toHaveLength(1);
    expect(lines((await hostwatch(['silence', 'list', '--expiring', '1h', '-c', config], env)).stdout)).toHaveLength(0);

    const expire = await hostwatch(['silence', 'expire', id, '-c', config], env);
    expect(expire.stdout).toMatch(new RegExp(`^expired: ${id}  expired`));
    // Its line says when it ended, and until when it was meant to hold (not "expired until" a time to come).
    const after = await hostwatch(['silence', 'list', '-c', config], env);
    expect(after.stdout).toMatch(new RegExp(`^${id}  expired  ended \\S+Z  \\(expired early; it was until \\S+Z\\)  site_id == 1  — moving to a new server \\(ana; 1 held back\\)\n$`));
    // An id that names no silence is a bad argument: exit 2, like a bad --match.
    const unknown = await hostwatch(['silence', 'expire', 'nope', '-c', config], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no silence with id "nope"');
  }, SLOW);

  it('takes amtool matchers, says which CEL it read them as, and names $USER as the author', async () => {
    const { w, overrides, config, env } = await setup({ hook: () => ({ status: 200 }) });
    const app = await w.app(overrides);
    await app.runOnce();
    await app.stop();
    const r = await hostwatch(['silence', 'add', '--match', 'alertname="site.offline", site_id=2', '--for', '1h', '--comment', 'amtool habits', '-c', config], { ...env, USER: 'bea' });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/  name == "site\.offline" && site_id == 2  — amtool habits \(bea; 0 held back\)\n$/);
    expect(r.stderr).toBe('(read the amtool matchers alertname="site.offline", site_id=2 as the CEL: name == "site.offline" && site_id == 2)\n');
    // The silence holds what the matchers meant: site 2 offline, not site 1.
    const daemon = await w.app(overrides);
    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.setHealth(2, { status: 'offline' });
    await daemon.runOnce();
    await daemon.stop();
    expect(rows(w, "SELECT site_id, silenced_by IS NOT NULL AS held FROM events WHERE type = 'hostwatch.site.offline' ORDER BY site_id")).toEqual([
      { site_id: 1, held: 0 },
      { site_id: 2, held: 1 },
    ]);
    // Text that is CEL keeps its CEL error rather than being read as matchers.
    const typo = await hostwatch(['silence', 'add', '--match', 'site_idd == 2', '--for', '1h', '--comment', 'x', '-c', config], env);
    expect(typo.stderr).toContain('unknown variable "site_idd"');
  }, SLOW);
});

describe('hostwatch redeliver', () => {
  it('says whether a daemon is running on the database to send what it queued', async () => {
    const { w, overrides, config, env } = await setup({ ok: () => ({ status: 200 }) });
    await siteGoesOffline(w, overrides, 1);
    const id = w.events[0]!.id;
    const idle = await hostwatch(['redeliver', id, '-c', config], env);
    expect(idle.stdout).toBe('1 delivery queued again; no daemon is running on this database: `hostwatch run` sends it when it starts, or `hostwatch poll --once` now\n');
    const daemon = await w.app(overrides);
    await daemon.start();
    const busy = await hostwatch(['redeliver', id, '-c', config], env);
    expect(busy.stdout).toBe(`1 delivery queued again; the daemon running on this database (pid ${process.pid} on ${hostname()}) sends it within a second\n`);
    await daemon.stop();
    const after = await hostwatch(['redeliver', id, '-c', config], env);
    expect(after.stdout).toMatch(/^1 delivery queued again; no daemon is running on this database \(last seen \d{4}-.*Z\): /);
  }, SLOW);
});

describe('a row of hostwatch deliveries', () => {
  it('says a pending row goes after the earlier row of its alert it waits for, not at its own due time, which is past', async () => {
    const { deliveryLine } = await import('../src/notify/cli-commands.js');
    const row = {
      event_id: 'evt-2',
      type: 'hostwatch.site.offline',
      subject: 'sites/5/health',
      channel: 'pager',
      state: 'pending' as const,
      attempts: 0,
      last_error: null,
      next_attempt_at: Date.parse('2026-11-28T17:44:22.011Z'),
      updated_at: Date.parse('2026-11-28T17:44:17.011Z'),
      id: 14,
      group_key: null,
      last_status: null,
    };
    expect(deliveryLine({ ...row, waits_behind: 10 })).toContain(' next after #10 (due 2026-11-28T17:44:22.011Z)  hostwatch.site.offline sites/5/health  evt-2 (#14)');
    expect(deliveryLine({ ...row, waits_behind: null })).toContain(' next 2026-11-28T17:44:22.011Z  hostwatch.site.offline');
  });
});
