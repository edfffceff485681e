import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App } from '../src/main.js';
import { silenceLine } from '../src/notify/cli-commands.js';
import { compileSilenceMatch, parseSilenceRequest, SilenceMatcher, silenceState, silenceView, type Silence } from '../src/notify/silences.js';
import { openStore } from '../src/store/db.js';
import { SilencesRepo } from '../src/store/silences-repo.js';
import { startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

interface Running {
  app: App;
  url: string;
  /** Lines the console channel printed: what was delivered. */
  delivered: string[];
}

/** A daemon with its HTTP server and one console channel, after a baseline cycle. */
async function running(): Promise<Running> {
  world = await startWorld({ config: { server: { listen: '127.0.0.1:0' }, channels: [{ name: 'out', type: 'console' }] } });
  const delivered: string[] = [];
  const app = await world.app({}, { consoleWrite: (l) => delivered.push(l) });
  await app.start();
  await app.runOnce();
  return { app, url: app.serverUrl!, delivered };
}

async function post(url: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function get(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

interface StoredEvent {
  id: string;
  subject: string;
  status: string | null;
  silenced_by: string | null;
  outbox: number;
}

/** The event log with each event's silence and outbox rows, as an operator would query it. */
function stored(w: World): StoredEvent[] {
  const d = new BetterSqlite3(w.dbPath, { readonly: true });
  try {
    return d
      .prepare(
        `SELECT e.id, e.subject, e.status, e.silenced_by, (SELECT count(*) FROM outbox o WHERE o.event_id = e.id) AS outbox
         FROM events e ORDER BY e.seq`,
      )
      .all() as StoredEvent[];
  } finally {
    d.close();
  }
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('a silence created through the API', () => {
  it('holds back delivery but not storage, and stops once it is expired', async () => {
    const { app, url, delivered } = await running();
    const created = await post(`${url}/api/silences`, { match: 'site_id == 1', duration: '2h', comment: 'moving site 1 to a new server' });
    expect(created.status).toBe(201);
    const silence = created.body;
    expect(silence).toMatchObject({ state: 'active', match: 'site_id == 1', comment: 'moving site 1 to a new server', created_by: 'api', expired_at: null, suppressed: 0 });
    expect(silence.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Date.parse(silence.ends_at) - Date.parse(silence.starts_at)).toBe(2 * 3_600_000);

    world!.sim.world.setHealth(1, { status: 'offline' });
    world!.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();

    const byId = new Map(stored(world!).map((e) => [e.subject, e]));
    // Stored and visible...
    expect(byId.get('sites/1/health')).toMatchObject({ status: 'firing', silenced_by: silence.id, outbox: 0 });
    // ...but only the other site's event was queued and delivered.
    expect(byId.get('sites/2/health')).toMatchObject({ status: 'firing', silenced_by: null, outbox: 1 });
    expect(delivered.filter((l) => l.includes('site.offline')).map((l) => /\[(.*)\]$/.exec(l)![1])).toEqual(['sites/2/health']);
    expect(world!.events.map((e) => e.subject)).toContain('sites/1/health'); // committed and announced (SSE, dashboard)
    expect((await get(`${url}/api/silences/${silence.id}`)).body.suppressed).toBe(1);
    expect((await get(`${url}/api/silenced-events`)).body.data).toEqual([{ event_id: byId.get('sites/1/health')!.id, silence_id: silence.id }]);

    const expired = await post(`${url}/api/silences/${silence.id}/expire`, {});
    expect(expired.status).toBe(200);
    expect(expired.body.state).toBe('expired');
    expect(expired.body.expired_at).toMatch(ISO);

    world!.sim.world.setHealth(1, { status: 'online' });
    await app.runOnce();
    const resolved = stored(world!).find((e) => e.subject === 'sites/1/health' && e.status === 'resolved');
    expect(resolved).toMatchObject({ silenced_by: null, outbox: 1 });
    expect(delivered.some((l) => l.includes('resolved') && l.endsWith('[sites/1/health]'))).toBe(true);
  });

  it('also holds back the resolution of an alert that fired before it', async () => {
    const { app, url, delivered } = await running();
    world!.sim.world.setHealth(3, { status: 'offline' });
    await app.runOnce();
    const { body: silence } = await post(`${url}/api/silences`, { match: "name == 'site.offline' && site_id == 3", duration: '30m', comment: 'known' });
    world!.sim.world.setHealth(3, { status: 'online' });
    await app.runOnce();
    const events = stored(world!).filter((e) => e.subject === 'sites/3/health');
    expect(events.map((e) => [e.status, e.silenced_by, e.outbox])).toEqual([
      ['firing', null, 1],
      ['resolved', silence.id, 0],
    ]);
    expect(delivered.filter((l) => l.endsWith('[sites/3/health]'))).toHaveLength(1);
  });

  it('applies when another process (the CLI) wrote it to the database', async () => {
    const { app } = await running();
    const other = await openStore({ engine: 'sqlite', path: world!.dbPath }, { now: Date.now });
    const now = Date.now();
    await new SilencesRepo(other).add({
      id: 'cli-silence',
      match: 'site_id == 2',
      starts_at: now,
      ends_at: now + 3_600_000,
      comment: 'from the command line',
      created_by: 'ops',
      created_at: now,
      expired_at: null,
    });
    await other.close();
    world!.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    expect(stored(world!).find((e) => e.subject === 'sites/2/health')).toMatchObject({ silenced_by: 'cli-silence', outbox: 0 });
  });
});

describe('creating a silence', () => {
  it('refuses a match that is not CEL, with the CEL error', async () => {
    const { url } = await running();
    const bad = await post(`${url}/api/silences`, { match: 'site_id == (12', duration: '2h', comment: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^match: CEL error: <input>:1:\d+: /);
    const typo = await post(`${url}/api/silences`, { match: 'siteid == 12', duration: '2h', comment: 'x' });
    expect(typo.body.error.message).toBe(
      'match: CEL error: unknown variable "siteid"; a match can use type, name, severity, status, subject, site_id, domain, rule, labels',
    );
    const fn = await post(`${url}/api/silences`, { match: "domain.endswith('.shop')", duration: '2h', comment: 'x' });
    expect(fn.body.error.message).toBe('match: CEL error: unknown function "endswith" (did you mean endsWith?)');
    // A match that is no string is said to be one, not to be missing.
    const notText = await post(`${url}/api/silences`, { match: 12, duration: '2h', comment: 'x' });
    expect(notText.body.error.message).toMatch(/^match: must be a string: a CEL expression over /);
    const missing = await post(`${url}/api/silences`, { duration: '2h', comment: 'x' });
    expect(missing.body.error.message).toMatch(/^match: required: a CEL expression over /);
    const notBool = await post(`${url}/api/silences`, { match: 'site_id', duration: '2h', comment: 'x' });
    expect(notBool.body.error.message).toBe('match: must be true or false for an event (like "site_id == 12"), but it gives a number');
    // A severity no event has would silence nothing: refused with the near miss, amtool matchers too.
    for (const match of ["severity == 'critcal' && site_id == 3", 'severity="critcal"']) {
      const none = await post(`${url}/api/silences`, { match, duration: '2h', comment: 'x' });
      expect(none.status).toBe(400);
      expect(none.body.error.message).toBe('match: compares severity with "critcal", which no event has (did you mean critical?); severity is one of critical, warning, info');
    }
    // So would an event no rule sends; amtool matchers are read as the CEL they mean first.
    for (const match of ["name == 'site.ofline'", 'name="site.ofline"']) {
      const none = await post(`${url}/api/silences`, { match, duration: '2h', comment: 'x' });
      expect(none.status).toBe(400);
      expect(none.body.error.message).toBe(
        'match: compares name with "site.ofline", which no event has (did you mean site.offline?); the events are those of docs/events.md and the event: of your rules',
      );
    }
    expect((await get(`${url}/api/silences`)).body.data).toEqual([]);
  });

  it('reads amtool matchers as the CEL they mean, and answers with that CEL', async () => {
    const { url } = await running();
    const r = await post(`${url}/api/silences`, { match: 'site_id=12, severity!="info", domain=~"shop.*"', duration: '2h', comment: 'x' });
    expect(r.status).toBe(201);
    expect(r.body.match).toBe('site_id == 12 && severity != "info" && domain.matches("^(?:shop.*)$")');
  });

  it('names every bad field and what is allowed', async () => {
    const { url } = await running();
    const empty = await post(`${url}/api/silences`, {});
    expect(empty.status).toBe(400);
    expect(empty.body.error.message).toBe(
      'match: required: a CEL expression over type, name, severity, status, subject, site_id, domain, rule, labels (like "site_id == 12"); ' +
        'comment: required: a non-empty text saying why (who is working on what); ' +
        'duration: required (or ends_at): how long the silence lasts, like 30m, 2h or 1d',
    );
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ duration: '2 hours' }, 'duration: a positive duration like 30m, 2h or 1d12h (got "2 hours")'],
      [{ duration: '0' }, 'duration: a positive duration like 30m, 2h or 1d12h (got "0")'],
      [{ comment: '   ' }, 'comment: required: a non-empty text saying why (who is working on what)'],
      [{ duraton: '2h' }, 'duraton: unknown field; allowed: match, duration, ends_at, starts_at, comment, created_by'],
      [{ ends_at: '2030-01-01T00:00:00Z' }, 'duration: give either duration or ends_at, not both'],
      [{ duration: undefined, ends_at: 'tomorrow' }, 'ends_at: an ISO 8601 time with a zone, like 2026-11-21T16:00:00Z (got "tomorrow")'],
      [{ duration: undefined, ends_at: '2020-01-01T00:00:00Z' }, 'ends_at: must be after starts_at'],
      [{ starts_at: '2030-01-01 10:00' }, 'starts_at: an ISO 8601 time with a zone, like 2026-11-21T14:00:00Z (got "2030-01-01 10:00")'],
      [{ created_by: 42 }, 'created_by: a non-empty text of at most 200 characters (a name or an e-mail address)'],
      // CEL cut short is not an amtool matcher (site_id = "="), nor is a triple =.
      [{ match: 'site_id == ' }, 'match: CEL error: <input>:1:9: found = but expecting end of input'],
      [{ match: 'site_id === 12' }, 'match: CEL error: <input>:1:9: found = but expecting end of input'],
    ];
    for (const [change, message] of cases) {
      const body = { match: 'site_id == 1', duration: '2h', comment: 'ok', ...change };
      const res = await post(`${url}/api/silences`, body);
      expect(res.status, JSON.stringify(change)).toBe(400);
      expect(res.body.error.code).toBe('bad_request');
      expect(res.body.error.message).toContain(message);
    }
    const notObject = await post(`${url}/api/silences`, ['site_id == 1']);
    expect(notObject.body.error.message).toBe('body: expected a JSON object with match, duration (or ends_at) and comment');
  });

  it('refuses a silence longer than silences.max_duration (30 days by default), by duration or by end time', async () => {
    const { url } = await running();
    const tenYears = await post(`${url}/api/silences`, { match: 'true', duration: '3650d', comment: 'quiet' });
    expect(tenYears.status).toBe(400);
    expect(tenYears.body.error.message).toBe(
      'duration: a silence lasts at most 30d (silences.max_duration; got 3650d); for planned quiet periods use maintenance windows in the config',
    );
    // Longer than a number holds in milliseconds: too long too, not "no duration".
    const huge = await post(`${url}/api/silences`, { match: 'true', duration: '99999999999999999999d', comment: 'quiet' });
    expect(huge.body.error.message).toBe('duration: a silence lasts at most 30d (silences.max_duration; got "99999999999999999999d")');
    const later = await post(`${url}/api/silences`, { match: 'true', ends_at: new Date(Date.now() + 40 * 86_400_000 + 90_000).toISOString(), comment: 'quiet' });
    expect(later.status).toBe(400);
    expect(later.body.error.message).toMatch(/^ends_at: a silence lasts at most 30d \(silences\.max_duration; got 40d1m/);
    expect((await post(`${url}/api/silences`, { match: 'true', duration: '30d', comment: 'a month' })).status).toBe(201);
    const list = await get(`${url}/api/silences`);
    expect(list.body.data.map((s: { comment: string }) => s.comment)).toEqual(['a month']);
  });

  it('takes its cap from silences.max_duration in the API and in the CLI parser alike', () => {
    const r = parseSilenceRequest({ match: 'true', duration: '3h', comment: 'x' }, 0, { createdBy: 'cli', maxDurationMs: 2 * 3_600_000 });
    expect(r).toEqual({ ok: false, errors: [{ field: 'duration', message: expect.stringContaining('at most 2h (silences.max_duration; got 3h)') }] });
  });

  it('accepts an end time and a later start instead of a duration', async () => {
    const { url } = await running();
    const starts = new Date(Date.now() + 3_600_000).toISOString();
    const ends = new Date(Date.now() + 7_200_000).toISOString();
    const res = await post(`${url}/api/silences`, { match: "severity == 'info'", starts_at: starts, ends_at: ends, comment: 'tonight', created_by: 'ana' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ state: 'pending', starts_at: starts, ends_at: ends, created_by: 'ana' });
    expect(res.body.created_at).toMatch(ISO);
  });
});

describe('the silences list', () => {
  it('shows active silences first, then pending, then recently expired, with ISO times', async () => {
    const { url } = await running();
    const make = async (match: string, extra: Record<string, unknown>): Promise<string> =>
      (await post(`${url}/api/silences`, { match, comment: match, ...extra })).body.id as string;
    const long = await make('site_id == 1', { duration: '2h' });
    const later = await make('site_id == 2', { starts_at: new Date(Date.now() + 3_600_000).toISOString(), duration: '1h' });
    const short = await make('site_id == 3', { duration: '30m' });
    const gone = await make('site_id == 4', { duration: '1h' });
    await post(`${url}/api/silences/${gone}/expire`, {});

    const list = (await get(`${url}/api/silences`)).body.data as Array<Record<string, string>>;
    expect(list.map((s) => [s['id'], s['state']])).toEqual([
      [short, 'active'],
      [long, 'active'],
      [later, 'pending'],
      [gone, 'expired'],
    ]);
    for (const s of list) for (const k of ['starts_at', 'ends_at', 'created_at']) expect(s[k]).toMatch(ISO);
    expect((await get(`${url}/api/silences?state=pending`)).body.data.map((s: { id: string }) => s.id)).toEqual([later]);
    expect((await get(`${url}/api/silences?state=gone`)).body.error.message).toBe('state: one of active, pending, expired (got "gone")');
  });

  it('answers 404 for an unknown silence and leaves an expired one as it was', async () => {
    const { url } = await running();
    const missing = await post(`${url}/api/silences/no-such-id/expire`, {});
    expect(missing).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'no silence with id "no-such-id"' } } });
    const { body: s } = await post(`${url}/api/silences`, { match: 'true', duration: '1h', comment: 'all' });
    const first = (await post(`${url}/api/silences/${s.id}/expire`, {})).body;
    const again = await post(`${url}/api/silences/${s.id}/expire`, {});
    expect(again.status).toBe(200);
    expect(again.body.expired_at).toBe(first.expired_at);
  });
});

