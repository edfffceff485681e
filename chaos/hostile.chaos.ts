/**
 * Hostile replies: the panel answers 200 with something no parser should trust (arrays
 * nested 100,000 deep, a cut-off body, an HTML page, the wrong shape, duplicate keys).
 * Each must be a failed poll like any other: recorded, counted toward source.degraded,
 * the previous snapshot kept, no change event, the daemon unharmed.
 */
import { afterEach, expect, it } from 'vitest';
import type { FaultSpec } from '../src/simulator/index.js';
import { names, rows, startWorld, type World } from '../test/harness.js';
import { record } from './figures.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

/** One hostile reply: where, what, and the poll_state rows it must fail. */
interface Hostile {
  what: string;
  fault: FaultSpec;
  source: string;
}

const HOSTILE: readonly Hostile[] = [
  { what: 'health nested 100,000 deep', fault: { path: '^/sites/\\d+/health$', kind: 'nested', depth: 100_000 }, source: 'health' },
  { what: 'site list nested 100,000 deep', fault: { path: '^/sites$', kind: 'nested', depth: 100_000 }, source: 'sites' },
  { what: 'backups list nested 1,000,000 deep', fault: { path: '^/sites/\\d+/backups$', kind: 'nested', depth: 1_000_000 }, source: 'backups' },
  { what: 'usage cut off mid-body', fault: { path: '^/sites/\\d+/usage$', kind: 'truncated' }, source: 'usage' },
  { what: 'health as an HTML error page', fault: { path: '^/sites/\\d+/health$', kind: 'body', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' }, source: 'health' },
  { what: 'health data a string', fault: { path: '^/sites/\\d+/health$', kind: 'body', body: '{"data":"offline"}' }, source: 'health' },
  { what: 'health data null', fault: { path: '^/sites/\\d+/health$', kind: 'body', body: '{"data":null}' }, source: 'health' },
  { what: 'a bare null', fault: { path: '^/sites/\\d+/usage$', kind: 'body', body: 'null' }, source: 'usage' },
  { what: 'site list with one id twice', fault: { path: '^/sites$', kind: 'body', body: '{"data":[{"id":1,"domain":"a.example"},{"id":1,"domain":"b.example"}]}' }, source: 'sites' },
  { what: 'backups without ids', fault: { path: '^/sites/\\d+/backups$', kind: 'body', body: '{"data":[{"state":"Error"}]}' }, source: 'backups' },
  { what: 'jobs as an empty body', fault: { path: '^/jobs$', kind: 'body', body: '' }, source: 'jobs' },
];

const FAILURES = 3;

it('records every hostile reply as a failed poll: no change event, source.degraded after the configured failures, the snapshot kept', async () => {
  world = await startWorld({ sim: { sites: 3 }, config: { degraded: { after_failures: FAILURES } } });
  const w = world;
  const app = await w.app();
  await app.runOnce();
  const snapshots = (): unknown => rows(w, 'SELECT source, entity, hash, version FROM snapshots ORDER BY source, entity');
  let hostilePolls = 0;
  let failedPolls = 0;
  let degradedFired = 0;
  const unexpected: string[] = [];
  const started = Date.now();
  for (const h of HOSTILE) {
    const before = snapshots();
    const eventsBefore = w.events.length;
    const id = w.sim.faults.add(h.fault);
    const outcomes: string[] = [];
    const onEnd = (s: { source: string; outcomes: Array<{ status: string }> }): void => {
      if (s.source === h.source) outcomes.push(...s.outcomes.map((o) => o.status));
    };
    app.scheduler.on('cycle:end', onEnd);
    for (let i = 0; i < FAILURES; i++) await app.runOnce();
    app.scheduler.off('cycle:end', onEnd);
    hostilePolls += outcomes.length;
    failedPolls += outcomes.filter((o) => o === 'failed').length;
    if (outcomes.length === 0 || outcomes.some((o) => o !== 'failed')) unexpected.push(`${h.what}: polls ${outcomes.join(', ')}`);
    const during = names(w.events.slice(eventsBefore));
    if (during.includes('source.degraded:firing')) degradedFired++;
    const others = during.filter((n) => !n.startsWith('source.degraded') && !n.startsWith('api.'));
    if (others.length) unexpected.push(`${h.what}: events ${others.join(', ')}`);
    if (JSON.stringify(snapshots()) !== JSON.stringify(before)) unexpected.push(`${h.what}: a snapshot changed`);
    w.sim.faults.remove(id);
    await app.runOnce();
    const after = names(w.events.slice(eventsBefore)).filter((n) => n.startsWith('source.degraded'));
    if (after.at(-1) !== 'source.degraded:resolved') unexpected.push(`${h.what}: source.degraded did not resolve (${after.join(', ')})`);
  }
  const cycleFailed = w.logs.lines.filter((l) => l.includes('cycle failed')).length;
  record('hostile replies (in-process daemon, 3 sites)', {
    'hostile reply kinds': HOSTILE.length,
    'polls answered with one': hostilePolls,
    'of them recorded as failed polls': failedPolls,
    'source.degraded fired (of kinds)': `${degradedFired} of ${HOSTILE.length}`,
    'change events invented': unexpected.filter((u) => u.includes('events')).length,
    'snapshots changed by a hostile reply': unexpected.filter((u) => u.includes('snapshot')).length,
    '"cycle failed" log lines (a poll not recorded)': cycleFailed,
    'scenario duration (s)': Math.round((Date.now() - started) / 100) / 10,
  });
  expect(unexpected).toEqual([]);
  expect(degradedFired).toBe(HOSTILE.length);
  expect(cycleFailed).toBe(0);
});
