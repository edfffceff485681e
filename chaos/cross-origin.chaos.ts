/**
 * Cross-origin requests: a real headless Chromium visits hostile pages while a daemon runs
 * on loopback without a token (the default). The pages try every way a browser offers to
 * change the daemon (CSRF: a text/plain fetch, form posts, a JSON fetch) or to read it
 * (DNS rebinding: a name of the attacker's re-pointed at 127.0.0.1). None may succeed; the
 * daemon's own dashboard, same-origin, still works.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { launchBrowser } from '../test/browser.js';
import { rows, startWorld, type World } from '../test/harness.js';
import { record } from './figures.js';

let browser: Browser;
let world: World | undefined;
let hostile: Server | undefined;
beforeAll(async () => {
  browser = await launchBrowser(['--host-resolver-rules=MAP evil.example 127.0.0.1']);
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await world?.close();
  await new Promise<void>((r) => (hostile ? hostile.close(() => r()) : r()));
  world = hostile = undefined;
});

const SILENCE = JSON.stringify({ match: 'true', duration: '87600h', comment: 'x' });

it('lets no web page create or expire a silence or read the event log, by CSRF or DNS rebinding', async () => {
  world = await startWorld({ sim: { sites: 2 }, config: { server: { listen: '127.0.0.1:0' } } });
  const w = world;
  const app = await w.app();
  await app.start();
  await app.runOnce();
  const target = app.serverUrl!;
  const port = Number(new URL(target).port);
  // One silence the attacker will try to expire.
  const mine = await fetch(`${target}/api/silences`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ match: 'site_id == 2', duration: '1h', comment: 'mine' }) });
  const mineId = ((await mine.json()) as { id: string }).id;

  hostile = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>cute cats</title>');
  });
  await new Promise<void>((r) => hostile!.listen(0, '127.0.0.1', () => r()));
  const attacker = `http://localhost:${(hostile.address() as AddressInfo).port}/`;
  const page = await browser.newPage();
  /** Each attempt says whether the page could read the daemon's answer (1) or not (0). */
  const outcomes: Array<{ what: string; read: number }> = [];
  const attempt = async (what: string, fn: () => Promise<number | null>): Promise<void> => {
    outcomes.push({ what, read: (await fn()) ?? 0 });
  };

  // CSRF from another origin: simple requests need no preflight (their answers are opaque).
  await page.goto(attacker);
  for (const [path, type, body] of [
    ['/api/silences', 'text/plain', SILENCE],
    ['/api/silences', 'application/x-www-form-urlencoded', SILENCE],
    ['/api/silences', 'multipart/form-data; boundary=x', SILENCE],
    [`/api/silences/${mineId}/expire`, 'text/plain', '{}'],
  ] as const) {
    await attempt(`no-cors POST ${path} as ${type}`, () =>
      page.evaluate(([url, t, b]) => fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'content-type': t }, body: b }).then(() => 0, () => 0), [`${target}${path}`, type, body] as const),
    );
  }
  // A JSON fetch: the browser asks first (preflight) and must get no yes.
  await attempt('cross-origin JSON POST', () =>
    page.evaluate(([url, b]) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b }).then(() => 1, () => 0), [`${target}/api/silences`, SILENCE] as const),
  );
  // Form posts (navigations).
  for (const action of ['/api/silences', `/api/silences/${mineId}/expire`]) {
    await attempt(`form post ${action}`, async () => {
      await formPost(page, `${target}${action}`);
      await page.goto(attacker);
      return 0;
    });
  }
  // Reading the log cross-origin: without CORS headers nothing is readable.
  await attempt('cross-origin GET /api/events', () => page.evaluate((url) => fetch(url).then((r) => r.json()).then(() => 1, () => 0), `${target}/api/events`));

  // DNS rebinding: the attacker's name now points at the daemon; to the browser it is same-origin.
  await page.goto(`http://evil.example:${port}/livez`);
  for (const path of ['/api/events', '/api/alerts', '/api/sources', '/api/deliveries', '/metrics', '/api/silences', '/']) {
    await attempt(`rebound GET ${path}`, () => page.evaluate((p) => fetch(p).then((r) => (r.ok ? 1 : 0), () => 0), path));
  }
  await attempt('rebound EventSource /api/events/stream', () =>
    page.evaluate(
      () =>
        new Promise<number>((resolve) => {
          const es = new EventSource('/api/events/stream');
          es.onopen = () => (es.close(), resolve(1));
          es.onerror = () => (es.close(), resolve(0));
          setTimeout(() => (es.close(), resolve(0)), 3_000);
        }),
    ),
  );
  for (const [path, b] of [['/api/silences', SILENCE], [`/api/silences/${mineId}/expire`, '{}']] as const) {
    await attempt(`rebound JSON POST ${path}`, () =>
      page.evaluate(([p, body]) => fetch(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => (r.ok ? 1 : 0), () => 0), [path, b] as const),
    );
  }
  await page.close();
  const readable = outcomes.filter((o) => o.read > 0).map((o) => o.what);

  const silences = rows<{ id: string; expired_at: number | null }>(w, 'SELECT id, expired_at FROM silences');
  const created = silences.filter((s) => s.id !== mineId).length;
  const expired = silences.filter((s) => s.id === mineId && s.expired_at !== null).length;
  // The same-origin dashboard still writes.
  const dashboard = await browser.newPage();
  await dashboard.goto(`${target}/`);
  const own = await dashboard.evaluate(() => fetch('/api/silences', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ match: 'site_id == 1', duration: '1h', comment: 'own page' }) }).then((r) => r.status));
  await dashboard.close();
  record('cross-origin requests (real Chromium, daemon on loopback without a token)', {
    'attempts from hostile pages': outcomes.length,
    'silences created by them': created,
    'silences expired by them': expired,
    'replies readable by them': readable.length,
    'same-origin dashboard write (HTTP status)': own,
  });
  expect({ created, expired, readable }).toEqual({ created: 0, expired: 0, readable: [] });
  expect(own).toBe(201);
});

/** Submit a form with a text/plain body that reads as JSON: {"match":"true",…,"comment":"x="}. */
async function formPost(page: Page, action: string): Promise<void> {
  await page.setContent(`<form method="post" enctype="text/plain" action="${action}"><input name='{"match":"true","duration":"87600h","comment":"x' value='"}'></form>`);
  await Promise.all([page.waitForEvent('load'), page.evaluate(() => document.forms[0]!.submit())]);
}
