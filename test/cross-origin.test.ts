/**
 * A web page the operator happens to visit must not be able to change the daemon (CSRF)
 * nor read it through a re-pointed DNS name (DNS rebinding): writes need JSON and the
 * server's own origin, the server answers only to its own names, a token travels in the
 * query only to the SSE stream, and a silence cannot outlast silences.max_duration.
 * Driven by a real headless Chromium where a browser's behaviour is the point.
 */
import { request } from 'node:http';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from './browser.js';
import { rows, startWorld, type World } from './harness.js';

let world: World | undefined;
let hostile: Server | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
  await new Promise<void>((r) => (hostile ? hostile.close(() => r()) : r()));
  hostile = undefined;
});

// "evil.example" resolves to this machine inside the browser only, as a rebinding attacker
// makes it resolve: the page's origin is evil.example, its requests reach the daemon.
let browser: Browser;
beforeAll(async () => {
  browser = await launchBrowser(['--host-resolver-rules=MAP evil.example 127.0.0.1']);
});
afterAll(async () => {
  await browser?.close();
});

const silences = (w: World): unknown[] => rows(w, 'SELECT id FROM silences');

/** A daemon with its HTTP server on loopback, after one cycle. */
async function daemon(server: Record<string, unknown> = {}): Promise<{ w: World; url: string; port: number }> {
  world = await startWorld({ sim: { sites: 1 }, config: { server: { listen: '127.0.0.1:0', ...server } } });
  const app = await world.app();
  await app.start();
  await app.runOnce();
  const url = app.serverUrl!;
  return { w: world, url, port: Number(new URL(url).port) };
}

