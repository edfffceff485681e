/** What the channel tests share: a world with a test clock and recorded waits, and a look at everything stored. */
import BetterSqlite3 from 'better-sqlite3';
import type { App, AppOptions } from '../../src/main.js';
import { testClock, type TestClock } from '../clock.js';
import { startWorld, type World } from '../harness.js';

export interface ChannelWorld {
  w: World;
  app: App;
  clock: TestClock;
  /** Waits the chat channels' pacing asked for (they do not really sleep). */
  sleeps: number[];
}

/**
 * A simulator world and an app with these channels, a hand-moved clock (or the real one)
 * and recorded pacing waits, every event routed to every channel at once. `config` is
 * merged into the world's base config (routes, delivery, …).
 */
export async function channelWorld(
  channels: Array<Record<string, unknown>>,
  opts: { config?: Record<string, unknown>; app?: AppOptions; realTime?: boolean } = {},
): Promise<ChannelWorld> {
  const w = await startWorld();
  const clock = testClock(opts.realTime ? new Date().toISOString() : undefined);
  const sleeps: number[] = [];
  const timing: AppOptions = opts.realTime ? {} : { now: clock.now, sleep: async (ms) => void sleeps.push(ms) };
  // Groups go at once unless a test says otherwise: group_wait is tested in the routing tests.
  const routes = [{ channels: channels.map((c) => c['name']), group_wait: '0s' }];
  const app = w.app({ channels, routes, delivery: { retry_schedule: ['5s', '5m'] }, ...opts.config }, { consoleWrite: () => undefined, ...timing, ...opts.app });
  return { w, app, clock, sleeps };
}

/** Every row of every table of the world's database, as text: where a leaked secret would be found. */
export function everythingStored(w: World): string {
  const db = new BetterSqlite3(w.dbPath, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>;
    return tables.map((t) => JSON.stringify(db.prepare(`SELECT * FROM "${t.name}"`).all())).join('\n');
  } finally {
    db.close();
  }
}
