/**
 * The operator API over real loopback HTTP on the daemon's real SQLite file: the event
 * feed (paged and SSE), sources, alerts firing now and recent deliveries. Events come from
 * the simulator through the real pipeline; nothing is inserted by hand.
 */
import BetterSqlite3 from 'better-sqlite3';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { knownEventNames } from '../src/events/catalog.js';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App } from '../src/main.js';
import type { ServerContext } from '../src/server/context.js';
import { apiRoutes } from '../src/server/routes/api.js';
import { feedRoutes } from '../src/server/routes/feed.js';
import { silencesRoutes } from '../src/server/routes/silences.js';
import { startServer } from '../src/server/server.js';
import { SOURCES } from '../src/sources/registry.js';
import { repos } from '../src/store/repos.js';
import { startWorld, type World } from './harness.js';
import { ENGINES } from './pg.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function world(opts: Parameters<typeof startWorld>[0] = {}): Promise<World> {
  const w = await startWorld(opts);
  cleanups.push(() => w.close());
  return w;
}

/**
 * Serve the feed and api routes of an app over loopback, built from the app's own store,
 * bus and scheduler, without starting the scheduler: each test's runOnce() is then the only
 * poller, and what it commits is all there is. (One test below starts the whole daemon.)
 */
async function serve(app: App, over: Partial<ServerContext> = {}): Promise<{ url: string; close: () => Promise<void> }> {
  const ctx: ServerContext = {
    config: app.config,
    store: app.store,
    ...repos(app.store),
    scheduler: app.scheduler,
    sources: [],
    metrics: app.metrics,
    bus: app.bus,
    now: Date.now,
    log: app.log,
    eventNames: knownEventNames(app.rules),
    ...over,
  };
  const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: [...feedRoutes(ctx), ...apiRoutes(ctx), ...silencesRoutes(ctx)] });
  cleanups.push(() => srv.close());
  return srv;
}

/** Statuses each site walks through; every step differs from the one before. */
const WALK = ['offline', 'online', 'slow', 'online'];

/** `cycles` polls in which every site's health changes (sites out of step), each making events. */
async function churn(w: World, app: App, cycles: number, from = 0): Promise<void> {
  const sites = w.sim.world.snapshot().sites.length;
  for (let c = from; c < from + cycles; c++) {
    for (let s = 1; s <= sites; s++) w.sim.world.setHealth(s, { status: WALK[(c + s) % WALK.length]! });
    await app.runOnce();
  }
}

/** Every event in the database, in log order. */
function logged(w: World): Array<{ seq: number; id: string; body: string }> {
  const db = new BetterSqlite3(w.dbPath, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT seq, id, body FROM events ORDER BY seq').all() as Array<{ seq: number; id: string; body: string }>;
  } finally {
    db.close();
  }
}

interface FeedPage {
  data: HostwatchEvent[];
  cursor: string;
  has_more: boolean;
}

async function getJson<T>(url: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  const res = await fetch(url, init);
  return { status: res.status, body: (await res.json()) as T };
}

/** Page through the feed from `after` with `limit`, as a consumer catching up would. */
async function readAll(base: string, query: string, after: string | null, limit: number): Promise<{ events: HostwatchEvent[]; cursor: string; pages: number }> {
  const events: HostwatchEvent[] = [];
  let cursor = after;
  let pages = 0;
  for (;;) {
    const sep = query ? `${query}&` : '';
    const { status, body } = await getJson<FeedPage>(`${base}/api/events?${sep}limit=${limit}${cursor === null ? '' : `&after=${cursor}`}`);
    expect(status).toBe(200);
    pages++;
    expect(body.data.length).toBeLessThanOrEqual(limit);
    events.push(...body.data);
    cursor = body.cursor;
    if (!body.has_more) return { events, cursor, pages };
    expect(body.data).toHaveLength(limit);
  }
}

