/**
 * The simulator alone in its own process, for benchmarks: the daemon's RSS and CPU are then
 * measured without the simulated API's world, JSON.stringify and HTTP server in the same
 * process (on a 2-core machine the simulator gets the other core).
 *
 *   node dist/bench/sim-child.js --sites 10000 --seed 7 [--log 200000] [--etags 0]
 *
 * Prints one JSON line `{"url": ...}` once listening; the parent drives the world through
 * the /_sim control interface (docs/simulator.md). No request log unless `--log N` asks for
 * one (bench/requests.ts counts requests), no ticker: the world changes only when the
 * benchmark says so.
 */
import { startSimulator } from '../src/simulator/index.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v < 0) throw new Error(`--${name} must be a whole number`);
  return v;
}

// --log N keeps the last N request records (GET /_sim/requests), for benchmarks that count requests.
// --etags 0: a server without validators (no ETag, no 304; A10), for the pipeline part's case.
const sim = await startSimulator({ sites: arg('sites', 500), seed: arg('seed', 1), tickMs: false, maxRequests: arg('log', 0), etags: arg('etags', 1) === 1 });
process.stdout.write(`${JSON.stringify({ url: sim.url, pid: process.pid })}\n`);

const stop = (): void => {
  void sim.close().then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
// The parent going away (crash, Ctrl-C) must not leave a simulator running.
process.stdin.on('end', stop);
process.stdin.resume();
