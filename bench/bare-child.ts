/**
 * The baseline process of memory.ts: an ApiClient alone (same options as the daemon's, the
 * same pace) fetching + JSON.parse-ing every response of a full cycle — the site list,
 * jobs, and health/usage/backups of every site — in the shape of Scheduler.runAll(), the
 * results dropped. It imports only the client and the source registry, so its RSS is that of
 * "fetch + parse", not of the daemon's modules.
 */
import { ApiClient } from '../src/api/client.js';
import { isTopLevel, jobsSource, pathOf, SOURCES, sitesSource } from '../src/sources/registry.js';
import { isApiError } from '../src/api/errors.js';
import { BENCH_KEY, pool } from './common.js';
import { arg, measured } from './sample.js';

const url = arg('url');
const concurrency = Number(arg('concurrency'));
const cycles = Number(arg('cycles'));
const rps = Number(arg('rps'));

const client = new ApiClient({
  baseUrl: url,
  key: BENCH_KEY,
  timeoutMs: 30_000, // the config default, as the daemon uses it
  maxRequestsPerSecond: rps,
  maxConcurrency: concurrency,
  retries: 1,
  maxPages: 1000,
});
// The per-site sources the daemon schedules by default (details and views ride on them).
const perSite = SOURCES.filter((s) => s.per === 'site' && isTopLevel(s) && s.defaultEnabled !== false);

async function cycle(): Promise<{ polls: number }> {
  const list = (await client.list(sitesSource.path, sitesSource.query, sitesSource.pageSize)) as Array<{ id: number }>;
  const ids = list.map((s) => s.id);
  let requests = 1;
  await Promise.all([
    client.list(jobsSource.path, jobsSource.query, jobsSource.pageSize).then(() => requests++),
    ...perSite.map((def) =>
      pool(ids, concurrency, async (id) => {
        const path = pathOf(def, id);
        // A 409 "not applicable" (security off the CDN) is an answer, as it is for the daemon.
        await (def.paged ? client.list(path, def.query, def.pageSize) : client.get(path, def.query)).catch((e: unknown) => {
          if (!isApiError(e, 'conflict')) throw e;
        });
        requests++;
      }),
    ),
  ]);
  return { polls: requests };
}

await measured('bare', 'idle', 0, async () => ({}));
for (let c = 1; c <= cycles; c++) await measured('bare', 'bare', c, cycle);
await client.close();
process.exit(0);
