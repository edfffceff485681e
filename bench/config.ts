/**
 * Configs for the benchmarked daemon, parsed from YAML the way `hostwatch` parses a user's file.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { parseConfig } from '../src/config/parse.js';
import type { Config } from '../src/config/types.js';
import { CONFIG_SOURCES } from '../src/sources/registry.js';
import { BENCH_KEY, BENCH_SECRET, UNLIMITED_RPS } from './common.js';

/**
 * A Config parsed from YAML exactly as `hostwatch` parses a user's file, then with the rate
 * limit lifted: the config caps it at 1000 rps, which would pace both sides of every
 * comparison and hide the pipeline's own cost.
 */
export function benchConfig(opts: {
  url: string;
  dbPath: string;
  /** A PostgreSQL database to store in instead of the SQLite file `dbPath`. */
  pgUrl?: string;
  webhookUrl?: string;
  concurrency?: number;
  logLevel?: string;
  /** The pace; default unlimited (see above). The memory part runs at 1,000, the most a config allows. */
  rps?: number;
}): Config {
  const written: Record<string, unknown> = {
    name: 'bench',
    api: { base_url: '${SIM_URL}', key: '${API_KEY}', timeout: '30s', retries: 1, max_concurrency: opts.concurrency ?? 4, max_pages: 1000 },
    storage: opts.pgUrl ? { url: '${PG_URL}' } : { path: '${DB}' },
    log: { level: opts.logLevel ?? 'info' },
    delivery: { drain_timeout: '30s' },
  };
  if (opts.webhookUrl) written['channels'] = [{ name: 'hooks', type: 'webhook', url: '${HOOK_URL}', secret: '${HOOK_SECRET}' }];
  const env = { SIM_URL: opts.url, API_KEY: BENCH_KEY, DB: opts.dbPath, PG_URL: opts.pgUrl ?? '', HOOK_URL: opts.webhookUrl ?? '', HOOK_SECRET: BENCH_SECRET };
  const r = parseConfig(stringify(written), join(tmpdir(), 'bench.yaml'), env, CONFIG_SOURCES);
  if (!r.ok) throw new Error(`bench config invalid:\n${r.errors.map((e) => `${e.path}: ${e.message}`).join('\n')}`);
  r.config.api.max_requests_per_second = opts.rps ?? UNLIMITED_RPS;
  return r.config;
}
