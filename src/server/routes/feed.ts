import type { ServerResponse } from 'node:http';
import { resolveTypeFilter } from '../../events/envelope.js';
import type { EventFilter, LoggedEvent } from '../../store/events-repo.js';
import type { ServerContext } from '../context.js';
import { badRequest, HttpError, intParam, onlyParams, shown, wholeNumber, type Request, type Route } from '../http.js';

const LIMIT_DEFAULT = 100;
const LIMIT_MAX = 1000;
/** Rows read per query while a stream catches up (bounded memory for a long backlog). */
const STREAM_PAGE = 500;
const PING_MS = 15_000;
const RETRY_MS = 2_000;
/** The parameters each endpoint takes: anything else is a 400 naming them. */
const PAGE_PARAMS = ['after', 'type', 'site_id', 'limit', 'last'];
const STREAM_PARAMS = ['after', 'type', 'site_id', 'access_token'];
const STREAM_HINTS = { last: 'to start from the newest events, start from the cursor of GET /api/events?last=N' };

/**
 * The event feed: the durable event log, paged with a cursor (`GET /api/events`) and live
 * as Server-Sent Events (`GET /api/events/stream`). The cursor is the event's `seq` as a
 * decimal string; consumers treat it as opaque. Items are the stored CloudEvent bodies,
 * byte for byte: the feed never re-serializes an event.
 */
export function feedRoutes(ctx: ServerContext): Route[] {
  return [
    { method: 'GET', path: '/api/events', handler: (req, res) => page(ctx, req, res) },
    { method: 'GET', path: '/api/events/stream', queryToken: true, handler: (req, res) => stream(ctx, req, res) },
  ];
}

async function page(ctx: ServerContext, req: Request, res: ServerResponse): Promise<void> {
  const q = req.url.searchParams;
  onlyParams(q, '/api/events', PAGE_PARAMS);
  const after = cursorParam('after', q.get('after'));
  const filter = await filterParams(ctx, q);
  const limit = intParam(q, 'limit', { min: 1, max: LIMIT_MAX, expected: `a whole number from 1 to ${LIMIT_MAX}` }) ?? LIMIT_DEFAULT;
  // `last=N`: the newest N events (still oldest first), with the cursor to follow on from;
  // a dashboard or a new consumer starts there without paging through the whole log.
  const last = intParam(q, 'last', { min: 1, max: LIMIT_MAX, expected: `a whole number from 1 to ${LIMIT_MAX}` });
  if (last !== null) {
    if (q.get('after')) throw badRequest('last: cannot be combined with after (last starts from the newest events)');
    // Ignored, limit would seem to have worked: last is the number of events.
    if (q.get('limit') !== null) throw badRequest('limit: cannot be combined with last (last=N is the number of newest events to return)');
    const newest = (await ctx.events.latest(filter, last)).reverse();
    const cursor = String(newest.at(-1)?.seq ?? (await ctx.events.lastSeq()));
    const body = `{"data":[${newest.map((r) => r.body).join(',')}],"cursor":${JSON.stringify(cursor)},"has_more":false}`;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body);
    return;
  }
  // One row more than asked tells whether another page follows.
  const rows = await ctx.events.list(after, filter, limit + 1);
  // Asked only when nothing came back: a cursor with events after it is within the log.
  if (rows.length === 0) await refuseBeyondLog(ctx, 'after', after);
  const items = rows.slice(0, limit);
  const cursor = String(items.at(-1)?.seq ?? after);
  const body = `{"data":[${items.map((r) => r.body).join(',')}],"cursor":${JSON.stringify(cursor)},"has_more":${rows.length > limit}}`;
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(body);
}

/**
 * SSE: everything after the cursor from the database, then more on every 'events' wake-up
 * of the bus. The bus only says "look again"; what is sent always comes from a query for
 * seq > last sent, so a wake-up missed or merged, or a page cut short, leaves no gap.
 */
