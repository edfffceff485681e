/**
 * The Hosting Control API simulator: a real loopback HTTP server over a seeded, drifting
 * in-memory world, with fault injection. Used by `hostwatch demo`, `hostwatch simulate`,
 * the tests and the benchmarks.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ETAG_ON_GET } from './assumptions.js';
import { Api, type KeyTable } from './api.js';
import type { RequestRecord } from './control.js';
import { Faults } from './faults.js';
import { createListener } from './server.js';
import { World } from './world.js';

export { Api, hasScope, type KeyTable } from './api.js';
export type { RequestRecord } from './control.js';
export { Faults, FAULT_KINDS, type ActiveFault, type FaultKind, type FaultSpec } from './faults.js';
export { mulberry32, Random } from './random.js';
export { Resources, type Family, type PatchOp } from './resources.js';
export * as simulatorAssumptions from './assumptions.js';
export * from './types.js';
export { MAX_BACKUPS_PER_SITE, MAX_HISTORY, MAX_JOBS, SimulatorError, World, type HealthChange, type UsageChange, type WorldOptions } from './world.js';

export interface SimulatorOptions {
  /** Default 1; the world is deterministic given the seed (and `now`). */
  seed?: number;
  /** Default 5. */
  sites?: number;
  /** Default 0 (ephemeral); read the real port back from `Simulator.port`. */
  port?: number;
  /** Default '127.0.0.1'. */
  host?: string;
  /** API key -> scopes ('*' = full access). Default { 'sim-key': '*' }. */
  keys?: KeyTable;
  /** Auto-advance the world every N ms (demo); default false (tests call tick()). */
  tickMs?: number | false;
  /** Clock for every timestamp; default the system clock. Inject a fixed one for reproducible worlds. */
  now?: () => Date;
  /** How many request records to keep, oldest dropped first; default 100,000; 0 records nothing. */
  maxRequests?: number;
  /** Seeded drift of the resource families (DNS refusals, rank moves, reviews, ...) on tick; default true. */
  familyDrift?: boolean;
  /** Each tick moves the clock on by 5 simulated minutes (default false). */
  advanceClock?: boolean;
  /**
   * S9: a 200 GET carries an ETag and a matching If-None-Match answers 304 (default true).
   * False serves a server without validators (A10): no ETag, every GET answered in full.
   */
  etags?: boolean;
}

export interface Simulator {
  /** The base_url, e.g. http://127.0.0.1:43121 (clients append /api/v1). */
  url: string;
  port: number;
  world: World;
  faults: Faults;
  /** Every request outside /_sim, oldest first; `requests.length = 0` clears it. */
  requests: RequestRecord[];
  /** Empties `requests`. */
  clearRequests(): void;
  /** The API's key table (scopes can be changed while running). */
  api: Api;
  /** Advances the world one step. */
  tick(): void;
  /** Stops the ticker, drops open connections and closes the server. */
  close(): Promise<void>;
}

/** Starts a simulator on loopback and resolves once it is listening. */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const now = opts.now ?? (() => new Date());
  const world = new World({ seed: opts.seed ?? 1, sites: opts.sites ?? 5, now, familyDrift: opts.familyDrift, advanceClock: opts.advanceClock });
  const faults = new Faults();
  const requests: RequestRecord[] = [];
  const tick = (): void => world.tick();
  const api = new Api(world, opts.keys ?? { 'sim-key': '*' });
  const listener = createListener({
    world,
    faults,
    requests,
    tick,
    now: () => world.time(),
    api,
    maxRequests: opts.maxRequests ?? 100_000,
    etags: opts.etags ?? ETAG_ON_GET,
  });
  const server = createServer(listener.onRequest);
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const ticker = opts.tickMs ? setInterval(tick, opts.tickMs) : undefined;
  // The ticker alone must not keep a process alive; the server does that while it is open.
  ticker?.unref();

  let closing: Promise<void> | undefined;
  const shutdown = async (): Promise<void> => {
    if (ticker) clearInterval(ticker);
    listener.cancelPending();
    const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    // Keep-alive sockets would otherwise hold close() open for seconds.
    server.closeAllConnections();
    await closed;
  };

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    world,
    faults,
    requests,
    api,
    clearRequests: () => {
      requests.length = 0;
    },
    tick,
    close: () => (closing ??= shutdown()),
  };
}