describe('GET /api/events', () => {
  it('returns every event exactly once, in order, across pages and across a restart', async () => {
    const w = await world({ sim: { sites: 5 } });
    let app = await w.app();
    await app.runOnce(); // baseline
    await churn(w, app, 6);
    expect(w.events.length).toBeGreaterThanOrEqual(25);
    let srv = await serve(app);

    const first = await readAll(srv.url, '', null, 4);
    expect(first.events.map((e) => e.id)).toEqual(w.events.map((e) => e.id));
    expect(first.pages).toBe(Math.ceil(w.events.length / 4));
    // Items are the stored CloudEvents, byte for byte, nothing added.
    expect(first.events.map((e) => JSON.stringify(e))).toEqual(logged(w).map((r) => r.body));
    expect(first.cursor).toBe(String(logged(w).at(-1)!.seq));

    // Caught up: an empty page that keeps the cursor.
    const empty = await getJson<FeedPage>(`${srv.url}/api/events?after=${first.cursor}`);
    expect(empty.body).toEqual({ data: [], cursor: first.cursor, has_more: false });

    // Restart: a new daemon on the same database; the consumer continues from its cursor.
    await srv.close();
    await app.stop();
    const before = w.events.length;
    app = await w.app();
    srv = await serve(app);
    await churn(w, app, 2, 6);
    const fresh = w.events.slice(before);
    expect(fresh.length).toBeGreaterThanOrEqual(8);
    const second = await readAll(srv.url, '', first.cursor, 4);
    expect(second.events.map((e) => e.id)).toEqual(fresh.map((e) => e.id));
    const all = [...first.events, ...second.events].map((e) => e.id);
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual(logged(w).map((r) => r.id));
  });

  it('filters by type (CloudEvents type or short name) and by site, and pages within the filter', async () => {
    const w = await world({ sim: { sites: 4 } });
    const app = await w.app();
    await app.runOnce();
    await churn(w, app, 4);
    const srv = await serve(app);

    const slow = w.events.filter((e) => e.type === 'hostwatch.site.slow').map((e) => e.id);
    expect(slow.length).toBeGreaterThan(2);
    expect((await readAll(srv.url, 'type=site.slow', null, 2)).events.map((e) => e.id)).toEqual(slow);
    expect((await readAll(srv.url, 'type=hostwatch.site.slow', null, 100)).events.map((e) => e.id)).toEqual(slow);

    const site2 = w.events.filter((e) => e.data.site_id === 2).map((e) => e.id);
    expect(site2.length).toBeGreaterThan(2);
    expect((await readAll(srv.url, 'site_id=2', null, 3)).events.map((e) => e.id)).toEqual(site2);

    const both = w.events.filter((e) => e.data.site_id === 2 && e.type === 'hostwatch.site.offline').map((e) => e.id);
    expect(both.length).toBeGreaterThan(0);
    expect((await readAll(srv.url, 'site_id=2&type=site.offline', null, 1)).events.map((e) => e.id)).toEqual(both);

  });

  it('still finds the events of a type the log holds that no rule raises any more (a rule removed or renamed since)', async () => {
    const w = await world({ sim: { sites: 2 } });
    const app = await w.app();
    await app.runOnce();
    await churn(w, app, 2);
    // As if the rule of site.slow had gone: the dashboard still offers the types of the events it shows.
    const srv = await serve(app, { eventNames: knownEventNames(app.rules).filter((n) => n !== 'site.slow') });
    const slow = w.events.filter((e) => e.type === 'hostwatch.site.slow').map((e) => e.id);
    expect(slow.length).toBeGreaterThan(0);
    expect((await readAll(srv.url, 'type=hostwatch.site.slow', null, 100)).events.map((e) => e.id)).toEqual(slow);
    expect((await readAll(srv.url, 'type=site.slow', null, 100)).events.map((e) => e.id)).toEqual(slow);
  });

  it('finds the watchdog by its documented name hostwatch.watchdog and by its type hostwatch.hostwatch.watchdog, on a page and on the stream', async () => {
    const w = await world({ config: { watchdog: { every: '1h' } } });
    const app = await w.app();
    await app.runOnce();
    const srv = await serve(app);
    const dogs = w.events.filter((e) => e.type === 'hostwatch.hostwatch.watchdog').map((e) => e.id);
    expect(dogs).toHaveLength(1);
    for (const type of ['hostwatch.watchdog', 'hostwatch.hostwatch.watchdog']) {
      expect((await readAll(srv.url, `type=${type}`, null, 10)).events.map((e) => e.id), type).toEqual(dogs);
      expect((await getJson<FeedPage>(`${srv.url}/api/events?last=5&type=${type}`)).body.data.map((e) => e.id), type).toEqual(dogs);
      const sse = await connect(`${srv.url}/api/events/stream?type=${type}`);
      await sse.waitFor(1);
      expect(sse.messages.map((m) => (JSON.parse(m.data) as HostwatchEvent).id), type).toEqual(dogs);
      sse.close();
    }
  });

  it('with last=N returns the newest N events, oldest first, and a cursor to follow on from', async () => {
    const w = await world({ sim: { sites: 4 } });
    const app = await w.app();
    await app.runOnce();
    await churn(w, app, 4);
    const srv = await serve(app);
    const all = logged(w);
    const r = await getJson<FeedPage>(`${srv.url}/api/events?last=5`);
    expect(r.body.data.map((e) => e.id)).toEqual(all.slice(-5).map((e) => e.id));
    expect(r.body).toMatchObject({ cursor: String(all.at(-1)!.seq), has_more: false });
    // Following on from that cursor finds nothing old, and then exactly the new events.
    expect((await getJson<FeedPage>(`${srv.url}/api/events?after=${r.body.cursor}`)).body.data).toEqual([]);
    const site2 = all.filter((e) => (JSON.parse(e.body) as HostwatchEvent).data.site_id === 2);
    const f = await getJson<FeedPage>(`${srv.url}/api/events?last=2&site_id=2`);
    expect(f.body.data.map((e) => e.id)).toEqual(site2.slice(-2).map((e) => e.id));
    expect((await getJson<{ error: { message: string } }>(`${srv.url}/api/events?last=2&after=3`)).body.error.message).toBe(
      'last: cannot be combined with after (last starts from the newest events)',
    );
    // limit beside last would be ignored: the page would look limited, and it is not.
    const both = await getJson<{ error: { message: string } }>(`${srv.url}/api/events?last=2&limit=1`);
    expect([both.status, both.body.error.message]).toEqual([400, 'limit: cannot be combined with last (last=N is the number of newest events to return)']);
  });

  it('answers a bad parameter with 400, naming the parameter and what is allowed', async () => {
    const w = await world();
    const srv = await serve(await w.app());
    const cases: Array<[string, string]> = [
      ['limit=0', 'limit: expected a whole number from 1 to 1000 (got "0")'],
      ['limit=1001', 'limit: expected a whole number from 1 to 1000 (got "1001")'],
      ['limit=ten', 'limit: expected a whole number from 1 to 1000 (got "ten")'],
      ['after=-1', 'after: expected a cursor returned by this feed (got "-1")'],
      ['after=abc', 'after: expected a cursor returned by this feed (got "abc")'],
      ['site_id=example.com', 'site_id: expected a site id (a whole number) (got "example.com")'],
      ['type=Site%20Offline', 'type: expected an event type like site.offline or hostwatch.site.offline (got "Site Offline")'],
      // A rule's name is its event's name with dashes.
      ['type=site-offline', 'type: expected an event type like site.offline or hostwatch.site.offline (got "site-offline"); did you mean site.offline?'],
      ['type=site.offlin', 'type: no event is named site.offlin; did you mean site.offline? (docs/events.md lists them)'],
      ['type=hostwatch.site.offlin', 'type: no event is named hostwatch.site.offlin; did you mean site.offline? (docs/events.md lists them)'],
      ['type=site.nothing_like_this', 'type: no event is named site.nothing_like_this (docs/events.md lists them)'],
      ['foo=bar', 'foo: unknown parameter; /api/events takes after, type, site_id, limit, last'],
      ['since=2026-11-21T00:00:00Z', 'since: unknown parameter; /api/events takes after, type, site_id, limit, last'],
      ['severity=critical&limit=5', 'severity: unknown parameter; /api/events takes after, type, site_id, limit, last'],
      ['type=site.offline&type=site.slow', 'type: given 2 times; give it once'],
      // Empty, each was read as absent: the whole log came back as if filtered.
      ['type=', 'type: empty; give it a value, or leave it out'],
      ['after=&limit=5', 'after: empty; give it a value, or leave it out'],
    ];
    for (const [query, message] of cases) {
      const r = await getJson<unknown>(`${srv.url}/api/events?${query}`);
      expect(r, query).toEqual({ status: 400, body: { error: { code: 'bad_request', message } } });
    }
    const stream = await getJson<unknown>(`${srv.url}/api/events/stream`, { headers: { 'last-event-id': 'yesterday' } });
    expect(stream).toEqual({
      status: 400,
      body: { error: { code: 'bad_request', message: 'Last-Event-ID: expected a cursor returned by this feed (got "yesterday")' } },
    });
    const streamCases: Array<[string, string]> = [
      ['last=10', 'last: unknown parameter; /api/events/stream takes after, type, site_id, access_token (to start from the newest events, start from the cursor of GET /api/events?last=N)'],
      ['foo=bar', 'foo: unknown parameter; /api/events/stream takes after, type, site_id, access_token'],
      ['type=site.offlin', 'type: no event is named site.offlin; did you mean site.offline? (docs/events.md lists them)'],
    ];
    for (const [query, message] of streamCases) {
      const r = await getJson<unknown>(`${srv.url}/api/events/stream?${query}`);
      expect(r, query).toEqual({ status: 400, body: { error: { code: 'bad_request', message } } });
    }
    // The stream takes the token in its query (EventSource cannot send headers), and the dashboard's parameters.
    for (const query of ['access_token=any&after=0', 'type=site.offline&site_id=1']) {
      expect((await fetch(`${srv.url}/api/events/stream?${query}`, { method: 'HEAD' })).status, query).toBe(200);
    }
  });

  it('is as strict on the other read endpoints: an unknown parameter is a 400 naming what each takes, and the dashboard\'s own are taken', async () => {
    const w = await world();
    const srv = await serve(await w.app());
    const cases: Array<[string, string]> = [
      ['/api/deliveries?failed=true&chanel=hooks', 'chanel: unknown parameter; /api/deliveries takes limit, failed, pending, channel'],
      ['/api/silences?status=active', 'status: unknown parameter; /api/silences takes state'],
      ['/api/silenced-events?limit=5&since=1h', 'since: unknown parameter; /api/silenced-events takes limit'],
      ['/api/sources?verbose=1', 'verbose: unknown parameter; /api/sources takes none'],
      ['/api/alerts?severity=critical', 'severity: unknown parameter; /api/alerts takes none'],
    ];
    for (const [path, message] of cases) {
      expect(await getJson<unknown>(`${srv.url}${path}`), path).toEqual({ status: 400, body: { error: { code: 'bad_request', message } } });
    }
    for (const path of ['/api/deliveries?limit=50&failed=true', '/api/silences?state=active', '/api/silenced-events?limit=20', '/api/sources', '/api/alerts']) {
      expect((await fetch(`${srv.url}${path}`)).status, path).toBe(200);
    }
  });
});

