/**
 * The dashboard's script: plain browser JavaScript, no build step, inlined in the page
 * (allowed by its CSP hash). It reads only our JSON API, follows the SSE stream, and puts
 * every API-supplied string into the page as text, never as HTML.
 *
 * It is a String.raw template: it must not contain a backtick or a dollar-brace.
 */
export const DASHBOARD_JS = String.raw`
'use strict';
(() => {
  const TOKEN_KEY = 'hostwatch.token';
  const MAX_EVENTS = 300;
  const SEVERITY_RANK = { critical: 0, warning: 1, info: 2 };

  // The token comes in the fragment (#token=...), which browsers never send to a server;
  // it is kept for this tab only and removed from the address bar. Read at the start and
  // again when only the fragment changes (no reload): see the hashchange handler below.
  // The token is everything after "#token=", as pasted: a token may hold "&" or "%" (a
  // percent-encoded one is decoded; text that is not valid percent-encoding is taken as is).
  function takeTokenFromHash() {
    const fromHash = /(?:^#|&)token=(.*)$/s.exec(location.hash);
    if (!fromHash) return false;
    let value = fromHash[1];
    try {
      value = decodeURIComponent(value);
    } catch (_) {
      // "50%off": not percent-encoding, so the token itself.
    }
    sessionStorage.setItem(TOKEN_KEY, value);
    history.replaceState(null, '', location.pathname + location.search);
    return true;
  }
  takeTokenFromHash();
  const token = () => sessionStorage.getItem(TOKEN_KEY);

  const state = {
    events: [],
    ids: new Set(),
    cursor: null,
    loading: null,
    eventsLoaded: false,
    fresh: new Map(),
    sources: null,
    budget: null,
    alerts: null,
    deliveries: null,
    deliveriesFailed: null,
    silences: null,
    // event id -> silence id, for the latest events held back by a silence
    silenced: new Map(),
  };

  // ---------------------------------------------------------------- helpers
  // Every piece of API data goes into the page as text (textContent, attribute values,
  // option labels); nothing from the API is ever parsed as HTML.
  const $ = (id) => document.getElementById(id);

  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = String(v);
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, String(v));
    }
    return appendAll(node, children);
  }

  /** Append nodes and strings; null, undefined and false are skipped (the DOM's append would write "null"). */
  function appendAll(node, children) {
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  /** Replace a node's children, skipping null, undefined and false as h() does. */
  function fill(node, ...children) {
    node.replaceChildren();
    return appendAll(node, children);
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(path, init) {
    const headers = { accept: 'application/json' };
    if (init && init.body) headers['content-type'] = 'application/json';
    const t = token();
    if (t) headers.authorization = 'Bearer ' + t;
    const res = await fetch(path, Object.assign({}, init, { headers }));
    let body = null;
    try {
      body = await res.json();
    } catch (_) {
      body = null;
    }
    if (res.status === 401) $('auth').hidden = false;
    if (!res.ok) {
      const e = body && body.error;
      throw new ApiError(res.status, e ? e.code : 'http_' + res.status, e ? e.message : 'HTTP ' + res.status);
    }
    return body;
  }

  /** Run a panel's loader; show its error in the panel instead of failing the page. */
  async function guard(panel, fn) {
    const err = document.querySelector('#' + panel + ' .err');
    try {
      await fn();
      if (err) err.hidden = true;
    } catch (e) {
      if (err) {
        err.textContent = (e && e.message) || String(e);
        err.hidden = false;
      }
    }
  }

  const toMs = (v) => (v === null || v === undefined || v === '' ? null : typeof v === 'number' ? v : Date.parse(v));

  function span(d) {
    const s = Math.round(d / 1000);
    if (s < 60) return s + 's';
    const m = Math.round(s / 60);
    if (m < 60) return m + 'm';
    const hours = Math.floor(m / 60);
    if (hours < 48) return hours + 'h' + (m % 60 ? ' ' + (m % 60) + 'm' : '');
    return Math.floor(hours / 24) + 'd';
  }

  function rel(v) {
    const t = toMs(v);
    if (t === null || Number.isNaN(t)) return '—';
    const d = Date.now() - t;
    if (Math.abs(d) < 1500) return 'now';
    return d > 0 ? span(d) + ' ago' : 'in ' + span(-d);
  }

  function when(v) {
    const t = toMs(v);
    const ok = t !== null && !Number.isNaN(t);
    return h('time', { datetime: ok ? new Date(t).toISOString() : null, title: ok ? new Date(t).toLocaleString() : null, text: rel(v) });
  }

  // The longest option label of a filter (an ellipsis marks the cut).
  const OPTION_CHARS = 40;
  const clip = (text, max) => (text.length > max ? text.slice(0, max - 1) + '…' : text);
  const shortType = (type) => String(type || '').replace(/^hostwatch\./, '');
  const sev = (s) => h('span', { class: 'sev sev-' + (SEVERITY_RANK[s] === undefined ? 'none' : s), text: s || '—' });
  const badge = (cls, text, title) => h('span', { class: 'badge ' + cls, text, title });

  function silencedBadge(eventId) {
    const sid = state.silenced.get(eventId);
    if (!sid) return null;
    const s = (state.silences || []).find((x) => x.id === sid);
    return badge('silenced', 'silenced', 'Stored, not delivered: held back by the silence ' + (s ? s.match : sid));
  }

  function emptyRow(tbody, cols, text) {
    fill(tbody, h('tr', { class: 'empty' }, h('td', { colspan: cols, text })));
  }

  function debounce(fn, ms) {
    let t = null;
    return () => {
      clearTimeout(t);
      t = setTimeout(fn, ms);
    };
  }

  // A CEL string literal: JSON's escaping is valid CEL.
  const celString = (s) => JSON.stringify(String(s));

  // ---------------------------------------------------------------- sources
  // Red: an operator alert fires about it (degraded, or the key lacks its scope). Amber: it
  // failed lately. Grey: nothing is wrong, it is just off or not read yet (never red).
  function sourceHealth(s) {
    const failing = Array.isArray(s.failing_entities) ? s.failing_entities.length : Number(s.failing_entities || 0);
    const failures = Number(s.consecutive_failures || 0);
    if (s.enabled === false) return { cls: 'off', text: 'disabled' };
    if (s.last_error_code === 'scope_missing' && (failures > 0 || failing > 0)) return { cls: 'red', text: 'the API key lacks a scope' };
    if (s.degraded) return { cls: 'red', text: 'degraded: ' + (failures ? failures + ' cycles failed in a row' : failing + (failing === 1 ? ' entity' : ' entities') + ' failing') };
    if (failures > 0) return { cls: 'amber', text: 'last cycle failed' };
    if (failing > 0) return { cls: 'amber', text: failing + (failing === 1 ? ' entity' : ' entities') + ' failing' };
    // After a start every source catches up as the request budget allows: progress, not an error.
    if (s.caught_up === false) return { cls: 'off', text: s.progress ? 'catching up: ' + progressText(s) : 'catching up: waiting for its turn' };
    // Never read is not healthy: a source read with its parent's records is tried with each
    // cycle but reads nothing while no record came (an empty database, an unreachable API).
    if (!s.last_success_at) return { cls: 'off', text: s.read_with ? 'read with ' + s.read_with + (s.last_attempt_at ? ', not read yet' : '') : 'not read yet' };
    // Read, but late: behind its schedule by more than two of its intervals (what the
    // documented HostwatchSourceBehind alert fires on): the request budget, or a slow API.
    const lag = Number(s.lag_ms || 0);
    const every = Number(s.effective_every_ms || s.every_ms || 0);
    if (every > 0 && lag > 2 * every) return { cls: 'amber', text: 'behind: ' + span(lag) + ' late (every ' + span(every) + ')' };
    return { cls: 'green', text: 'healthy' };
  }

  // "312/1000 sites": polls of the cycle handing out polls now.
  function progressText(s) {
    const p = s.progress;
    return p ? p.done + '/' + p.total + (s.per === 'site' ? ' sites' : '') : '';
  }

  // One short line on the first screen: the sources being read now, the rest counted.
  function catchUpText(list) {
    const shown = list.filter((s) => s.progress).slice(0, 2);
    const more = list.length - shown.length;
    return 'Catching up after the start: ' + (shown.length ? shown.map((s) => s.name + ' ' + progressText(s)).join(', ') + (more ? ', ' : '') : '') + (more ? more + ' more waiting their turn' : '') + '.';
  }

  function intervalText(s) {
    if (!s.every_ms) return '';
    const eff = Number(s.effective_every_ms || 0);
    return eff > s.every_ms ? 'every ' + span(s.every_ms) + ' → ' + span(eff) : 'every ' + span(s.every_ms);
  }

  async function loadSources() {
    const r = await api('/api/sources');
    state.sources = r.data || [];
    state.budget = r.budget || null;
    renderSources();
  }

  // The first screen shows a summary (how many are healthy, the failing ones by name); the
  // full table is one click away, so the events are not pushed below the fold.
  function renderSources() {
    const tbody = document.querySelector('#sources tbody');
    const list = state.sources || [];
    if (!list.length) {
      $('sources-summary').textContent = 'No sources.';
      return emptyRow(tbody, 6, 'No sources.');
    }
    const counts = { green: 0, amber: 0, red: 0, off: 0 };
    const problems = [];
    fill(tbody,
      ...list.map((s) => {
        const health = sourceHealth(s);
        counts[health.cls]++;
        if (health.cls === 'red' || health.cls === 'amber') problems.push({ s, health });
        const failing = Array.isArray(s.failing_entities) ? s.failing_entities.length : Number(s.failing_entities || 0);
        const err = health.cls === 'green' || health.cls === 'off' ? null : s.last_error;
        const note = health.cls === 'green' ? '' : health.cls === 'off' ? h('span', { class: 'muted', text: health.text }) : health.text;
        return h(
          'tr',
          { 'data-source': s.name, class: 'health-' + health.cls },
          h('td', null, h('span', { class: 'dot dot-' + health.cls, title: health.text }), ' ', h('b', { text: s.name }), h('span', { class: 'muted', text: s.per === 'site' ? ' per site' : '' })),
          h('td', { class: 'num', text: intervalText(s), title: Number(s.effective_every_ms || 0) > s.every_ms ? 'stretched: the request budget cannot meet every interval (priority ' + s.priority + ')' : null }),
          h('td', null, when(s.last_success_at)),
          h('td', { class: s.progress ? 'progress' : null }, s.progress ? 'polling ' + progressText(s) : when(s.next_run_at)),
          h('td', { class: 'num' + (health.cls === 'red' || health.cls === 'amber' ? ' bad' : ''), text: String(s.consecutive_failures || 0) + (failing ? ' / ' + failing : '') }),
          h('td', { class: health.cls === 'off' ? '' : 'error-text' }, err ? [h('code', { text: s.last_error_code || 'error' }), ' ', h('span', { text: err })] : note),
        );
      }),
    );
    const parts = [counts.green + ' healthy'];
    if (counts.red) parts.push(counts.red + ' failing');
    if (counts.amber) parts.push(counts.amber + ' warning');
    if (counts.off) parts.push(counts.off + ' idle');
    const b = state.budget;
    if (b && b.short) parts.push('request budget short: ' + b.stretched + ' stretched (' + Number(b.needed_per_hour).toLocaleString() + ' requests/hour needed, ' + Number(b.allowed_per_hour).toLocaleString() + ' allowed)');
    $('sources-count').textContent = parts.join(' · ');
    const enabled = list.length - list.filter((s) => s.enabled === false).length;
    const catchingUp = list.filter((s) => s.enabled !== false && s.caught_up === false);
    fill($('sources-summary'),
      h('span', { class: 'dot dot-' + (counts.red ? 'red' : counts.amber ? 'amber' : 'green') }),
      ' ',
      problems.length
        ? h('span', null, h('b', { text: String(counts.green) }), ' of ' + enabled + ' enabled sources healthy; ' + problems.length + ' need' + (problems.length === 1 ? 's' : '') + ' a look:')
        : h('span', null, 'All ', h('b', { text: String(counts.green) }), ' polled sources are healthy.'),
      counts.off ? h('span', { class: 'muted', text: ' ' + counts.off + ' idle (disabled, or read with another source, or not read yet).' }) : null,
      catchingUp.length ? h('span', { class: 'catch-up', text: ' ' + catchUpText(catchingUp) }) : null,
    );
    problems.sort((a, b) => (a.health.cls === b.health.cls ? a.s.name.localeCompare(b.s.name) : a.health.cls === 'red' ? -1 : 1));
    fill($('sources-problems'),
      ...problems.map(({ s, health }) =>
        h(
          'li',
          { 'data-source': s.name, class: 'problem problem-' + health.cls },
          h('span', { class: 'dot dot-' + health.cls }),
          ' ',
          h('b', { text: s.name }),
          ' ',
          h('span', { class: health.cls === 'red' ? 'error-text' : 'warn-text', text: health.text }),
          s.last_error ? h('div', { class: 'small muted' }, h('code', { text: s.last_error_code || 'error' }), ' ', h('span', { text: s.last_error })) : null,
        ),
      ),
    );
    $('sources-details').querySelector('summary').textContent = 'All ' + list.length + ' sources';
  }

  // ---------------------------------------------------------------- alerts
  async function loadAlerts() {
    const r = await api('/api/alerts');
    state.alerts = r.data || [];
    renderAlerts();
  }
  const refreshAlerts = debounce(() => guard('alerts-card', loadAlerts), 300);

  function renderAlerts() {
    if (state.alerts === null) return;
    const tbody = document.querySelector('#alerts tbody');
    const list = (state.alerts || []).slice().sort((a, b) => {
      const sa = SEVERITY_RANK[(a.event && a.event.data && a.event.data.severity) || 'info'];
      const sb = SEVERITY_RANK[(b.event && b.event.data && b.event.data.severity) || 'info'];
      return sa - sb || (toMs(b.since) || 0) - (toMs(a.since) || 0);
    });
    $('alerts-count').textContent = list.length ? String(list.length) : '';
    if (!list.length) return emptyRow(tbody, 4, 'Nothing is firing.');
    fill(tbody,
      ...list.map((a) => {
        const d = (a.event && a.event.data) || {};
        return h(
          'tr',
          { 'data-subject': a.subject, class: 'sev-row-' + (d.severity || 'info') },
          h('td', null, sev(d.severity)),
          h('td', { class: 'summary' },
            h('b', { text: d.name || a.rule }), a.event ? [' ', silencedBadge(a.event.id)] : null,
            h('div', { class: 'small', text: d.summary || '' })),
          h('td', null, h('span', { text: d.domain || '—' }), h('div', { class: 'muted small', text: a.subject })),
          h('td', { class: 'nowrap' }, when(a.since), h('br'),
            h('button', { type: 'button', class: 'link', title: 'Prefill a silence for this alert', onclick: () => prefillSilence('rule == ' + celString(a.rule) + ' && subject == ' + celString(a.subject)) }, 'silence…')),
        );
      }),
    );
  }

  // ---------------------------------------------------------------- events
  const filters = () => ({
    site: $('f-site').value,
    type: $('f-type').value,
    severity: $('f-severity').value,
    text: $('f-text').value.trim().toLowerCase(),
  });

  /** The filters the API applies (type, site); the others are applied here. */
  function serverMatch(e, f) {
    if (f.type && e.type !== f.type) return false;
    if (f.site && String(e.data && e.data.site_id) !== f.site) return false;
    return true;
  }

  function clientMatch(e, f) {
    const d = e.data || {};
    if (f.severity && d.severity !== f.severity) return false;
    if (f.text) {
      const hay = [e.type, e.subject, d.summary, d.domain, d.rule].join(' ').toLowerCase();
      if (!hay.includes(f.text)) return false;
    }
    return true;
  }

  /**
   * Page through the log from the start to its end (oldest first), keeping the newest
   * MAX_EVENTS. Returns the cursor of the end of the log.
   */
  async function loadEvents() {
    const f = filters();
    const ticket = { live: [] };
    state.loading = ticket;
    try {
      // The newest events in one request; the stream then follows on from their cursor.
      const q = new URLSearchParams({ last: String(MAX_EVENTS) });
      if (f.type) q.set('type', f.type);
      if (f.site) q.set('site_id', f.site);
      const r = await api('/api/events?' + q.toString());
      if (state.loading !== ticket) return null; // a newer load took over
      const kept = r.data || [];
      const cursor = r.cursor || null;
      state.loading = null;
      state.eventsLoaded = true;
      state.events = kept.reverse();
      state.ids = new Set(state.events.map((e) => e.id));
      // Events that arrived live while the pages were read.
      for (const e of ticket.live) addEvent(e, false);
      if (state.events[0] && state.events[0].source) $('instance').textContent = String(state.events[0].source).replace(/^hostwatch:\/\//, '');
      renderEvents();
      return cursor;
    } finally {
      if (state.loading === ticket) state.loading = null;
    }
  }

  function addEvent(e, isLive) {
    if (!e || !e.id) return false;
    if (state.loading) state.loading.live.push(e);
    if (state.ids.has(e.id) || !serverMatch(e, filters())) return false;
    state.ids.add(e.id);
    state.events.unshift(e);
    if (isLive) state.fresh.set(e.id, Date.now());
    while (state.events.length > MAX_EVENTS) state.ids.delete(state.events.pop().id);
    if (!$('instance').textContent && e.source) $('instance').textContent = String(e.source).replace(/^hostwatch:\/\//, '');
    return true;
  }

  /** Set a filter's options from [value, label, title?] entries, keeping the choice made. */
  function syncOptions(select, entries, firstLabel) {
    const key = JSON.stringify(entries);
    if (select.dataset.key === key) return;
    select.dataset.key = key;
    const current = select.value;
    fill(select, new Option(firstLabel, ''), ...entries.map(([value, label, title]) => h('option', { value, title, text: label })));
    if (current && !entries.some(([v]) => v === current)) select.append(new Option(current, current));
    select.value = current;
  }

  function renderEvents() {
    if (!state.eventsLoaded) return;
    const f = filters();
    const sites = new Map();
    const types = new Set();
    for (const e of state.events) {
      const d = e.data || {};
      // A domain can be 253 characters (or, from a broken API, thousands): the label is cut
      // short so the select does not widen the page; the value (the site id) stays whole.
      const id = d.site_id === null || d.site_id === undefined ? null : String(d.site_id);
      if (id !== null) sites.set(id, d.domain ? [id, clip(d.domain, OPTION_CHARS) + ' (#' + id + ')', d.domain] : [id, '#' + id, null]);
      types.add(e.type);
    }
    syncOptions($('f-site'), [...sites.values()].sort((a, b) => Number(a[0]) - Number(b[0])), 'all sites');
    syncOptions($('f-type'), [...types].sort().map((t) => [t, shortType(t)]), 'all types');
    const shown = state.events.filter((e) => clientMatch(e, f));
    $('events-count').textContent = shown.length === state.events.length ? String(shown.length) : shown.length + ' of ' + state.events.length;
    const tbody = document.querySelector('#events tbody');
    if (!shown.length) return emptyRow(tbody, 5, state.events.length ? 'No event matches the filters.' : 'No events yet. The first poll is a baseline; changes show up here as they happen.');
    const now = Date.now();
    fill(tbody,
      ...shown.map((e) => {
        const d = e.data || {};
        const age = state.fresh.has(e.id) ? now - state.fresh.get(e.id) : Infinity;
        const row = h(
          'tr',
          { 'data-id': e.id, class: (age < 4000 ? 'fresh ' : '') + (state.silenced.has(e.id) ? 'silenced ' : '') + 'sev-row-' + (d.severity || 'info') },
          h('td', { class: 'nowrap' }, when(e.time)),
          h('td', null, sev(d.severity)),
          h('td', { class: 'nowrap' },
            h('b', { text: d.name || shortType(e.type) }),
            d.status ? [' ', badge(d.status === 'firing' ? 'firing' : 'resolved', d.status)] : null,
            state.silenced.has(e.id) ? [' ', silencedBadge(e.id)] : null,
            d.shadow === true ? [' ', badge('shadow', 'shadow', 'Shadow rule: stored and shown, never delivered')] : null),
          h('td', { title: d.site_id !== null && d.site_id !== undefined ? 'site ' + d.site_id : null, text: d.domain || '—' }),
          h('td', { class: 'summary' }, h('span', { text: d.summary || '' }), h('div', { class: 'muted small', text: e.subject })),
        );
        // A re-render continues the highlight where it was instead of restarting it.
        if (age < 4000) for (const td of row.children) td.style.animationDelay = -age + 'ms';
        return row;
      }),
    );
  }

  // ---------------------------------------------------------------- live stream
  let stream = null;
  let retry = null;

  function setStatus(cls, text) {
    const s = $('status');
    s.className = 'status ' + cls;
    s.textContent = text;
  }

  function openStream(after) {
    if (stream) stream.close();
    clearTimeout(retry);
    const q = new URLSearchParams();
    if (after) q.set('after', after);
    const t = token();
    // EventSource cannot send headers, so the token travels in the query here.
    if (t) q.set('access_token', t);
    const qs = q.toString();
    stream = new EventSource('/api/events/stream' + (qs ? '?' + qs : ''));
    setStatus('connecting', 'connecting…');
    stream.onopen = () => setStatus('live', 'live');
    stream.onmessage = (m) => {
      if (m.lastEventId) state.cursor = m.lastEventId;
      let e;
      try {
        e = JSON.parse(m.data);
      } catch (_) {
        return;
      }
      if (addEvent(e, true)) renderEvents();
      if (e && e.data && e.data.status) refreshAlerts();
      refreshDeliveries();
      refreshSilenced();
    };
    stream.onerror = () => {
      if (stream.readyState === EventSource.CLOSED) {
        // The server refused the stream (or it is missing): try again from our cursor.
        setStatus('down', 'offline · retrying');
        retry = setTimeout(() => openStream(state.cursor), 5000);
      } else {
        setStatus('connecting', 'reconnecting…');
      }
    };
  }

  // ---------------------------------------------------------------- deliveries
  async function loadDeliveries() {
    const q = new URLSearchParams({ limit: '50' });
    if ($('failed-only').checked) q.set('failed', 'true');
    const r = await api('/api/deliveries?' + q.toString());
    state.deliveries = r.data || [];
    state.deliveriesFailed = typeof r.failed_total === 'number' ? r.failed_total : null;
    renderDeliveries();
  }
  const refreshDeliveries = debounce(() => guard('deliveries-card', loadDeliveries), 800);

  function renderDeliveries() {
    const tbody = document.querySelector('#deliveries tbody');
    const list = state.deliveries || [];
    // Every failed delivery, not only those of the rows shown (the server counts them).
    const shown = list.filter((d) => d.state === 'dead' || (d.state === 'pending' && d.attempts > 0)).length;
    const failed = state.deliveriesFailed === null ? shown : state.deliveriesFailed;
    $('deliveries-count').textContent = failed ? failed + ' failing' + (failed > shown ? ' (' + shown + ' shown)' : '') : '';
    $('deliveries-count').className = failed ? 'count bad' : 'count';
    if (!list.length) return emptyRow(tbody, 6, $('failed-only').checked ? 'No failed deliveries.' : 'Nothing delivered yet.');
    fill(tbody,
      ...list.map((d) => {
        const retrying = d.state === 'pending' && d.attempts > 0;
        const cls = d.state === 'dead' ? 'fail' : retrying ? 'retry' : '';
        const label = d.state === 'dead' ? 'dead' : retrying ? 'retrying' : d.state;
        return h(
          'tr',
          { class: cls, 'data-event': d.event_id },
          h('td', { class: 'nowrap' }, when(d.updated_at)),
          h('td', { title: d.subject }, h('b', { text: shortType(d.type) }), h('div', { class: 'muted small', text: d.subject })),
          h('td', { text: d.channel }),
          h('td', null, badge('state-' + label, label, retrying ? 'next attempt ' + rel(d.next_attempt_at) : null)),
          h('td', { class: 'num', text: String(d.attempts) }),
          h('td', { class: 'error-text', text: d.last_error || '' }),
        );
      }),
    );
  }

  // ---------------------------------------------------------------- silences
  async function loadSilences() {
    const r = await api('/api/silences');
    state.silences = r.data || [];
    renderSilences();
    await loadSilenced();
  }

  /** Which of the latest events a silence held back (the feed itself does not say). */
  async function loadSilenced() {
    const r = await api('/api/silenced-events?limit=' + MAX_EVENTS);
    const next = new Map((r.data || []).map((x) => [x.event_id, x.silence_id]));
    const changed = next.size !== state.silenced.size || [...next].some(([k, v]) => state.silenced.get(k) !== v);
    state.silenced = next;
    if (changed) {
      renderEvents();
      renderAlerts();
    }
  }
  const refreshSilenced = debounce(() => guard('silences-card', loadSilences), 500);

  function renderSilences() {
    const ul = $('silences');
    const list = state.silences || [];
    const active = list.filter((s) => s.state === 'active').length;
    $('silences-count').textContent = active ? active + ' active' : '';
    if (!list.length) return fill(ul, h('li', { class: 'empty', text: 'No silences.' }));
    fill(ul,
      ...list.map((s) => {
        const timing =
          s.state === 'active' ? 'ends ' + rel(s.ends_at) : s.state === 'pending' ? 'starts ' + rel(s.starts_at) : 'ended ' + rel(s.expired_at || s.ends_at);
        return h(
          'li',
          { 'data-id': s.id, 'data-state': s.state, class: 'silence silence-' + s.state },
          h('div', { class: 'silence-head' },
            badge('state-' + s.state, s.state),
            h('code', { class: 'match', text: s.match }),
            s.state === 'expired' ? null : h('button', { type: 'button', class: 'expire', onclick: () => expireSilence(s.id) }, 'Expire')),
          h('div', { class: 'muted small' },
            h('span', { text: s.comment }), ' · ', h('span', { text: s.created_by }), ' · ',
            h('span', { title: new Date(s.ends_at).toLocaleString(), text: timing }),
            ' · ', h('span', { class: 'suppressed', text: s.suppressed + ' held back' })),
        );
      }),
    );
  }

  async function expireSilence(id) {
    await guard('silences-card', async () => {
      await api('/api/silences/' + encodeURIComponent(id) + '/expire', { method: 'POST', body: '{}' });
      await loadSilences();
    });
  }

  function prefillSilence(match) {
    const form = $('silence-form');
    form.elements.namedItem('match').value = match;
    form.elements.namedItem('comment').focus();
    form.scrollIntoView({ block: 'nearest' });
  }

  async function submitSilence(ev) {
    ev.preventDefault();
    const form = ev.target;
    const out = $('silence-result');
    const value = (name) => form.elements.namedItem(name).value.trim();
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const body = { match: value('match'), duration: value('duration'), comment: value('comment'), created_by: 'dashboard' };
      const s = await api('/api/silences', { method: 'POST', body: JSON.stringify(body) });
      out.className = 'form-result ok';
      out.textContent = 'Silenced until ' + new Date(s.ends_at).toLocaleString() + '.';
      form.elements.namedItem('match').value = '';
      form.elements.namedItem('comment').value = '';
      await loadSilences();
    } catch (e) {
      out.className = 'form-result bad';
      out.textContent = (e && e.message) || String(e);
    } finally {
      button.disabled = false;
    }
  }

  // ---------------------------------------------------------------- start
  $('silence-form').addEventListener('submit', submitSilence);
  $('failed-only').addEventListener('change', () => guard('deliveries-card', loadDeliveries));
  for (const id of ['f-site', 'f-type']) $(id).addEventListener('change', () => guard('events-card', loadEvents));
  $('f-severity').addEventListener('change', renderEvents);
  $('f-text').addEventListener('input', debounce(renderEvents, 150));

  const every = (ms, fn) => setInterval(() => {
    if (!document.hidden) fn();
  }, ms);

  /** Load every panel, then follow the stream from where the loaded log ends. */
  async function connect() {
    await Promise.all([
      guard('sources-card', loadSources),
      guard('alerts-card', loadAlerts),
      guard('deliveries-card', loadDeliveries),
      guard('silences-card', loadSilences),
      guard('events-card', async () => {
        state.cursor = await loadEvents();
      }),
    ]);
    // Live from where the loaded log ends, so nothing falls between the two.
    openStream(state.cursor);
  }

  // A token pasted into the address of this tab changes only the fragment: no reload, so
  // take it here as on a fresh load and connect again with it.
  window.addEventListener('hashchange', () => {
    if (!takeTokenFromHash()) return;
    $('auth').hidden = true;
    void connect();
  });

  (async () => {
    await connect();
    every(5000, () => guard('sources-card', loadSources));
    every(5000, () => guard('deliveries-card', loadDeliveries));
    every(15000, () => guard('alerts-card', loadAlerts));
    every(10000, () => guard('silences-card', loadSilences));
    every(30000, renderEvents);
  })();
})();
`;