describe('silence matching (pure)', () => {
  const event = (data: Partial<HostwatchEvent['data']>): HostwatchEvent => ({
    specversion: '1.0',
    id: 'e1',
    source: 'hostwatch://t',
    type: 'hostwatch.site.offline',
    subject: 'sites/12/health',
    time: '2026-11-21T14:00:00.000Z',
    datacontenttype: 'application/json',
    data: { name: 'site.offline', severity: 'critical', status: 'firing', summary: 's', site_id: 12, domain: 'a.example', changes: [], rule: 'site-offline', observed_at: '', ...data },
  });
  const silence = (id: string, match: string): Silence => ({ id, match, starts_at: 0, ends_at: 10, comment: 'c', created_by: 'u', created_at: 0, expired_at: null });

  it('returns the first silence whose match is true, treating CEL errors as no match', () => {
    const m = new SilenceMatcher();
    const list = [silence('a', "labels.team == 'x'"), silence('b', 'site_id == 12'), silence('c', 'true')];
    expect(m.first(event({}), list)?.id).toBe('b');
    expect(m.first(event({ site_id: 13 }), list)?.id).toBe('c');
    expect(m.first(event({}), [])).toBeNull();
    expect(m.first(event({}), [silence('bad', 'site_id = 12')])).toBeNull();
  });

  it('knows pending, active and expired', () => {
    const s = { ...silence('a', 'true'), starts_at: 100, ends_at: 200 };
    expect([99, 100, 199, 200].map((t) => silenceState(s, t))).toEqual(['pending', 'active', 'active', 'expired']);
    expect(silenceState({ ...s, expired_at: 150 }, 120)).toBe('expired');
  });

  it('reads a CLI-style request (match, duration, comment) the same way', () => {
    const r = parseSilenceRequest({ match: 'site_id == 12', duration: '2h', comment: 'maintenance' }, 1_000, { createdBy: 'cli', maxDurationMs: 86_400_000 });
    expect(r).toEqual({
      ok: true,
      silence: { match: 'site_id == 12', starts_at: 1_000, ends_at: 1_000 + 7_200_000, comment: 'maintenance', created_by: 'cli', created_at: 1_000, expired_at: null },
    });
    expect(() => compileSilenceMatch('labels.exists(k, k == "team") && type(site_id) == int')).not.toThrow();
  });
});

