import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, parseRetryAfter, type ApiClientOptions } from '../src/api/client.js';
import { ApiError } from '../src/api/errors.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';

const KEY = 'client-key-123456';
let sim: Simulator;
let client: ApiClient | undefined;

afterEach(async () => {
  await client?.close();
  client = undefined;
  await sim?.close();
});

/** A client on the simulator whose sleeps are recorded (and shortened), so waits are visible. */
function makeClient(over: Partial<ApiClientOptions> = {}): { client: ApiClient; sleeps: number[] } {
  const sleeps: number[] = [];
  client = new ApiClient({
    baseUrl: sim.url,
    key: KEY,
    timeoutMs: 2000,
    maxRequestsPerSecond: 1000,
    maxConcurrency: 4,
    retries: 3,
    maxPages: 50,
    random: () => 0.5,
    sleep: async (ms) => {
      sleeps.push(ms);
      await new Promise((r) => setTimeout(r, Math.min(ms, 5)));
    },
    ...over,
  });
  return { client, sleeps };
}

async function thrown(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('expected an ApiError');
}

describe('the API client', () => {
  it('sends the key as a Bearer token to {base_url}/api/v1 and returns the data envelope', async () => {
    sim = await startSimulator({ sites: 2, keys: { [KEY]: '*' } });
    const { client } = makeClient();
    const health = (await client.get('/sites/1/health')) as { site_id: number };
    expect(health.site_id).toBe(1);
    expect(sim.requests.at(-1)).toMatchObject({ method: 'GET', path: '/api/v1/sites/1/health' });
  });

  it('walks every page of a paged list exactly once', async () => {
    sim = await startSimulator({ sites: 7, keys: { [KEY]: '*' } });
    const { client } = makeClient();
    const sites = (await client.list('/sites', {}, 3)) as Array<{ id: number }>;
    expect(sites.map((s) => s.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(sim.requests.filter((r) => r.path === '/api/v1/sites')).toHaveLength(3);
  });

  it('follows a next_cursor that comes without has_more, and refuses a has_more that is neither true nor false', async () => {
    // A server that leaves has_more out: taken as the last page, sites 4 and 5 looked removed.
    let hasMore: unknown;
    const server = createServer((req, res) => {
      const cursor = new URL(req.url ?? '/', 'http://x').searchParams.get('cursor');
      const page = cursor === null ? { data: [{ id: 1 }, { id: 2 }, { id: 3 }], next_cursor: 'p2', ...(hasMore === undefined ? {} : { has_more: hasMore }) } : { data: [{ id: 4 }, { id: 5 }], next_cursor: null };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(page));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
      const { client } = makeClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retries: 0 });
      expect(((await client.list('/sites', {}, 3)) as Array<{ id: number }>).map((s) => s.id)).toEqual([1, 2, 3, 4, 5]);
      hasMore = false;
      expect(((await client.list('/sites', {}, 3)) as Array<{ id: number }>).map((s) => s.id)).toEqual([1, 2, 3]);
      hasMore = 'yes';
      const err = await thrown(client.list('/sites', {}, 3));
      expect({ code: err.code, message: err.message }).toEqual({ code: 'bad_response', message: '/sites: page 1: has_more is string, not true or false' });
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('stops at the page cap with a page_cap error rather than returning part of a list', async () => {
    sim = await startSimulator({ sites: 7, keys: { [KEY]: '*' } });
    const { client } = makeClient({ maxPages: 2 });
    const err = await thrown(client.list('/sites', {}, 3));
    expect(err.code).toBe('page_cap');
    expect(err.message).toBe('/sites: more than 2 pages; raise api.max_pages to read the whole list');
  });

  it('fails the whole list when a middle page fails, after its retries', async () => {
    sim = await startSimulator({ sites: 7, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites$', kind: 'status', status: 503, page: 2 });
    const { client, sleeps } = makeClient({ retries: 2 });
    const err = await thrown(client.list('/sites', {}, 3));
    expect(err.code).toBe('unavailable');
    expect(err.statusCode).toBe(503);
    expect(sleeps).toHaveLength(2);
  });

  it('retries a 5xx with jittered exponential backoff, then succeeds', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'status', status: 500, times: 2 });
    const { client, sleeps } = makeClient();
    await client.get('/sites/1/health');
    // random() = 0.5: half of 250 ms, then half of 500 ms.
    expect(sleeps).toEqual([125, 250]);
  });

  it('honours Retry-After on a 429', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/usage$', kind: 'rate_limit', retry_after: 7, times: 1 });
    const { client, sleeps } = makeClient();
    await client.get('/sites/1/usage');
    // The whole client paused for 7 s from the 429's arrival (a millisecond may pass before the wait).
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]).toBeGreaterThan(6_900);
    expect(sleeps[0]).toBeLessThanOrEqual(7_000);
  });

  it('gives up at once when Retry-After is longer than a poll may wait', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/usage$', kind: 'rate_limit', retry_after: 3600 });
    const { client, sleeps } = makeClient();
    const err = await thrown(client.get('/sites/1/usage'));
    expect(err.code).toBe('rate_limited');
    expect(err.retryAfterMs).toBe(3_600_000);
    expect(sleeps).toEqual([]);
  });

  it('maps a missing scope to scope_missing with the required scope, without retrying', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: ['sites:read'] } });
    const { client, sleeps } = makeClient();
    const err = await thrown(client.get('/sites/1/backups'));
    expect(err.code).toBe('scope_missing');
    expect(err.statusCode).toBe(403);
    expect(err.requiredScope).toBe('backups:read');
    expect(err.retryable).toBe(false);
    expect(sleeps).toEqual([]);
  });

  it('maps an unknown site to not_found and a bad key to unauthorized', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    const { client } = makeClient();
    expect((await thrown(client.get('/sites/99/health'))).code).toBe('not_found');
    const other = new ApiClient({ ...optsOf(), key: 'wrong-key-000' });
    expect((await thrown(other.get('/sites/1/health'))).code).toBe('unauthorized');
    await other.close();
  });

  it('reports a timeout as code timeout, and never puts the key in an error message', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'latency', ms: 1000 });
    const { client } = makeClient({ timeoutMs: 200, retries: 0 });
    const err = await thrown(client.get('/sites/1/health'));
    expect(err.code).toBe('timeout');
    expect(err.retryable).toBe(true);
    expect(`${err.message} ${JSON.stringify(err)}`).not.toContain(KEY);
  });

  it('does not retry a timeout within the poll: a slow entity holds its worker for one timeout, not one per retry', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'latency', ms: 1000 });
    const { client, sleeps } = makeClient({ timeoutMs: 200, retries: 3 });
    const err = await thrown(client.get('/sites/1/health'));
    expect(err.code).toBe('timeout');
    expect(sim.requests.filter((r) => r.path === '/api/v1/sites/1/health')).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('drops a reply larger than max_reply_bytes as too_large, whether or not it says its length', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'oversize', bytes: 300_000 });
    sim.faults.add({ path: '^/sites/1/usage$', kind: 'oversize', bytes: 300_000, chunked: true });
    const { client } = makeClient({ maxReplyBytes: 100_000 });
    const declared = await thrown(client.get('/sites/1/health'));
    expect(declared.code).toBe('too_large');
    expect(declared.retryable).toBe(false);
    expect(declared.message).toBe('/sites/1/health: the reply is larger than api.max_reply_bytes (97.7 KB): Content-Length 293 KB');
    const read = await thrown(client.get('/sites/1/usage'));
    expect(read.code).toBe('too_large');
    expect(read.message).toBe('/sites/1/usage: the reply is larger than api.max_reply_bytes (97.7 KB): more than 97.7 KB read, the rest not');
    // Under the cap, the same client reads normally.
    expect(((await client.get('/sites/1/nameservers')) as Record<string, unknown>)['pointed']).toBeDefined();
  });

  it('ends a reply whose body stalls after its headers at the deadline, as a timeout, and one the server cuts off as a network error', async () => {
    const server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"data": {"a"');
      if (req.url?.startsWith('/api/v1/cut')) setTimeout(() => res.socket?.destroy(), 50);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const stalled = new ApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, key: KEY, timeoutMs: 300, maxRequestsPerSecond: 1000, maxConcurrency: 2, retries: 0, maxPages: 5 });
    try {
      const started = performance.now();
      const slow = await thrown(stalled.get('/stall'));
      expect(slow.code).toBe('timeout');
      // Ended by the deadline (300 ms), not left waiting for the rest of the body.
      expect(performance.now() - started).toBeLessThan(5_000);
      const cut = await thrown(stalled.get('/cut'));
      expect(cut.code).toBe('network');
      expect(`${slow.message} ${cut.message}`).not.toContain(KEY);
    } finally {
      await stalled.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('reads JSON after a byte order mark, and says what a reply that is no JSON was: empty, a web page, a redirect, a connection cut short; an error\'s own words come on one line', async () => {
    const server = createServer((req, res) => {
      const path = req.url!.split('?')[0]!;
      if (path === '/api/v1/bom') res.writeHead(200, { 'content-type': 'application/json' }).end(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"data":{"ok":true}}')]));
      else if (path === '/api/v1/empty') res.writeHead(200).end();
      else if (path === '/api/v1/page') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Sign in</title>');
      else if (path === '/api/v1/refused') res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'no\nway', message: 'line 1\r\n2026-11-28 INFO all is well\u001b[2J' } }));
      else if (path === '/api/v1/moved') res.writeHead(302, { location: `https://panel.example.net/login?next=/api&key=${KEY}` }).end();
      else {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"data": {"a"');
        setTimeout(() => res.socket?.destroy(), 50);
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    const { client } = makeClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retries: 0 });
    try {
      expect(await client.get('/bom')).toEqual({ ok: true });
      const messages = await Promise.all(['/empty', '/page', '/moved', '/cut', '/refused'].map(async (p) => (await thrown(client.get(p))).message));
      expect(messages).toEqual([
        '/empty: an empty 200 reply where JSON was expected',
        "/page: an HTML or XML page in a 200 reply where JSON was expected (37 bytes, content-type text/html): is api.base_url the API's address?",
        // Not the query, which could carry anything (here the key).
        "/moved: HTTP 302: a redirect to https://panel.example.net/login, not followed: is api.base_url the API's address?",
        '/cut: network error: the connection closed before the whole reply arrived (UND_ERR_SOCKET)',
        // The server's own words, on one line.
        '/refused: no way: line 1 2026-11-28 INFO all is well [2J',
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('reports truncated JSON as bad_response naming the endpoint', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'truncated' });
    const { client } = makeClient({ retries: 0 });
    const err = await thrown(client.get('/sites/1/health'));
    expect(err.code).toBe('bad_response');
    expect(err.message).toMatch(/^\/sites\/1\/health: malformed JSON in a 200 reply/);
  });

  it('keeps to max_requests_per_second', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    const { client, sleeps } = makeClient({ maxRequestsPerSecond: 10, sleep: undefined });
    const started = Date.now();
    await Promise.all(Array.from({ length: 6 }, () => client.get('/sites/1/health')));
    // Six requests at 10/s: the last one starts 500 ms after the first.
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(sleeps).toEqual([]);
  });

  it('keeps to max_concurrency', async () => {
    sim = await startSimulator({ sites: 1, keys: { [KEY]: '*' } });
    sim.faults.add({ path: '^/sites/1/health$', kind: 'latency', ms: 150 });
    const { client } = makeClient({ maxConcurrency: 2 });
    const started = Date.now();
    await Promise.all(Array.from({ length: 6 }, () => client.get('/sites/1/health')));
    // Six 150 ms requests two at a time: three rounds.
    expect(Date.now() - started).toBeGreaterThanOrEqual(440);
  });
});

