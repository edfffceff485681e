/**
 * A test world whose daemon delivers to one webhook receiver that checks signatures and
 * CloudEvents (test/receiver.ts), with what the delivery tests of failures share: every
 * alert goes out (no inhibition, no platform incident holding it), and a health cycle
 * reads every site within 5 s of the start. Call `afterEach(closeHookedWorlds)`.
 */
import type { StorageConfig } from '../src/config/types.js';
import { merge, startWorld, type World } from './harness.js';
import type { Engine } from './pg.js';
import { startReceiver, TEST_SECRET, type Answer, type Received, type Receiver } from './receiver.js';

const open: Array<{ w: World; hook: Receiver }> = [];

/** A world and its receiver (`answer` decides the replies; default 204); `config` is merged over the shared parts. */
export async function hookedWorld(o: {
  sites: number;
  answer?: (r: Received) => Answer;
  /** The webhook channel's timeout (default 5s). */
  timeout?: string;
  config?: Record<string, unknown>;
  engine?: Engine;
  seed?: number;
}): Promise<{ w: World; hook: Receiver; storage: StorageConfig }> {
  const hook = await startReceiver(o.answer ? { answer: o.answer } : {});
  const w = await startWorld({
    engine: o.engine,
    sim: { sites: o.sites, ...(o.seed === undefined ? {} : { seed: o.seed }) },
    config: merge(
      {
        channels: [{ name: 'hook', type: 'webhook', url: hook.url, secret: TEST_SECRET, timeout: o.timeout ?? '5s' }],
        inhibit: [],
        incidents: { enabled: false },
        // A cycle is spread over half the interval: every site is read within 5 s.
        sources: { health: { every: '10s' } },
      },
      o.config ?? {},
    ),
  });
  open.push({ w, hook });
  return { w, hook, storage: w.storage };
}

/** Close every world and receiver opened by hookedWorld (a test file's afterEach). */
export async function closeHookedWorlds(): Promise<void> {
  for (const { w, hook } of open.splice(0)) {
    await w.close();
    await hook.close();
  }
}
