import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/paths.js';
import { afterEach, describe, expect, it } from 'vitest';
import { healthRoutes, READY_DATABASE_TIMEOUT_MS } from '../src/server/routes/health.js';
import { connect } from 'node:net';
import { json, readJson, type Route } from '../src/server/http.js';
import { isLoopback, parseListen, REQUEST_TIMEOUT_MS, startServer } from '../src/server/server.js';
import { sqliteOf, startWorld, type World } from './harness.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('the health endpoints', () => {
  it('answer /livez, and /readyz turns 503 when the database is unavailable', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0' } } });
    const app = await world.app();
    await app.start();
    const live = await fetch(`${app.serverUrl}/livez`);
    expect(live.status).toBe(200);
    const ready = await fetch(`${app.serverUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', database: true, scheduler: true, polling: true });
    sqliteOf(app.store).close();
    const notReady = await fetch(`${app.serverUrl}/readyz`);
    expect(notReady.status).toBe(503);
    expect(await notReady.json()).toMatchObject({ status: 'not ready', database: false });
    expect((await fetch(`${app.serverUrl}/livez`)).status).toBe(200);
    // The outbox worker's next pass meets the closed database: a log line, not a crash.
    await new Promise((r) => setTimeout(r, 1_300));
    expect(world.logs.text).toContain('outbox worker pass failed');
  });

  it('report not ready once the scheduler has stopped', async () => {
    let stopped = false;
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: healthRoutes({ databaseReady: async () => true, schedulerRunning: () => !stopped }) });
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(200);
    stopped = true;
    expect((await fetch(`${srv.url}/readyz`)).status).toBe(503);
    await srv.close();
  });

  it('report not ready within seconds when the database does not answer at all (a frozen server), and say so', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: healthRoutes({ databaseReady: () => new Promise<boolean>(() => {}), schedulerRunning: () => true }) });
    const t0 = performance.now();
    const res = await fetch(`${srv.url}/readyz`);
    const waited = performance.now() - t0;
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'not ready', database: false, database_problem: 'the database did not answer within 2 s' });
    expect(waited).toBeGreaterThanOrEqual(READY_DATABASE_TIMEOUT_MS - 50);
    expect(waited).toBeLessThan(4_500);
    await srv.close();
  });
});

describe('the server', () => {
  it('refuses to listen beyond loopback without a token', async () => {
    await expect(startServer({ listen: '0.0.0.0:0', token: null, routes: [] })).rejects.toThrow(
      'server.listen: 0.0.0.0:0 is reachable from other machines; set server.token (a bearer token) or listen on 127.0.0.1',
    );
  });

  it('knows loopback addresses from others', () => {
    expect(['127.0.0.1', '127.3.4.5', '::1', 'localhost'].map(isLoopback)).toEqual([true, true, true, true]);
    expect(['0.0.0.0', '10.0.0.1', '::', 'example.com'].map(isLoopback)).toEqual([false, false, false, false]);
    expect(parseListen('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
  });
});

describe('a request that never finishes arriving', () => {
  /** Open a raw connection, send `head`, drip `drip` one byte at a time, and say what came back and when the server closed. */
  function slowClient(url: string, head: string, drip = ''): Promise<{ reply: string; closedAfterMs: number }> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const started = Date.now();
      const socket = connect(Number(port), hostname, () => socket.write(head));
      let reply = '';
      let i = 0;
      const dripper = setInterval(() => i < drip.length && socket.write(drip[i++]!), 100);
      socket.setEncoding('utf8');
      socket.on('data', (c: string) => (reply += c));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(dripper);
        resolve({ reply, closedAfterMs: Date.now() - started });
      });
      // The test's own bound: without a request timeout Node would hold it for 300 s.
      setTimeout(() => {
        socket.destroy();
        reject(new Error(`the server still held the connection after 5 s; it had answered: ${JSON.stringify(reply)}`));
      }, 5_000).unref();
    });
  }

  const echo: Route = { method: 'POST', path: '/echo', handler: async (req, res) => json(res, 200, await readJson(req.raw)) };
  const held: Route = {
    method: 'GET',
    path: '/held',
    handler: (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
    },
  };

  it('is answered 408 and closed: a body that never comes, a body sent a byte at a time, headers that never end', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: [echo], requestTimeoutMs: 500 });
    try {
      const head = 'POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n';
      const never = await slowClient(srv.url, head + '{');
      expect(never.reply).toMatch(/^HTTP\/1\.1 408 /);
      const drip = await slowClient(srv.url, head, '{"a":"' + 'x'.repeat(200));
      expect(drip.reply).toMatch(/^HTTP\/1\.1 408 /);
      const headers = await slowClient(srv.url, 'POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n', 'X-Slow: ' + 'y'.repeat(200));
      expect(headers.reply).toMatch(/^HTTP\/1\.1 408 /);
      // A whole request in time is answered as usual.
      const ok = await fetch(`${srv.url}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
      expect(await ok.json()).toEqual({ a: 1 });
    } finally {
      await srv.close();
    }
  });

  it('answers a request whose headers are too large, or that is no HTTP, with a JSON error like every other, and closes', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: [echo] });
    try {
      const big = await fetch(`${srv.url}/echo?type=${'a'.repeat(20_000)}`);
      expect(big.status).toBe(431);
      expect(await big.json()).toEqual({ error: { code: 'request_too_large', message: 'the request line and headers are larger than the server takes (16 KB); send a shorter query' } });
      const garbage = await slowClient(srv.url, 'NOT HTTP AT ALL\r\n\r\n');
      expect(garbage.reply).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n[\s\S]*\r\n\r\n\{"error":\{"code":"bad_request","message":"the request is not valid HTTP"\}\}$/);
    } finally {
      await srv.close();
    }
  });

  it('leaves a stream open past the request timeout: only receiving the request is timed', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: [held], requestTimeoutMs: 300 });
    try {
      const { hostname, port } = new URL(srv.url);
      const socket = connect(Number(port), hostname, () => socket.write('GET /held HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
      let closed = false;
      socket.on('close', () => (closed = true));
      await new Promise((r) => setTimeout(r, 1_500));
      expect(closed).toBe(false);
      socket.destroy();
    } finally {
      await srv.close();
    }
  });

  it('is timed out after 10 s by default, headers included', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes: [] });
    try {
      expect([srv.server.requestTimeout, srv.server.headersTimeout]).toEqual([REQUEST_TIMEOUT_MS, REQUEST_TIMEOUT_MS]);
      expect(REQUEST_TIMEOUT_MS).toBe(10_000);
    } finally {
      await srv.close();
    }
  });
});