describe('Retry-After', () => {
  it('is read as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-11-21T14:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30_000);
    expect(parseRetryAfter('Sat, 21 Nov 2026 14:00:10 GMT', now)).toBe(10_000);
    expect(parseRetryAfter(undefined, now)).toBe(null);
    expect(parseRetryAfter('soon', now)).toBe(null);
    // The three HTTP date forms (RFC 9110 §5.6.7) each start with the day's name.
    expect(parseRetryAfter('Saturday, 21-Nov-26 14:00:20 GMT', now)).toBe(20_000);
    expect(parseRetryAfter('Sat Nov 21 14:00:30 2026', now)).toBe(30_000);
  });

  it('is unreadable (so the request backs off as without one) when it is neither: a fraction or a negative number is no date in 2001', () => {
    const now = Date.parse('2026-11-21T14:00:00Z');
    for (const v of ['1.5', '-30', '0x10', '1e3', '+5']) expect(parseRetryAfter(v, now), v).toBe(null);
  });
});

function optsOf(): ApiClientOptions {
  return { baseUrl: sim.url, key: KEY, timeoutMs: 2000, maxRequestsPerSecond: 1000, maxConcurrency: 4, retries: 0, maxPages: 50 };
}

describe('replies are scrubbed of the configured secrets', () => {
  it('finds a secret however the JSON spells it (plain, \\/ or \\u escapes, in a key), and returns a clean reply as the same object', async () => {
    const { replyScrubber } = await import('../src/api/scrub.js');
    const slack = 'https://hooks.slack.com/services/T0/B0/abcdef';
    const scrub = replyScrubber(['key-0123456789', slack]);
    const parse = (text: string): unknown => scrub(text, JSON.parse(text));
    expect(parse('{"by":"key-0123456789"}')).toEqual({ by: '[REDACTED]' });
    expect(parse(JSON.stringify({ hook: slack }).replaceAll('/', '\\/'))).toEqual({ hook: '[REDACTED]' });
    expect(parse('{"by":"\\u006bey-0123456789 here"}')).toEqual({ by: '[REDACTED] here' });
    expect(parse('{"key-0123456789":[1,{"x":"y"}]}')).toEqual({ '[REDACTED]': [1, { x: 'y' }] });
    // Echoed encoded, as HTTP Basic credentials carry it (base64) or in a URL (percent-encoded).
    const basic = (parse(JSON.stringify({ auth: `Basic ${Buffer.from('panel:key-0123456789').toString('base64')}` })) as { auth: string }).auth;
    expect(basic).toMatch(/^Basic cGFuZWw6.{0,2}\[REDACTED\].{0,4}$/);
    expect(parse(JSON.stringify({ next: `/x?h=${encodeURIComponent(slack)}` }))).toEqual({ next: '/x?h=[REDACTED]' });
    // A "__proto__" key stays data while the reply is rebuilt.
    const proto = parse('{"__proto__":{"polluted":true},"k":"key-0123456789"}') as Record<string, unknown>;
    expect(Object.keys(proto)).toEqual(['__proto__', 'k']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    // Nothing to scrub: the parsed value itself, not a copy.
    const clean = JSON.parse('{"a":"b\\/c"}') as unknown;
    expect(scrub('{"a":"b\\/c"}', clean)).toBe(clean);
  });
});
