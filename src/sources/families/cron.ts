/**
 * Cron jobs and their runs. The account has at most 25 cron jobs, and `GET /cron-jobs`
 * lists all of them with their site (A14), so one request every 5 minutes follows every
 * job of every site: a site's own list (`/sites/{id}/cron-jobs`, with its limits and pause
 * state) is read only when the account list says that site's jobs changed, and a job's runs
 * only when the list shows a new run (`last_run_at` / `last_status` moved). The interval
 * math is in docs/events.md.
 */
import type { SourceDef } from '../types.js';
import { list, site } from './define.js';
import { HOUR, MINUTE } from './time.js';

/** Fields of a cron job that move on every run (the runs themselves are `cron_runs`). */
const RUN_FIELDS = ['next_runs', 'last_run_at', 'last_status', 'last_exit_code', 'last_duration_seconds', 'run_now_pending', 'updated_at'];

/** Every cron job of the account, each with its site id and domain: drives the two below. */
export const cronListSource = list('cron_list', 'cron:read', '/cron-jobs', 5 * MINUTE, {
  listField: 'jobs',
  siteField: 'site_id',
  volatile: ['count', 'per_account', ...RUN_FIELDS.map((f) => `jobs[].${f}`)],
});

/**
 * Cron jobs of one site; `paused_reason` is the alert. A detail of the account list, read
 * for a site when its jobs there changed (added, removed, paused, edited), and at least
 * every 6 hours while it has jobs.
 */
export const cronJobsSource = site('cron_jobs', 'cron:read', '/sites/{site_id}/cron-jobs', 6 * HOUR, {
  parent: cronListSource.name,
  key: 'id',
  listField: 'jobs',
  volatile: [...RUN_FIELDS.map((f) => `jobs[].${f}`), 'limits.site_count', 'limits.account_count'],
  types: { kind: 'string', enabled: 'boolean', cms_pseudo_cron_off: 'boolean' },
});

/** The kept runs of one cron job (detail of a `cron_list` record), fetched when it ran. */
export const cronRunsSource: SourceDef = {
  name: 'cron_runs',
  scope: 'cron:read',
  per: 'record',
  parent: cronListSource.name,
  path: '/sites/{site_id}/cron-jobs/{id}/runs',
  query: { limit: 20 },
  paged: false,
  key: 'id',
  listField: 'runs',
  entity: 'sites/{site_id}/cron_jobs/{id}/runs',
  watch: ['last_run_at', 'last_status'],
  volatile: [],
  defaultEveryMs: 6 * HOUR,
  types: { status: 'string' },
};