describe('/metrics', () => {
  it('parses as Prometheus text and counts polls, API requests, events and deliveries without site ids or URLs', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0' }, channels: [{ name: 'out', type: 'console' }] } });
    const app = await world.app({}, { consoleWrite: () => {} });
    await app.start();
    await app.runOnce();
    world.sim.world.setHealth(1, { status: 'offline' });
    await app.runOnce();
    const res = await fetch(`${app.serverUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    const samples = parsePrometheus(text);
    const value = (name: string, labels: Record<string, string> = {}): number =>
      samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
    expect(value('hostwatch_polls_total', { source: 'health' })).toBeGreaterThanOrEqual(6);
    expect(value('hostwatch_polls_total', { source: 'health', outcome: 'baseline' })).toBeGreaterThanOrEqual(3);
    expect(value('hostwatch_api_requests_total', { status: '200', error: 'none' })).toBeGreaterThan(10);
    expect(value('hostwatch_events_total', { type: 'hostwatch.site.offline' })).toBe(1);
    expect(value('hostwatch_delivery_attempts_total', { channel: 'out', outcome: 'delivered' })).toBe(1);
    expect(value('hostwatch_outbox_depth')).toBe(0);
    expect(value('hostwatch_poll_duration_seconds_count', { source: 'health' })).toBeGreaterThanOrEqual(6);
    // The staleness signal every poller needs, per source, in seconds since the epoch.
    const lastHealth = value('hostwatch_source_last_success_timestamp_seconds', { source: 'health' });
    expect(Math.abs(lastHealth - Date.now() / 1000)).toBeLessThan(60);
    expect(value('hostwatch_build_info', { version: JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')).version, node_version: process.version })).toBe(1);
    // Prometheus conventions: standard process metrics, unprefixed; no gauge named like a
    // counter; `status` is always an HTTP status (or "none" without a reply).
    expect(samples.some((s) => s.name === 'process_resident_memory_bytes')).toBe(true);
    expect(samples.some((s) => s.name === 'process_start_time_seconds')).toBe(true);
    expect(samples.filter((s) => s.name.startsWith('hostwatch_process_') || s.name.startsWith('hostwatch_nodejs_'))).toEqual([]);
    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    expect([...types].filter(([name, type]) => type === 'gauge' && name.endsWith('_total'))).toEqual([]);
    expect([...types].filter(([name, type]) => type === 'counter' && !name.endsWith('_total'))).toEqual([]);
    expect([...new Set(samples.filter((s) => 'status' in s.labels).map((s) => s.labels['status']))].filter((v) => !/^(\d{3}|none)$/.test(v!))).toEqual([]);
    // Bounded labels only: no site id, no URL, no domain.
    for (const s of samples) {
      for (const v of Object.values(s.labels)) expect(v).not.toMatch(/sites\/|https?:|example\.(com|net)/);
    }
  });

  it('shows the counters the documented alerts watch at 0 from the start, so the first dead letter is an increase', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0' }, channels: [{ name: 'out', type: 'console' }] } });
    const app = await world.app({}, { consoleWrite: () => {} });
    await app.start();
    const samples = parsePrometheus(await (await fetch(`${app.serverUrl}/metrics`)).text());
    const at = (name: string, labels: Record<string, string>): number[] =>
      samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => s.value);
    // Nothing was polled or sent yet: each series is there, at 0 (docs/operations.md's alert rules).
    for (const outcome of ['delivered', 'retry', 'dead']) expect(at('hostwatch_delivery_attempts_total', { channel: 'out', outcome })).toEqual([0]);
    expect(at('hostwatch_poll_errors_total', { source: 'health', code: 'scope_missing' })).toEqual([0]);
    for (const type of ['hostwatch.source.degraded', 'hostwatch.api.unauthorized', 'hostwatch.api.unreachable', 'hostwatch.site.offline']) {
      expect(at('hostwatch_events_total', { type })).toEqual([0]);
    }
  });
});

describe('a server with a token', () => {
  it('answers 401 to a wrong or missing token, and 200 to the right one; health checks stay open', async () => {
    world = await startWorld({ config: { server: { listen: '127.0.0.1:0', token: 'the-right-token-123' } } });
    const app = await world.app();
    await app.start();
    expect((await fetch(`${app.serverUrl}/metrics`)).status).toBe(401);
    expect((await fetch(`${app.serverUrl}/metrics`, { headers: { authorization: 'Bearer wrong-token' } })).status).toBe(401);
    const ok = await fetch(`${app.serverUrl}/metrics`, { headers: { authorization: 'Bearer the-right-token-123' } });
    expect(ok.status).toBe(200);
    expect((await fetch(`${app.serverUrl}/livez`)).status).toBe(200);
    const body = (await (await fetch(`${app.serverUrl}/metrics?access_token=nope`)).json()) as { error: { code: string } };
    expect(body.error.code).toBe('unauthorized');
  });

  it('may listen beyond loopback', async () => {
    world = await startWorld({ config: { server: { listen: '0.0.0.0:0', token: 'the-right-token-123' } } });
    const app = await world.app();
    await app.start();
    expect(app.serverUrl).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
  });
});

describe('the HTTP details of refusals', () => {
  const ok: Route['handler'] = (_req, res) => json(res, 200, { ok: true });
  const routes: Route[] = [
    { method: 'GET', path: '/things', handler: ok },
    { method: 'POST', path: '/things', handler: ok },
    { method: 'POST', path: '/things/expire', handler: ok },
  ];

  it('answers 405 with an Allow header naming the methods the path takes', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: null, routes });
    try {
      for (const [method, path, allow] of [['DELETE', '/things', 'GET, HEAD, POST'], ['GET', '/things/expire', 'POST'], ['PUT', '/things/expire', 'POST']] as const) {
        const res = await fetch(`${srv.url}${path}`, { method });
        expect({ method, path, status: res.status, allow: res.headers.get('allow') }).toEqual({ method, path, status: 405, allow });
      }
    } finally {
      await srv.close();
    }
  });

  it('answers 401 with WWW-Authenticate: Bearer, saying invalid_token when a token was sent and is wrong', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: 'the-right-token-123', routes });
    try {
      const missing = await fetch(`${srv.url}/things`);
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="hostwatch"');
      const wrong = await fetch(`${srv.url}/things`, { headers: { authorization: 'Bearer wrong-token' } });
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="hostwatch", error="invalid_token"');
      // Another scheme is no bearer token at all: no error code (RFC 6750 §3.1).
      const basic = await fetch(`${srv.url}/things`, { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
      expect(basic.status).toBe(401);
      expect(basic.headers.get('www-authenticate')).toBe('Bearer realm="hostwatch"');
    } finally {
      await srv.close();
    }
  });

  it('says, when a token came in the URL, that only the stream takes it there, and that it must be percent-encoded', async () => {
    const stream: Route = { method: 'GET', path: '/api/events/stream', queryToken: true, handler: ok };
    const srv = await startServer({ listen: '127.0.0.1:0', token: 'a+b/c=', routes: [...routes, stream] });
    try {
      const message = async (path: string): Promise<string> => ((await (await fetch(`${srv.url}${path}`)).json()) as { error: { message: string } }).error.message;
      expect(await message('/things?access_token=a%2Bb%2Fc%3D')).toBe(
        'a valid bearer token is required (Authorization: Bearer <server.token>); access_token in the URL is taken by the event stream only (GET /api/events/stream)',
      );
      // Not encoded, the + arrives as a space.
      expect(await message('/api/events/stream?access_token=a+b/c=')).toBe(
        'a valid bearer token is required (Authorization: Bearer <server.token>) or ?access_token=<server.token>, percent-encoded (encodeURIComponent): a + in a token arrives as a space otherwise',
      );
      expect((await fetch(`${srv.url}/api/events/stream?access_token=a%2Bb%2Fc%3D`)).status).toBe(200);
      // No token in the URL: the plain message, which quotes no token.
      expect(await message('/things')).toBe('a valid bearer token is required (Authorization: Bearer <server.token>)');
    } finally {
      await srv.close();
    }
  });

  it('takes the Bearer scheme in any case, as RFC 9110 says an auth scheme is (bearer, BEARER), and nothing but Bearer', async () => {
    const srv = await startServer({ listen: '127.0.0.1:0', token: 'the-right-token-123', routes });
    try {
      const status = async (authorization: string): Promise<number> => (await fetch(`${srv.url}/things`, { headers: { authorization } })).status;
      for (const a of ['Bearer the-right-token-123', 'bearer the-right-token-123', 'BEARER the-right-token-123', 'bEaReR  the-right-token-123']) expect(await status(a), a).toBe(200);
      for (const a of ['Basic the-right-token-123', 'Bearerthe-right-token-123', 'the-right-token-123', 'Bearer the-right-token-12']) expect(await status(a), a).toBe(401);
    } finally {
      await srv.close();
    }
  });
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A strict reader of the Prometheus text format: every line must be a comment or a sample. */
function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
    // NaN in any case, as Prometheus reads it (prom-client writes `Nan` for a gauge with no sample yet, right after start).
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.e+-]+|[Nn][Aa][Nn]|\+Inf|-Inf)$/.exec(line);
    if (!m) throw new Error(`not Prometheus text: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}
