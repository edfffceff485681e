/**
 * The daemon process of memory.ts: createApp() on a fresh SQLite file, with a webhook channel
 * to a local receiver (answers 204), the simulator in another process. Each cycle is
 * app.runOnce() (= `hostwatch poll --once`: every source, then deliver what is pending):
 * a baseline cycle, an unchanged cycle (SQLite total_changes() counted), optionally the first
 * cycle after a restart on the same database, then cycles with the world ticking in between.
 * Prints one JSON line per sample (sample.ts).
 */
// First, before the modules below load: the daemon's heap flags, as the CLI sets them.
import './small-heap.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type App } from '../src/main.js';
import type { SqliteStore } from '../src/store/sqlite.js';
import { nullStream, tempDir } from './common.js';
import { benchConfig } from './config.js';
import { arg, measured, type MemorySample } from './sample.js';

const url = arg('url');
const sites = Number(arg('sites'));
const concurrency = Number(arg('concurrency'));
const ticked = Number(arg('ticked-cycles'));
const ticksPerCycle = Number(arg('ticks'));
const restart = arg('restart') === 'yes';
const rps = Number(arg('rps'));

async function tick(): Promise<void> {
  const res = await fetch(`${url}/_sim/tick`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ count: ticksPerCycle }),
  });
  if (!res.ok) throw new Error(`tick: ${res.status}`);
  await res.text();
}

const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(204);
    res.end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
const tmp = tempDir();
const config = benchConfig({ url, dbPath: `${tmp.dir}/memory.db`, concurrency, webhookUrl: hook, rps });
let events = 0;
const build = (): Promise<App> => createApp(config, { logDestination: nullStream(), onEvents: (e) => (events += e.length) });
let app = await build();

const cycle = (a: App) => async (): Promise<Partial<MemorySample>> => {
  // The memory benchmark runs on SQLite (the embedded default), whose counters it reads.
  const sqlite = (a.store as SqliteStore).sqlite;
  const changes = sqlite.prepare('SELECT total_changes()').pluck();
  const startedAt = Date.now();
  const before = changes.get() as number;
  const eventsBefore = events;
  // Counted, not kept: an object per poll (110,000 at 10,000 sites) would be the harness's
  // memory measured as the daemon's.
  let polls = 0;
  let failed = 0;
  const onEnd = (s: { outcomes: Array<{ status: string }> }): void => {
    polls += s.outcomes.length;
    for (const o of s.outcomes) if (o.status === 'failed') failed++;
  };
  a.scheduler.on('cycle:end', onEnd);
  const { pending } = await a.runOnce();
  a.scheduler.off('cycle:end', onEnd);
  if (pending > 0) throw new Error(`${pending} deliveries still pending after the cycle`);
  const dbChanges = (changes.get() as number) - before;
  const snapshotWrites = sqlite.prepare('SELECT count(*) FROM snapshots WHERE changed_at >= ?').pluck().get(startedAt) as number;
  const sourceStateWrites = sqlite
    .prepare("SELECT count(*) FROM poll_state WHERE entity = '' AND last_attempt_at >= ?")
    .pluck()
    .get(startedAt) as number;
  return {
    polls,
    failed,
    events: events - eventsBefore,
    dbChanges,
    snapshotWrites,
    sourceStateWrites,
  };
};

await measured('daemon', 'idle', 0, async () => ({}));
let n = 1;
const first = await measured('daemon', 'baseline', n++, cycle(app));
// At least the site list, jobs and three foundation sources per site; every source adds more.
if ((first.polls ?? 0) < 2 + sites * 3 || first.failed) throw new Error(`baseline cycle: ${first.polls} polls, ${first.failed} failed`);
await measured('daemon', 'unchanged', n++, cycle(app));
if (restart) {
  // A restart: a new app on the same database re-checks alert conditions once.
  await app.stop();
  app = await build();
  await measured('daemon', 'restart', n++, cycle(app));
}
for (let i = 0; i < ticked; i++) {
  await tick();
  await measured('daemon', 'ticked', n++, cycle(app));
}
await app.stop();
const closed = new Promise<void>((resolve) => receiver.close(() => resolve()));
receiver.closeAllConnections();
await closed;
tmp.cleanup();
process.exit(0);
