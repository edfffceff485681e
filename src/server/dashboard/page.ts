import { createHash } from 'node:crypto';
import { DASHBOARD_JS } from './client.js';
import { DASHBOARD_CSS } from './style.js';

/**
 * The dashboard page: a static shell (no data in it) with its style and script inline.
 * Data arrives only through the JSON API and the SSE stream, read by the script.
 */
const BODY = `
<header>
  <h1>hostwatch</h1>
  <span id="instance" class="muted"></span>
  <span class="spacer"></span>
  <span id="status" class="status connecting">connecting…</span>
</header>
<div id="auth" class="banner" hidden>This server needs a token. Open the page as <code>/#token=&lt;server.token&gt;</code> (the part after # never leaves the browser).</div>
<main>
  <section id="sources-card" class="card">
    <h2>Sources <span id="sources-count" class="count"></span></h2>
    <p class="err" hidden></p>
    <p id="sources-summary" class="sources-summary">Loading…</p>
    <ul id="sources-problems" class="problems"></ul>
    <details id="sources-details">
      <summary>All sources</summary>
      <table id="sources">
        <thead><tr><th>source</th><th>interval</th><th>last success</th><th>next run</th><th title="failed cycles in a row / failing entities">failures</th><th>last error</th></tr></thead>
        <tbody><tr class="empty"><td colspan="6">Loading…</td></tr></tbody>
      </table>
    </details>
  </section>
  <section id="alerts-card" class="card">
    <h2>Firing now <span id="alerts-count" class="count bad"></span></h2>
    <p class="err" hidden></p>
    <table id="alerts">
      <thead><tr><th>severity</th><th>alert</th><th>site</th><th>since</th></tr></thead>
      <tbody><tr class="empty"><td colspan="4">Loading…</td></tr></tbody>
    </table>
  </section>
  <section id="events-card" class="card">
    <h2>Latest events <span id="events-count" class="count"></span></h2>
    <p class="err" hidden></p>
    <form id="event-filters" class="filters" role="search">
      <select id="f-site" aria-label="site"><option value="">all sites</option></select>
      <select id="f-type" aria-label="type"><option value="">all types</option></select>
      <select id="f-severity" aria-label="severity">
        <option value="">all severities</option><option value="critical">critical</option><option value="warning">warning</option><option value="info">info</option>
      </select>
      <input id="f-text" type="search" placeholder="search summary, domain, subject" aria-label="search">
    </form>
    <div class="scroll">
      <table id="events">
        <thead><tr><th>time</th><th>severity</th><th>event</th><th>site</th><th>summary</th></tr></thead>
        <tbody><tr class="empty"><td colspan="5">Loading…</td></tr></tbody>
      </table>
    </div>
  </section>
  <section id="deliveries-card" class="card">
    <h2>Deliveries <span id="deliveries-count" class="count"></span>
      <span class="tools"><label class="check"><input id="failed-only" type="checkbox"> failures only</label></span></h2>
    <p class="err" hidden></p>
    <div class="scroll">
      <table id="deliveries">
        <thead><tr><th>updated</th><th>event</th><th>channel</th><th>state</th><th>tries</th><th>last error</th></tr></thead>
        <tbody><tr class="empty"><td colspan="6">Loading…</td></tr></tbody>
      </table>
    </div>
  </section>
  <section id="silences-card" class="card">
    <h2>Silences <span id="silences-count" class="count"></span></h2>
    <p class="err" hidden></p>
    <form id="silence-form" autocomplete="off">
      <input name="match" type="text" required placeholder="site_id == 12 &amp;&amp; severity != 'critical'" aria-label="match (CEL)">
      <div class="row">
        <input name="comment" type="text" required placeholder="why (who is working on what)" aria-label="comment">
        <input name="duration" type="text" required value="2h" list="durations" size="5" aria-label="duration">
        <button type="submit">Silence</button>
      </div>
      <datalist id="durations"><option value="30m"><option value="1h"><option value="2h"><option value="4h"><option value="1d"></datalist>
    </form>
    <p id="silence-result" class="form-result"></p>
    <ul id="silences"><li class="empty">Loading…</li></ul>
  </section>
</main>`;

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

/** The page's HTML and its Content-Security-Policy, built once (the page is static). */
export function dashboardPage(): { html: string; csp: string } {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>hostwatch</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<style>${DASHBOARD_CSS}</style>
</head>
<body>${BODY}
<script>${DASHBOARD_JS}</script>
</body>
</html>
`;
  // Only our own inline style and script (by hash), requests to this origin only, and no
  // way for injected markup to run, frame us or post a form elsewhere.
  const csp = [
    "default-src 'self'",
    `script-src ${sha256(DASHBOARD_JS)}`,
    `style-src ${sha256(DASHBOARD_CSS)}`,
    "img-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, csp };
}

/** A small favicon (a green dot), so browsers do not ask for /favicon.ico. */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="6" fill="#15803d"/></svg>';