async function stream(ctx: ServerContext, req: Request, res: ServerResponse): Promise<void> {
  onlyParams(req.url.searchParams, '/api/events/stream', STREAM_PARAMS, STREAM_HINTS);
  const resumeFrom = req.raw.headers['last-event-id'];
  const fromHeader = typeof resumeFrom === 'string' && resumeFrom !== '';
  const from = fromHeader ? cursorParam('Last-Event-ID', resumeFrom) : cursorParam('after', req.url.searchParams.get('after'));
  const filter = await filterParams(ctx, req.url.searchParams);
  // Before the 200: EventSource gives up on an error status instead of reconnecting for good.
  await refuseBeyondLog(ctx, fromHeader ? 'Last-Event-ID' : 'after', from);
  const headers = {
    'content-type': 'text/event-stream',
    'cache-control': 'no-store',
    connection: 'keep-alive',
    // Reverse proxies (nginx) must pass events through as they come, not buffer them.
    'x-accel-buffering': 'no',
  };
  // HEAD: the headers a GET would get, and the end (a stream's headers alone never end it).
  if (req.raw.method === 'HEAD') {
    res.writeHead(200, headers).end();
    return;
  }
  const pump = eventPump(ctx, res, filter, from);
  res.writeHead(200, headers);
  res.write(`retry: ${RETRY_MS}\n\n`);
  const wake = (): void => void pump();
  const ping = setInterval(() => res.writableEnded || res.write(': ping\n\n'), PING_MS);
  res.on('close', () => {
    clearInterval(ping);
    ctx.bus.off('events', wake);
  });
  // Listen before the first query: an event committed while it runs still wakes a pump.
  ctx.bus.on('events', wake);
  await pump();
}

/**
 * A function that writes every matching event after the last one sent, in pages, waiting
 * for the socket to drain. A call made while one runs is merged into it (one more pass).
 */
function eventPump(ctx: ServerContext, res: ServerResponse, filter: EventFilter, from: number): () => Promise<void> {
  let last = from;
  let running = false;
  let again = false;
  let closed = false;
  res.on('close', () => (closed = true));
  return async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        let rows: LoggedEvent[];
        do {
          if (closed || res.writableEnded) return;
          rows = await ctx.events.list(last, filter, STREAM_PAGE);
          let chunk = '';
          for (const r of rows) chunk += `id: ${r.seq}\ndata: ${r.body}\n\n`;
          last = rows.at(-1)?.seq ?? last;
          if (chunk !== '' && !res.write(chunk)) await drained(res);
        } while (rows.length === STREAM_PAGE);
      } while (again);
    } catch (e) {
      // The database closed under us (shutdown) or failed: end the stream; the client reconnects.
      ctx.log.warn({ err: String(e) }, 'event stream ended by an error');
      res.end();
    } finally {
      running = false;
    }
  };
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** The `type` and `site_id` filters shared by the page and the stream. */
async function filterParams(ctx: ServerContext, q: URLSearchParams): Promise<EventFilter> {
  const typeText = q.get('type') || null;
  const type = typeText === null ? null : await typeFilter(ctx, typeText);
  const siteId = intParam(q, 'site_id', { min: 0, max: Number.MAX_SAFE_INTEGER, expected: 'a site id (a whole number)' });
  return { type, siteId, since: null };
}

/**
 * The CloudEvents type a `type` parameter names (resolveEventType, as `hostwatch events
 * --type`); a 400 with the near miss when it names no event, so a typo is not an empty feed.
 */
async function typeFilter(ctx: ServerContext, text: string): Promise<string> {
  // A type the log holds though no rule raises it any more is taken too: the dashboard offers
  // the types of the events it shows.
  const r = await resolveTypeFilter(text, ctx.eventNames, (type) => ctx.events.holdsType(type));
  if (r.ok) return r.type;
  throw badRequest(r.problem === 'shape' ? `type: ${r.message} (got ${shown(text)})${r.near ? `; did you mean ${r.near}?` : ''}` : `type: ${r.message}`);
}

/**
 * Refuse a cursor past the newest event (410 `cursor_beyond_log`). The log is never pruned,
 * so such a cursor came from another log: the database was replaced or an older backup
 * restored, and seq started again below it. Taken, it would skip every event up to it.
 */
async function refuseBeyondLog(ctx: ServerContext, name: string, cursor: number): Promise<void> {
  if (cursor === 0) return;
  const end = await ctx.events.lastSeq();
  if (cursor <= end) return;
  throw new HttpError(
    410,
    'cursor_beyond_log',
    `${name}: cursor ${cursor} is past the end of this event log, which holds events up to cursor ${end}; the log was likely reset (a new database, or an older backup restored). Start again from cursor 0 to read the whole log (deduplicate on the event id), or from cursor ${end} to read only the events that come next`,
  );
}

function cursorParam(name: string, text: string | null): number {
  if (text === null || text === '') return 0;
  return wholeNumber(name, text, { min: 0, max: Number.MAX_SAFE_INTEGER, expected: 'a cursor returned by this feed' });
}