interface SseMessage {
  id: string | null;
  data: string;
  fields: string[];
}

/** An SSE client over fetch streaming, with a small parser: enough to check the wire format. */
interface SseClient {
  status: number;
  contentType: string | null;
  messages: SseMessage[];
  comments: string[];
  retry: number | null;
  /** Wait until `n` messages have arrived (fails after `ms`). */
  waitFor(n: number, ms?: number): Promise<void>;
  close(): void;
}

async function connect(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal });
  const client: SseClient = {
    status: res.status,
    contentType: res.headers.get('content-type'),
    messages: [],
    comments: [],
    retry: null,
    async waitFor(n, ms = 5000) {
      const deadline = Date.now() + ms;
      while (client.messages.length < n) {
        if (Date.now() > deadline) throw new Error(`SSE: ${client.messages.length} of ${n} messages after ${ms} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    close: () => ac.abort(),
  };
  cleanups.push(async () => client.close());
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  void (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          parseBlock(client, buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch {
      // aborted by close()
    }
  })();
  return client;
}

function parseBlock(client: SseClient, block: string): void {
  let id: string | null = null;
  const data: string[] = [];
  const fields: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) {
      client.comments.push(line);
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    fields.push(field);
    if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
    else if (field === 'retry') client.retry = Number(value);
  }
  if (data.length > 0) client.messages.push({ id, data: data.join('\n'), fields });
}

describe.each(ENGINES)('a feed cursor from another event log, on %s', (engine) => {
  it('is refused with 410 cursor_beyond_log on a page and on the stream, naming where this log ends and where to start again', async () => {
    // The consumer read the old database's log up to its end...
    const old = await world({ engine, sim: { sites: 4 } });
    const before = await old.app();
    await before.runOnce();
    await churn(old, before, 3);
    const read = await readAll((await serve(before)).url, '', null, 1000);
    expect(Number(read.cursor)).toBeGreaterThan(4);
    // ...then storage points at a new database, whose log starts again at 1.
    const w = await world({ engine, sim: { sites: 1 } });
    const app = await w.app();
    await app.runOnce();
    w.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    const srv = await serve(app);
    const end = (await getJson<FeedPage>(`${srv.url}/api/events?last=1`)).body.cursor;
    expect(Number(end)).toBeLessThan(Number(read.cursor));
    const message = (name: string): string =>
      `${name}: cursor ${read.cursor} is past the end of this event log, which holds events up to cursor ${end}; the log was likely reset (a new database, or an older backup restored). Start again from cursor 0 to read the whole log (deduplicate on the event id), or from cursor ${end} to read only the events that come next`;
    for (const query of [`after=${read.cursor}`, `after=${read.cursor}&type=site.offline`, `after=${read.cursor}&limit=1`]) {
      expect(await getJson(`${srv.url}/api/events?${query}`), query).toEqual({ status: 410, body: { error: { code: 'cursor_beyond_log', message: message('after') } } });
    }
    expect(await getJson(`${srv.url}/api/events/stream?after=${read.cursor}`)).toEqual({ status: 410, body: { error: { code: 'cursor_beyond_log', message: message('after') } } });
    expect(await getJson(`${srv.url}/api/events/stream?after=0`, { headers: { 'last-event-id': read.cursor } })).toEqual({
      status: 410,
      body: { error: { code: 'cursor_beyond_log', message: message('Last-Event-ID') } },
    });
    // Within the log, an empty page is still an empty page, filtered or not; starting again reads the new log.
    expect((await getJson<FeedPage>(`${srv.url}/api/events?after=${end}`)).body).toEqual({ data: [], cursor: end, has_more: false });
    expect((await getJson<FeedPage>(`${srv.url}/api/events?after=1&type=backup.failed`)).status).toBe(200);
    expect((await readAll(srv.url, '', '0', 100)).events.map((e) => e.id)).toEqual(w.events.map((e) => e.id));
    const stream = await connect(`${srv.url}/api/events/stream`, { 'last-event-id': end });
    expect(stream.status).toBe(200);
  });
});

describe('GET /api/events/stream', () => {
  it('resumes from Last-Event-ID without gaps or repeats', async () => {
    const w = await world({ sim: { sites: 4 } });
    const app = await w.app();
    await app.runOnce();
    await churn(w, app, 3);
    const srv = await serve(app);
    const backlog = w.events.length;

    const one = await connect(`${srv.url}/api/events/stream`);
    expect(one.status).toBe(200);
    expect(one.contentType).toBe('text/event-stream');
    await one.waitFor(backlog);
    expect(one.retry).toBe(2000);
    // Live while connected, then gone.
    await churn(w, app, 1, 3);
    await one.waitFor(w.events.length);
    one.close();
    const lastSeen = one.messages.at(-1)!.id!;
    // A closed stream leaves no listener behind on the bus.
    for (let i = 0; app.bus.listenerCount('events') > 0 && i < 200; i++) await new Promise((r) => setTimeout(r, 5));
    expect(app.bus.listenerCount('events')).toBe(0);

    // Made while no one listens.
    await churn(w, app, 2, 4);
    const two = await connect(`${srv.url}/api/events/stream?after=0`, { 'last-event-id': lastSeen });
    await two.waitFor(w.events.length - one.messages.length);
    await new Promise((r) => setTimeout(r, 100)); // nothing more must come
    const union = [...one.messages, ...two.messages];

    const rows = logged(w);
    expect(union.map((m) => m.id)).toEqual(rows.map((r) => String(r.seq)));
    expect(union.map((m) => m.data)).toEqual(rows.map((r) => r.body));
    expect(union.map((m) => (JSON.parse(m.data) as HostwatchEvent).id)).toEqual(w.events.map((e) => e.id));
    // id and data only: no `event:` field, so EventSource.onmessage receives every one.
    for (const m of union) expect(m.fields).toEqual(['id', 'data']);
  });

  it('delivers an event committed while connected within a second', async () => {
    const w = await world();
    let committedAt = 0;
    const app = await w.app({}, { onEvents: () => (committedAt = Date.now()) });
    await app.runOnce();
    const srv = await serve(app);
    const sse = await connect(`${srv.url}/api/events/stream?after=${logged(w).at(-1)?.seq ?? 0}`);
    while (sse.retry === null) await new Promise((r) => setTimeout(r, 5));

    w.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    await sse.waitFor(1, 1000);
    const latency = Date.now() - committedAt;
    expect(latency).toBeLessThan(1000);
    const event = JSON.parse(sse.messages[0]!.data) as HostwatchEvent;
    expect(event.id).toBe(w.events[0]!.id);
    expect(event.type).toBe('hostwatch.site.offline');
  });

  it('answers HEAD at once with the headers a GET would get and no body, and a bad Last-Event-ID with 400 as GET does', async () => {
    const w = await world();
    const app = await w.app();
    const srv = await serve(app);
    const head = await request(`${srv.url}/api/events/stream`, { method: 'HEAD', headersTimeout: 2000, bodyTimeout: 2000 });
    expect(head.statusCode).toBe(200);
    expect(head.headers['content-type']).toBe('text/event-stream');
    expect(await head.body.text()).toBe('');
    const bad = await request(`${srv.url}/api/events/stream`, { method: 'HEAD', headers: { 'last-event-id': 'x' }, headersTimeout: 2000 });
    expect(bad.statusCode).toBe(400);
    await bad.body.dump();
  });

  it('streams only the events that match its filters', async () => {
    const w = await world({ sim: { sites: 3 } });
    const app = await w.app();
    await app.runOnce();
    const srv = await serve(app);
    const sse = await connect(`${srv.url}/api/events/stream?type=site.slow&site_id=1`);
    await churn(w, app, 4);
    const expected = w.events.filter((e) => e.type === 'hostwatch.site.slow' && e.data.site_id === 1);
    expect(expected.length).toBeGreaterThan(0);
    await sse.waitFor(expected.length);
    await new Promise((r) => setTimeout(r, 100));
    expect(sse.messages.map((m) => (JSON.parse(m.data) as HostwatchEvent).id)).toEqual(expected.map((e) => e.id));
  });
});

interface SourceView {
  name: string;
  per: string;
  scope: string;
  enabled: boolean;
  every_ms: number;
  last_attempt_at: string | null;
  last_success_at: string | null;
  consecutive_failures: number;
  last_error_code: string | null;
  last_error: string | null;
  failing_entities: number;
  degraded: boolean;
  read_with: string | null;
  next_run_at: string | null;
}

describe('GET /api/sources', () => {
  it('reports every source, a failing one with its error code, and when each runs next', async () => {
    const w = await world({ config: { server: { listen: '127.0.0.1:0' }, sources: { usage: { enabled: false }, health: { every: '7m' } } } });
    w.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    const app = await w.app();
    // The whole daemon this time: start() runs every source once; wait for the jobs cycle.
    const jobsDone = new Promise<void>((resolve) => app.scheduler.on('cycle:end', (s) => s.source === 'jobs' && resolve()));
    const startedAt = Date.now();
    await app.start();
    await jobsDone;

    const { status, body } = await getJson<{ data: SourceView[] }>(`${app.serverUrl}/api/sources`);
    expect(status).toBe(200);
    expect(body.data.map((s) => s.name)).toEqual(SOURCES.map((s) => s.name));
    const by = new Map(body.data.map((s) => [s.name, s]));
    expect(by.get('jobs')).toMatchObject({
      per: 'account',
      scope: 'account:read',
      enabled: true,
      every_ms: 300_000,
      last_success_at: null,
      consecutive_failures: 1,
      last_error_code: 'internal_error',
      failing_entities: 1,
    });
    expect(by.get('jobs')!.last_error).toEqual(expect.any(String));
    expect(Date.parse(by.get('jobs')!.last_attempt_at!)).toBeGreaterThanOrEqual(startedAt);
    expect(Date.parse(by.get('jobs')!.next_run_at!)).toBeGreaterThan(Date.now());
    expect(by.get('sites')).toMatchObject({ enabled: true, consecutive_failures: 0, last_error_code: null, failing_entities: 0 });
    expect(by.get('sites')!.last_success_at).not.toBeNull();
    expect(by.get('health')).toMatchObject({ per: 'site', enabled: true, every_ms: 420_000 });
    expect(by.get('usage')).toMatchObject({ enabled: false, next_run_at: null, every_ms: 1_800_000, last_attempt_at: null });
    // A view and a detail say whose cycle reads them; nothing is degraded after one failure.
    expect(by.get('dns_publishing')).toMatchObject({ read_with: 'dns', degraded: false });
    expect(by.get('cron_runs')).toMatchObject({ read_with: 'cron_list' });
    expect(by.get('jobs')!.degraded).toBe(false);
    // Nothing secret in the reply.
    expect(JSON.stringify(body)).not.toContain(app.config.api.key);
  });
});

describe('GET /api/alerts', () => {
  it('lists a firing alert with the event of its firing, and drops it once resolved', async () => {
    const w = await world();
    const app = await w.app();
    await app.runOnce();
    const srv = await serve(app);
    expect((await getJson(`${srv.url}/api/alerts`)).body).toEqual({ data: [] });

    w.sim.world.setHealth(3, { status: 'offline' });
    await app.runOnce();
    const firing = w.events.find((e) => e.type === 'hostwatch.site.offline' && e.data.status === 'firing')!;
    const { body } = await getJson<{ data: unknown[] }>(`${srv.url}/api/alerts`);
    expect(body.data).toEqual([{ rule: 'site-offline', subject: 'sites/3/health', site_id: 3, since: expect.any(String), seq: 1, event: firing }]);

    w.sim.world.setHealth(3, { status: 'online' });
    await app.runOnce();
    expect(w.events.at(-1)!.data.status).toBe('resolved');
    expect((await getJson(`${srv.url}/api/alerts`)).body).toEqual({ data: [] });
  });
});

describe('GET /api/deliveries', () => {
  it('shows a dead-lettered delivery among the recent ones, and alone with failed=true; counts the failed ones beyond the rows a limit lets through', async () => {
    // 404, not 410: a 410 also disables the channel (test/delivery-channels.test.ts).
    const gone: Receiver = await startReceiver({ answer: () => ({ status: 404, body: 'gone for good' }) });
    const ok: Receiver = await startReceiver();
    cleanups.push(() => gone.close(), () => ok.close());
    const w = await world();
    const hook = (name: string, r: Receiver): Record<string, unknown> => ({ name, type: 'webhook', url: r.url, secret: TEST_SECRET, timeout: '2s' });
    const app = await w.app({ channels: [hook('gone', gone), hook('ok', ok)] });
    await app.runOnce();
    w.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    const event = w.events[0]!;
    const srv = await serve(app);

    const all = await getJson<{ data: Array<Record<string, unknown>> }>(`${srv.url}/api/deliveries`);
    expect(all.status).toBe(200);
    expect(all.body.data.map((d) => d['channel'])).toEqual(['ok', 'gone']); // newest first
    const dead = {
      event_id: event.id,
      type: 'hostwatch.site.offline',
      subject: 'sites/1/health',
      channel: 'gone',
      state: 'dead',
      attempts: 1,
      last_error: 'permanent failure: HTTP 404: gone for good',
      next_attempt_at: null,
      updated_at: expect.any(String),
      id: expect.any(Number),
      group_key: null,
      last_status: 404,
      waits_behind: null,
    };
    expect(all.body.data[1]).toEqual(dead);
    expect(all.body.data[0]).toMatchObject({ channel: 'ok', state: 'delivered', attempts: 1, last_error: null });

    expect((await getJson(`${srv.url}/api/deliveries?failed=true`)).body).toEqual({ data: [dead], failed_total: 1 });
    expect((await getJson<{ data: unknown[] }>(`${srv.url}/api/deliveries?channel=ok&limit=5`)).body).toEqual({ data: [expect.objectContaining({ channel: 'ok' })], failed_total: 0 });
    // The dashboard's "N failing" is the total, also when the failed row is not on the page.
    expect((await getJson(`${srv.url}/api/deliveries?limit=1`)).body).toEqual({ data: [expect.objectContaining({ channel: 'ok', state: 'delivered' })], failed_total: 1 });
    // pending=true: the rows still to send. None now; the dead one once it is queued again.
    expect((await getJson(`${srv.url}/api/deliveries?pending=true`)).body).toEqual({ data: [], failed_total: 1 });
    const db = new BetterSqlite3(w.dbPath);
    db.prepare(`UPDATE outbox SET state = 'pending', next_attempt_at = 0 WHERE channel = 'gone'`).run();
    db.close();
    expect((await getJson<{ data: Array<Record<string, unknown>> }>(`${srv.url}/api/deliveries?pending=true`)).body.data.map((d) => [d['channel'], d['state']])).toEqual([['gone', 'pending']]);
    // A mistyped channel is a 400 that names the channels, not an empty list.
    expect(await getJson(`${srv.url}/api/deliveries?channel=okk`)).toEqual({
      status: 400,
      body: { error: { code: 'bad_request', message: 'channel: no channel named "okk" in the config or the outbox (its channels: gone, ok)' } },
    });
    expect(await getJson(`${srv.url}/api/deliveries?failed=yes`)).toEqual({
      status: 400,
      body: { error: { code: 'bad_request', message: 'failed: expected true or false (got "yes")' } },
    });
  });
});
