import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify } from 'yaml';
import { parseConfig } from '../src/config/parse.js';
import type { Config } from '../src/config/types.js';
import type { HostwatchEvent } from '../src/events/types.js';
import { createApp, type App, type AppOptions } from '../src/main.js';
import { CONFIG_SOURCES, SOURCE_NAMES } from '../src/sources/registry.js';
import { loadRules } from '../src/rules/parse.js';
import { packageRoot } from '../src/paths.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../src/simulator/index.js';
import type { StorageConfig } from '../src/config/types.js';
import type { Store } from '../src/store/db.js';
import { queryOnce } from './db-reader.js';
import { freshStorage, type Engine } from './pg.js';
import { SqliteStore } from '../src/store/sqlite.js';

/** A temporary folder removed by the returned cleanup. */
export function tempDir(prefix = 'hostwatch-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Parse YAML config text exactly as `hostwatch` does, failing the test on any error. */
export function configFrom(yaml: string, env: Record<string, string>, baseDir: string): Config {
  const r = parseConfig(yaml, join(baseDir, 'config.yaml'), env, { ...CONFIG_SOURCES, baseDir });
  if (!r.ok) throw new Error(`test config invalid:\n${r.errors.map((e) => `${e.line}: ${e.path}: ${e.message}`).join('\n')}`);
  return r.config;
}

/** Collects every log line (JSON) an app writes. */
export class LogCollector extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.lines.push(...chunk.toString().split('\n').filter(Boolean));
    cb();
  }
  get text(): string {
    return this.lines.join('\n');
  }
}

export interface World {
  sim: Simulator;
  dir: string;
  /** The SQLite file (of a SQLite world; see `storage`). */
  dbPath: string;
  /** Where this world's apps store: a SQLite file, or a fresh PostgreSQL database. */
  storage: StorageConfig;
  /** Rows of a query (valid on the world's engine) on a connection of its own. */
  query<T>(sql: string, params?: unknown[]): Promise<T[]>;
  logs: LogCollector;
  /** Events handed to the outbox, in commit order. */
  events: HostwatchEvent[];
  /** The config object (before env substitution) every app of this world starts from. */
  base: Record<string, unknown>;
  /**
   * Build (another) app on the same database, e.g. after a simulated restart. `overrides`
   * is deep-merged into the base config (arrays replace), then written as YAML and parsed
   * like a user's file.
   */
  app(overrides?: Record<string, unknown>, opts?: AppOptions): Promise<App>;
  /** The YAML text an app with these overrides would be built from. */
  yaml(overrides?: Record<string, unknown>): string;
  /** The environment the YAML's ${VAR}s come from (for the CLI run on the world's config). */
  env: Record<string, string>;
  close(): Promise<void>;
}

export const TEST_KEY = 'sim-key-0123456789abcdef';

/** Deep-merge plain objects; arrays and scalars in `b` replace those in `a`. */
export function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const cur = out[k];
    out[k] = isPlain(cur) && isPlain(v) ? merge(cur, v) : v;
  }
  return out;
}

function isPlain(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A simulator and a daemon config pointing at it, with a fresh SQLite file. Only the
 * parts under test are real; nothing is mocked.
 */
export async function startWorld(
  opts: { sim?: SimulatorOptions; config?: Record<string, unknown>; env?: Record<string, string>; engine?: Engine } = {},
): Promise<World> {
  const sim = await startSimulator({ sites: 3, keys: { [TEST_KEY]: '*' }, ...opts.sim });
  const { dir, cleanup } = tempDir();
  const dbPath = join(dir, 'hostwatch.db');
  // A PostgreSQL world writes its password as ${PGPASS}, as a user's config would.
  const pgdb = opts.engine === 'postgres' ? await freshStorage('postgres') : null;
  const pgUrl = pgdb && pgdb.storage.engine === 'postgres' ? new URL(pgdb.storage.url) : null;
  const pgPass = pgUrl ? decodeURIComponent(pgUrl.password) : '';
  if (pgUrl) pgUrl.password = 'PGPASS_HERE';
  const storageText = pgUrl ? { url: pgUrl.toString().replace('PGPASS_HERE', '${PGPASS}') } : { path: '${DB}' };
  const storage: StorageConfig = pgdb ? pgdb.storage : { engine: 'sqlite', path: dbPath };
  const logs = new LogCollector();
  const events: HostwatchEvent[] = [];
  const apps: App[] = [];
  const base = merge(
    {
      name: 'test',
      api: { base_url: '${SIM_URL}', key: '${API_KEY}', timeout: '2s', max_requests_per_second: 1000, retries: 1 },
      storage: storageText,
      delivery: { drain_timeout: '5s' },
      log: { level: 'debug' },
    },
    opts.config ?? {},
  );
  const env = { SIM_URL: sim.url, API_KEY: TEST_KEY, DB: dbPath, PGPASS: pgPass, ...opts.env };
  const world: World = {
    sim,
    dir,
    dbPath,
    storage,
    query: (sql, params) => queryOnce(storage, sql, params),
    logs,
    events,
    base,
    yaml: (overrides = {}) => stringify(merge(base, overrides)),
    env,
    async app(overrides = {}, appOpts = {}) {
      const config = configFrom(world.yaml(overrides), env, dir);
      const app = await createApp(config, {
        logDestination: logs,
        random: () => 0.5,
        ...appOpts,
        onEvents: (e) => {
          events.push(...e);
          appOpts.onEvents?.(e);
        },
      });
      apps.push(app);
      return app;
    },
    async close() {
      await Promise.allSettled(apps.map((a) => a.stop()));
      await sim.close();
      await pgdb?.cleanup();
      cleanup();
    },
  };
  return world;
}

/** The catalog names of events, in order — the usual thing a test compares. */
export function names(events: readonly HostwatchEvent[]): string[] {
  return events.map((e) => (e.data.status ? `${e.data.name}:${e.data.status}` : e.data.name));
}

/** Rows of a query on the world's database, read on a separate read-only connection. */
export function rows<T>(w: { dbPath: string }, sql: string): T[] {
  const db = new BetterSqlite3(w.dbPath, { readonly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

/** The better-sqlite3 connection of a SQLite store (for tests that read SQLite's own counters). */
export function sqliteOf(store: Store): BetterSqlite3.Database {
  if (!(store instanceof SqliteStore)) throw new Error(`expected a SQLite store, got ${store.description}`);
  return store.sqlite;
}

/** Names of the built-in rules that read the clock (`now`, absence): quiet them where a test's clocks disagree. */
export function clockRuleNames(): string[] {
  return loadRules(join(packageRoot(), 'rules'), [], { sourceNames: SOURCE_NAMES })
    .filter((r) => r.clock)
    .map((r) => r.name);
}
