/**
 * The metrics counted on every poll and API request are tallied by hostwatch and read into
 * the scrape (src/metrics.ts): the text must be what prom-client's own counter and histogram
 * give for the same observations.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../src/api/errors.js';
import { Metrics, TALLIED } from '../src/metrics.js';
import type { PollOutcome } from '../src/pipeline/poller.js';
import { startWorld } from './harness.js';
import { relayTo } from './pg.js';
import { waitFor } from './receiver.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

/** The lines of one metric family (HELP, TYPE and its samples) in a scrape's text. */
function family(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name}_`) || l === `# HELP ${name}` || l.startsWith(`# HELP ${name} `) || l.startsWith(`# TYPE ${name} `));
}

function metrics(): Metrics {
  return new Metrics({ outbox: { count: async () => 0, oldestPendingCreatedAt: async () => null }, sources: async () => [] }, () => 0, { version: 'test' });
}

/** A day of polls in miniature: every outcome, durations on and between the bucket bounds, some failures. */
function observations(): Array<{ source: string; outcome: PollOutcome; ms: number; status: number | null; code: string | null }> {
  const out = [];
  const sources = ['health', 'usage', 'backups'];
  const outcomes: PollOutcome['status'][] = ['baseline', 'changed', 'unchanged', 'not_applicable', 'failed'];
  let seed = 7;
  const next = (): number => (seed = (seed * 48271) % 2147483647) / 2147483647;
  for (let i = 0; i < 500; i++) {
    const status = outcomes[Math.floor(next() * outcomes.length)]!;
    const failed = status === 'failed';
    const error = failed ? new ApiError({ code: next() < 0.5 ? 'timeout' : 'bad_response', endpoint: '/x', message: 'x' }) : undefined;
    // Some durations exactly on a bound (it counts in that bucket), some past the last one.
    const ms = i % 7 === 0 ? TALLIED.pollDuration.buckets[i % TALLIED.pollDuration.buckets.length]! * 1000 : next() * (i % 11 === 0 ? 60_000 : 300);
    out.push({
      source: sources[i % 3]!,
      outcome: { entity: 'e', status, events: 0, ...(error ? { error } : {}) },
      ms,
      status: failed && error!.code === 'timeout' ? null : 200 + (i % 2) * 104,
      code: failed ? error!.code : null,
    });
  }
  return out;
}

describe('metrics counted on every poll', () => {
  it('give the scrape the same text as prom-client\'s own counter and histogram for the same polls and requests', async () => {
    const m = metrics();
    const ref = new Registry();
    // prom-client's own metrics, from the same definitions.
    const polls = new Counter({ ...TALLIED.polls, registers: [ref] });
    const errors = new Counter({ ...TALLIED.pollErrors, registers: [ref] });
    const { labelName, buckets, ...duration0 } = TALLIED.pollDuration;
    const duration = new Histogram({ ...duration0, labelNames: [labelName], buckets: [...buckets], registers: [ref] });
    const requests = new Counter({ ...TALLIED.apiRequests, registers: [ref] });
    for (const o of observations()) {
      m.poll(o.source, o.outcome, o.ms);
      m.apiResponse(o.status, o.code);
      polls.inc({ source: o.source, outcome: o.outcome.status });
      duration.observe({ source: o.source }, o.ms / 1000);
      if (o.outcome.error) errors.inc({ source: o.source, code: o.outcome.error.code });
      requests.inc({ status: o.status === null ? 'none' : String(o.status), error: o.code ?? 'none' });
    }
    // In a cluster every line carries the instance's name.
    m.registry.setDefaultLabels({ hostwatch_instance: 'a' });
    ref.setDefaultLabels({ hostwatch_instance: 'a' });
    const [got, want] = [await m.text(), await ref.metrics()];
    for (const { name } of Object.values(TALLIED)) {
      expect(family(want, name).length).toBeGreaterThan(3);
      expect(family(got, name)).toEqual(family(want, name));
    }
    // Scraped twice, the counts are not added twice.
    expect(family(await m.text(), 'hostwatch_polls_total')).toEqual(family(want, 'hostwatch_polls_total'));
  });

  it('leaves out a poll duration that is not a finite number, instead of failing the poll', async () => {
    const m = metrics();
    m.poll('health', { entity: 'e', status: 'changed', events: 0 }, 12);
    m.poll('health', { entity: 'e', status: 'changed', events: 0 }, Number.NaN);
    const text = await m.text();
    expect(text).toContain('hostwatch_poll_duration_seconds_count{source="health"} 1');
    expect(text).toContain('hostwatch_polls_total{source="health",outcome="changed"} 2');
  });
});

