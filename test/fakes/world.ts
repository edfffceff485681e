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
  const app = await w.app({ channels, routes, delivery: { retry_schedule: ['5s', '5m'] }, ...opts.config }, { consoleWrite: () => undefined, ...timing, ...opts.app });
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

/** The fakes of the six providers hostwatch added channels for, with the credentials they accept. */
export interface ProviderFakes {
  teams: { url: string };
  discord: { url: string };
  pd: { url: string };
  og: { url: string };
  tg: { url: string; token: string };
  ntfy: { url: string; token: string | null };
  pdKey: string;
  ogKey: string;
  chat: number;
}

/** One channel of each new type, each pointed at its fake (names: teams, discord, pager, genie, tg, ntfy). */
export function providerChannels(f: ProviderFakes): Array<Record<string, unknown>> {
  return [
    { name: 'teams', type: 'teams', url: f.teams.url },
    { name: 'discord', type: 'discord', url: f.discord.url },
    { name: 'pager', type: 'pagerduty', routing_key: f.pdKey, api_url: f.pd.url },
    { name: 'genie', type: 'opsgenie', api_key: f.ogKey, api_url: f.og.url },
    { name: 'tg', type: 'telegram', bot_token: f.tg.token, chat_id: f.chat, api_url: f.tg.url },
    { name: 'ntfy', type: 'ntfy', url: f.ntfy.url, ...(f.ntfy.token ? { token: f.ntfy.token } : {}) },
  ];
}

/** A route that sends every event to every one of these channels at once. */
export function everyChannel(channels: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  return [{ channels: channels.map((c) => c['name']), group_wait: '0s' }];
}