describe('a line of silence list', () => {
  const H = 3_600_000;
  const now = Date.parse('2026-11-28T10:00:00Z');
  const silence = (starts: number, ends: number, expired: number | null = null): Silence => ({
    id: 's1',
    match: 'site_id == 3',
    starts_at: starts,
    ends_at: ends,
    comment: 'migration',
    created_by: 'ana',
    created_at: starts,
    expired_at: expired,
  });
  const line = (s: Silence): string => silenceLine(silenceView(s, now, 2), now);

  it('says until when an active one holds, and the time left', () => {
    expect(line(silence(now - H, now + 2 * H))).toBe('s1  active   until 2026-11-28T12:00:00.000Z  (ends in 2h)  site_id == 3  — migration (ana; 2 held back)');
  });

  it('says when a pending one starts and until when it will hold', () => {
    expect(line(silence(now + 3 * H, now + 5 * H))).toBe('s1  pending  from 2026-11-28T13:00:00.000Z until 2026-11-28T15:00:00.000Z  (starts in 3h)  site_id == 3  — migration (ana; 2 held back)');
  });

  it('says when an ended one ended: at its end, or when it was expired early, with the end it had', () => {
    expect(line(silence(now - 5 * H, now - 2 * H))).toBe('s1  expired  ended 2026-11-28T08:00:00.000Z  site_id == 3  — migration (ana; 2 held back)');
    expect(line(silence(now - 5 * H, now + 2 * H, now - H))).toBe(
      's1  expired  ended 2026-11-28T09:00:00.000Z  (expired early; it was until 2026-11-28T12:00:00.000Z)  site_id == 3  — migration (ana; 2 held back)',
    );
  });
});