describe('while PostgreSQL cannot be reached', () => {
  it('/metrics answers 200 with hostwatch_storage_up 0 and without the gauges read from the database, the API answers 503 storage_unavailable, and both recover with it; the liveness record\'s failure is logged once, not at every beat', async () => {
    const w = await startWorld({ engine: 'postgres', config: { server: { listen: '127.0.0.1:0' } } });
    cleanups.push(() => w.close());
    const url = (w.storage as { url: string }).url;
    const password = decodeURIComponent(new URL(url).password);
    const relay = await relayTo(url);
    cleanups.push(() => relay.cleanup());
    // The app reaches the database through the relay; the config keeps ${PGPASS}.
    const through = (w.base['storage'] as { url: string }).url.replace(`:${new URL(url).port}/`, `:${relay.port}/`);
    // The daemon's liveness row is written every 100 ms here (every 5 s by default).
    const app = await w.app({ storage: { url: through } }, { daemonBeatEveryMs: 100 });
    await app.start();
    const get = async (path: string): Promise<{ status: number; text: string }> => {
      const res = await fetch(`${app.serverUrl}${path}`);
      return { status: res.status, text: await res.text() };
    };
    const sample = (text: string, name: string): string | undefined => text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
    // A poll counted before the cut (a counter has no sample until its first poll, which
    // waits for its batch: on a slow machine not yet when the server answers).
    let up = await get('/metrics');
    for (const until = Date.now() + 20_000; sample(up.text, 'hostwatch_polls_total') === undefined && Date.now() < until; up = await get('/metrics')) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(up.status).toBe(200);
    expect(sample(up.text, 'hostwatch_storage_up')).toMatch(/ 1$/);
    expect(sample(up.text, 'hostwatch_outbox_depth')).toBeDefined();

    await relay.cut();
    const down = await get('/metrics');
    expect(down.status).toBe(200);
    expect(sample(down.text, 'hostwatch_storage_up')).toMatch(/ 0$/);
    // Left out rather than 0: "nothing pending" would be a guess.
    for (const name of ['hostwatch_outbox_depth', 'hostwatch_outbox_oldest_pending_age_seconds', 'hostwatch_source_last_success_timestamp_seconds']) {
      expect(sample(down.text, name), name).toBeUndefined();
    }
    // Everything that needs no database is there.
    for (const name of ['hostwatch_build_info', 'hostwatch_polls_total', 'process_resident_memory_bytes', 'hostwatch_cluster_member']) {
      expect(sample(down.text, name), name).toBeDefined();
    }
    for (const path of ['/api/sources', '/api/alerts', '/api/deliveries', '/api/events', '/api/events/stream?after=1']) {
      const r = await get(path);
      expect({ path, status: r.status, body: JSON.parse(r.text) as unknown }).toEqual({
        path,
        status: 503,
        body: { error: { code: 'storage_unavailable', message: 'the database cannot be reached; hostwatch goes on and answers once it is back (GET /readyz says why)' } },
      });
    }
    expect((await get('/readyz')).status).toBe(503);
    expect(w.logs.text).toContain('hostwatch_storage_up is 0');
    expect(w.logs.text).not.toContain(password);
    // Many beats failed meanwhile; one line says so.
    await new Promise((r) => setTimeout(r, 600));
    // At error level (the later failures are at debug, which this test's log also keeps).
    const beatFailed = (): number => w.logs.text.split('\n').filter((l) => l.includes('could not write the daemon liveness record') && l.includes('"level":50')).length;
    expect(beatFailed()).toBe(1);

    await relay.restore();
    await waitFor(() => w.logs.text.includes('the daemon liveness record is written again'), 'the liveness record written again', 10_000, 50);
    expect(beatFailed()).toBe(1);
    const again = await get('/metrics');
    expect(sample(again.text, 'hostwatch_storage_up')).toMatch(/ 1$/);
    expect(sample(again.text, 'hostwatch_outbox_depth')).toBeDefined();
    expect((await get('/api/alerts')).status).toBe(200);
  });
});
