/**
 * Requests per site per hour, per source, at the default intervals: what a daemon costs the
 * API's request budget. Full cycles (`runOnce`, what `poll --once` does) against the
 * simulator in its own process, the world drifting between them; every request in the
 * simulator's log is put to the source whose endpoint it is, and a source's requests per
 * cycle × its cycles per hour (its own interval, or for a detail the interval of the source
 * whose cycle reads it) / sites is its cost per site per hour.
 *
 * Two accounts: the seeded one, and a grown one (1,200 client reports and 9,900 jobs,
 * months of history: under the old 50-page cap, so the old poller still reads them whole).
 *
 * It uses only what every build has (createApp, runOnce, the registry, the simulator), so
 * the same compiled script measures an older build for "before" (docs/benchmarks.md).
 */
import { stringify } from 'yaml';
import { parseConfig } from '../src/config/parse.js';
import { createApp } from '../src/main.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { SOURCES } from '../src/sources/registry.js';
import type { SourceDef } from '../src/sources/types.js';
import { BENCH_KEY, nullStream, round, startSimChild, tempDir, UNLIMITED_RPS } from './common.js';

export interface RequestsRow {
  source: string;
  /** Requests per cycle (mean over the measured cycles). */
  perCycle: number;
  /** The interval that sets how often its requests are made, seconds. */
  everyS: number;
  perSitePerHour: number;
}

export interface RequestsResult {
  account: 'seeded' | 'grown';
  sites: number;
  cycles: number;
  rows: RequestsRow[];
  totalPerSitePerHour: number;
  failedPolls: number;
  /** Requests no source claims (should be none). */
  unmatched: number;
}

export interface RequestsOptions {
  sites?: number;
  cycles?: number;
  accounts?: Array<RequestsResult['account']>;
  log?: (line: string) => void;
}

/** The source whose cycles read `s` (its parent's, or its origin's, up to a scheduled one). */
function owner(s: SourceDef): SourceDef {
  let cur = s;
  for (let i = 0; i < 10 && (cur.parent ?? cur.from) !== undefined; i++) {
    const up = SOURCES.find((x) => x.name === (cur.from ?? cur.parent));
    if (!up) break;
    cur = up;
  }
  return cur;
}

/** Endpoint patterns of the sources that make requests of their own, longest first. */
function matchers(): Array<{ def: SourceDef; re: RegExp }> {
  return SOURCES.filter((s) => s.path !== '' && s.from === undefined)
    .map((def) => ({ def, re: new RegExp(`^/api/v1${def.path.replace('{site_id}', '\\d+').replace('{id}', '[^/]+')}$`) }))
    .sort((a, b) => b.def.path.length - a.def.path.length);
}

/** Both accounts, each in its own simulator. */
export async function benchRequests(opts: RequestsOptions = {}): Promise<RequestsResult[]> {
  const out: RequestsResult[] = [];
  for (const account of opts.accounts ?? ['seeded', 'grown']) out.push(await measure(account, opts));
  return out;
}

async function measure(account: RequestsResult['account'], opts: RequestsOptions): Promise<RequestsResult> {
  const sites = opts.sites ?? 1_000;
  const cycles = opts.cycles ?? 3;
  const log = opts.log ?? (() => {});
  const sim = await startSimChild({ sites, log: 400_000 });
  const tmp = tempDir();
  try {
    if (account === 'grown') {
      for (let i = 0; i < 1_200; i++) await sim.control('POST', '/do/reports/create', {});
      for (let i = 0; i < 9_900; i++) await sim.control('POST', '/jobs', { type: 'backup', state: 'done', site_id: 1 + (i % sites) });
    }
    // Defaults everywhere (max_pages 50 included), but for the pace: this counts requests, it does not time them.
    const written = { name: 'requests', api: { base_url: '${SIM_URL}', key: '${API_KEY}' }, storage: { path: '${DB}' }, log: { level: 'warn' } };
    const parsed = parseConfig(stringify(written), 'requests.yaml', { SIM_URL: sim.url, API_KEY: BENCH_KEY, DB: `${tmp.dir}/requests.db` }, { sourceNames: SOURCE_NAMES });
    if (!parsed.ok) throw new Error(`requests config invalid: ${JSON.stringify(parsed.errors)}`);
    parsed.config.api.max_requests_per_second = UNLIMITED_RPS;
    // Awaited: createApp returns a promise since the store became async (issue 11), an app before.
    const app = await createApp(parsed.config, { logDestination: nullStream() });
    let failed = 0;
    try {
      await app.runOnce(); // the baseline, and every detail read once: not the steady state
      await sim.control('DELETE', '/requests');
      for (let c = 0; c < cycles; c++) {
        await sim.tick(10);
        const summaries = await app.scheduler.runAll();
        failed += summaries.reduce((n, s) => n + s.outcomes.filter((o) => o.status === 'failed').length, 0);
        log(`requests (${account}): cycle ${c + 1} of ${cycles}`);
      }
    } finally {
      await app.stop();
    }
    const requests = (await sim.control('GET', '/requests')) as Array<{ path: string }>;
    const match = matchers();
    const counts = new Map<string, number>();
    let unmatched = 0;
    for (const r of requests) {
      const m = match.find((x) => x.re.test(r.path));
      if (!m) {
        unmatched++;
        continue;
      }
      counts.set(m.def.name, (counts.get(m.def.name) ?? 0) + 1);
    }
    const rows: RequestsRow[] = [];
    for (const def of SOURCES) {
      const n = counts.get(def.name);
      if (n === undefined) continue;
      const everyS = owner(def).defaultEveryMs / 1000;
      const perCycle = n / cycles;
      rows.push({ source: def.name, perCycle: round(perCycle, 1), everyS, perSitePerHour: round(((perCycle * 3600) / everyS) / sites, 3) });
    }
    return {
      account,
      sites,
      cycles,
      rows,
      totalPerSitePerHour: round(rows.reduce((a, r) => a + r.perSitePerHour, 0), 2),
      failedPolls: failed,
      unmatched,
    };
  } finally {
    await sim.close();
    tmp.cleanup();
  }
}
