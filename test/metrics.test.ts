/**
 * The metrics counted on every poll and API request are tallied by hostwatch and read into
 * the scrape (src/metrics.ts): the text must be what prom-client's own counter and histogram
 * give for the same observations.
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api/errors.js';
import { Metrics, TALLIED } from '../src/metrics.js';
import type { PollOutcome } from '../src/pipeline/poller.js';

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