/** A raw request with exactly the headers given (fetch would not let a test set Host). */
function raw(url: string, o: { method?: string; path: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${o.path}`, { method: o.method ?? 'GET', headers: o.headers ?? {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

const TEN_YEARS = JSON.stringify({ match: 'true', duration: '87600h', comment: 'nothing to see' });
const A_DAY = JSON.stringify({ match: 'true', duration: '24h', comment: 'nothing to see' });

describe('a page on another site', () => {
  it('cannot create a silence with a text/plain fetch or a form post from a real browser (simple requests, no preflight)', async () => {
    const { w, url } = await daemon();
    // The attacker's page, on another origin of this machine (another port).
    hostile = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>cute cats</title>');
    });
    await new Promise<void>((r) => hostile!.listen(0, '127.0.0.1', () => r()));
    const page = await browser.newPage();
    await page.goto(`http://localhost:${(hostile.address() as AddressInfo).port}/`);
    const sent = await page.evaluate(
      async ([target, body]) => {
        // A "simple" request: the browser sends it without asking the server first.
        await fetch(`${target}/api/silences`, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body });
        return true;
      },
      [url, TEN_YEARS] as const,
    );
    expect(sent).toBe(true);
    // And a form post, the oldest CSRF there is: its text/plain body reads {"match":"true",…,"comment":"x="}.
    await page.setContent(
      `<form method="post" enctype="text/plain" action="${url}/api/silences"><input name='{"match":"true","duration":"24h","comment":"x' value='"}'></form>`,
    );
    await Promise.all([page.waitForEvent('load'), page.evaluate(() => document.forms[0]!.submit())]);
    await page.close();
    expect(silences(w)).toEqual([]);
  });

  it('gets 415 for a write that is not JSON and 403 for one whose Origin or Sec-Fetch-Site names another site; curl and the dashboard still write', async () => {
    const { w, url, port } = await daemon();
    const post = (headers: Record<string, string>, body = A_DAY): Promise<{ status: number; body: any }> => raw(url, { method: 'POST', path: '/api/silences', headers, body });
    const plain = await post({ 'content-type': 'text/plain' });
    expect(plain).toEqual({ status: 415, body: { error: { code: 'unsupported_media_type', message: 'POST needs Content-Type: application/json (got "text/plain")' } } });
    expect((await post({})).body.error.message).toBe('POST needs Content-Type: application/json (got none)');
    expect((await post({ 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(415);
    const json = { 'content-type': 'application/json' };
    const foreign = await post({ ...json, origin: 'http://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.body.error).toEqual({
      code: 'cross_origin',
      message: 'a write from another site is refused (Origin: http://evil.example); use the dashboard served by this daemon, or a client that sends no Origin (curl, scripts)',
    });
    // Same host, another port: another origin (a local dev server, say).
    expect((await post({ ...json, origin: `http://127.0.0.1:${port + 1}` })).status).toBe(403);
    expect((await post({ ...json, origin: 'null' })).status).toBe(403);
    expect((await post({ ...json, 'sec-fetch-site': 'cross-site' })).body.error.code).toBe('cross_origin');
    expect(silences(w)).toEqual([]);
    // The dashboard (same origin) and a script (no Origin) write as before.
    expect((await post({ ...json, origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-origin' })).status).toBe(201);
    expect((await post(json)).status).toBe(201);
    expect((await post({ ...json, 'content-type': 'Application/JSON; charset=utf-8' })).status).toBe(201);
    expect(silences(w)).toHaveLength(3);
  });
});

describe('DNS rebinding', () => {
  it('refuses a page whose name was re-pointed at the daemon, in a real browser, while health checks answer any name', async () => {
    const { w, port } = await daemon();
    const page = await browser.newPage();
    // /readyz answers whatever name it is reached by (a probe's), so the page loads.
    const probe = await page.goto(`http://evil.example:${port}/readyz`);
    expect(probe?.status()).toBe(200);
    // To the browser these are same-origin requests: no CORS stands in the way.
    const seen = await page.evaluate(async (body) => {
      const events = await fetch('/api/events');
      const created = await fetch('/api/silences', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { events: events.status, eventsBody: await events.json(), created: created.status };
    }, A_DAY);
    await page.close();
    expect(seen.events).toBe(403);
    expect(seen.eventsBody.error.code).toBe('host_not_allowed');
    expect(seen.eventsBody.error.message).toBe(
      `this server does not answer to the name "evil.example:${port}" (a guard against DNS rebinding); if hostwatch is reached by that name, add it to server.allowed_hosts`,
    );
    expect(seen.created).toBe(403);
    expect(silences(w)).toEqual([]);
  });

  it('answers localhost, IP literals and the names in server.allowed_hosts (a leading dot for a whole domain), and refuses others', async () => {
    const { url, port } = await daemon({ allowed_hosts: ['hostwatch.example.net', '.ops.example.org'] });
    const status = async (host: string, path = '/api/events'): Promise<number> => (await raw(url, { path, headers: { host } })).status;
    expect(await status(`127.0.0.1:${port}`)).toBe(200);
    expect(await status(`localhost:${port}`)).toBe(200);
    expect(await status(`LOCALHOST`)).toBe(200);
    expect(await status(`[::1]:${port}`)).toBe(200);
    expect(await status(`hostwatch.example.net`)).toBe(200);
    expect(await status(`HostWatch.Example.Net.:443`)).toBe(200);
    expect(await status(`a.ops.example.org`)).toBe(200);
    expect(await status(`ops.example.org`)).toBe(200);
    expect(await status(`evil.example:${port}`)).toBe(403);
    expect(await status(`hostwatch.example.net.evil.example`)).toBe(403);
    expect(await status(`xops.example.org`)).toBe(403);
    expect(await status(`/etc/passwd`)).toBe(403);
    // The dashboard page is refused too; the health checks are not.
    expect(await status(`evil.example`, '/')).toBe(403);
    expect(await status(`evil.example`, '/livez')).toBe(200);
    expect(await status(`evil.example`, '/readyz')).toBe(200);
  });
});

describe('?access_token=', () => {
  it('is taken only by the SSE stream, a GET; everywhere else a token in the URL is refused', async () => {
    const token = 'the-right-token-123';
    const { w, url } = await daemon({ token });
    expect((await raw(url, { path: `/api/events?access_token=${token}` })).status).toBe(401);
    expect((await raw(url, { path: `/metrics?access_token=${token}` })).status).toBe(401);
    const post = await raw(url, { method: 'POST', path: `/api/silences?access_token=${token}`, headers: { 'content-type': 'application/json' }, body: A_DAY });
    expect(post.status).toBe(401);
    expect(silences(w)).toEqual([]);
    // The stream takes it (EventSource cannot send headers).
    const stream = await new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
      const req = request(`${url}/api/events/stream?access_token=${token}`, (res) => {
        resolve({ status: res.statusCode!, type: res.headers['content-type'] });
        req.destroy();
      });
      req.on('error', reject);
      req.end();
    });
    expect(stream).toEqual({ status: 200, type: 'text/event-stream' });
    expect((await raw(url, { path: '/api/events', headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });
});
