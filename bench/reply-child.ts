/**
 * One `poll --once` cycle (app.runOnce()) of a small world in which one reply is huge: the
 * process of memory.ts's big-reply part. The simulator (another process) answers
 * `/sites/1/dns` with `--bytes` bytes, with or without Content-Length (`--chunked yes`).
 * Prints a memory sample (sample.ts) with the poll's outcome for that entity.
 */
// First, before the modules below load: the daemon's heap flags, as the CLI sets them.
import './small-heap.js';
import { createApp } from '../src/main.js';
import { nullStream, tempDir } from './common.js';
import { benchConfig } from './config.js';
import { arg, measured } from './sample.js';

const url = arg('url');
const bytes = Number(arg('bytes'));
const chunked = arg('chunked') === 'yes';
const tmp = tempDir();
const config = benchConfig({ url, dbPath: `${tmp.dir}/reply.db`, rps: 1000 });
const app = await createApp(config, { logDestination: nullStream() });
await measured('daemon', 'idle', 0, async () => ({}));
const res = await fetch(`${url}/_sim/faults`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ path: '^/sites/1/dns$', kind: 'oversize', bytes, chunked }),
});
if (!res.ok) throw new Error(`fault: ${res.status} ${await res.text()}`);
let outcome = '';
app.scheduler.on('cycle:end', (s) => {
  const o = s.outcomes.find((x) => x.entity === 'sites/1/dns');
  if (o) outcome = o.error ? `${o.status} (${o.error.code})` : o.status;
});
await measured('daemon', 'baseline', 1, async () => {
  await app.runOnce();
  return { outcome };
});
await app.stop();
tmp.cleanup();
process.exit(0);
