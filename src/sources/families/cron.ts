/**
 * Cron jobs and their runs. At most 20 runs are kept per job (newest first), so runs are
 * read whenever the job list shows a new run (`last_run_at` / `last_status` moved); the
 * job list itself is cheap and polled every 5 minutes. The interval math is in docs/events.md.
 */
import type { SourceDef } from '../types.js';
import { site } from './define.js';
import { HOUR, MINUTE } from './time.js';

/** Cron jobs of a site; `paused_reason` is the alert. */
export const cronJobsSource = site('cron_jobs', 'cron:read', '/sites/{site_id}/cron-jobs', 5 * MINUTE, {
  key: 'id',
  listField: 'jobs',
  // These move on every run; the runs themselves are the `cron_runs` source.
  volatile: [
    'jobs[].next_runs',
    'jobs[].last_run_at',
    'jobs[].last_status',
    'jobs[].last_exit_code',
    'jobs[].last_duration_seconds',
    'jobs[].run_now_pending',
    'jobs[].updated_at',
    'limits.site_count',
    'limits.account_count',
  ],
});

/** The kept runs of one cron job (detail of a `cron_jobs` record), fetched when it ran. */
export const cronRunsSource: SourceDef = {
  name: 'cron_runs',
  scope: 'cron:read',
  per: 'record',
  parent: 'cron_jobs',
  path: '/sites/{site_id}/cron-jobs/{id}/runs',
  query: { limit: 20 },
  paged: false,
  key: 'id',
  listField: 'runs',
  entity: 'sites/{site_id}/cron_jobs/{id}/runs',
  watch: ['last_run_at', 'last_status'],
  volatile: [],
  defaultEveryMs: 6 * HOUR,
};
