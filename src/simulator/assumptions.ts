/**
 * The simulator's answers to what the spec leaves "not shown", in one place (also listed in
 * docs/simulator.md, "Assumptions"). The client side's own assumptions live in
 * src/api/assumptions.ts and docs/api-assumptions.md; where the two meet (error layout and
 * statuses, paging) the simulator follows those.
 */

/** S1: simulated minutes one tick stands for, to turn the spec's durations into ticks (a 30-minute unfreeze = 6 ticks). */
export const MINUTES_PER_TICK = 5;

/** Ticks for a spec duration in minutes (at least one). */
export function ticksFor(minutes: number): number {
  return Math.max(1, Math.ceil(minutes / MINUTES_PER_TICK));
}

/** S2: page sizes of the paged lists (limit default / maximum). Spec-given: backups 50/200, local keywords 50, reports 25. */
export const PAGING = {
  sites: { defaultLimit: 50, maxLimit: 200 },
  jobs: { defaultLimit: 50, maxLimit: 200 },
  backups: { defaultLimit: 50, maxLimit: 200 },
  localKeywords: { defaultLimit: 50, maxLimit: 200 },
  reports: { defaultLimit: 25, maxLimit: 200 },
  footprintReports: { defaultLimit: 25, maxLimit: 200 },
} as const;

/** S3: the DNS provider name that means "on the CDN provider" (security, bot check and `proxied` need it). */
export const CDN_PROVIDER = 'cdn';

/** S4: the body of `GET /limits` (spec: "works with any key"; response not shown). */
export const LIMITS = {
  file_read_bytes: 5 * 1024 * 1024,
  file_write_bytes: 25 * 1024 * 1024,
  folder_entries: 5000,
  cron_jobs_per_site: 5,
  cron_jobs_per_account: 25,
  cron_min_interval_minutes: 5,
  cron_max_run_minutes: 15,
  cron_runs_kept: 20,
  health_rechecks_per_hour: 10,
  temporary_unfreezes_per_day: 3,
  mail_tests_per_10_minutes: 5,
  backup_download_link_seconds: 14_400,
} as const;

/** S5: a cron job that timed out this many times in a row is paused (spec: "timed out 3 times in a row"). */
export const CRON_TIMEOUTS_TO_PAUSE = 3;
export const CRON_PAUSED_REASON = 'timed out 3 times in a row';
/** Spec limits of cron jobs. */
export const CRON_RUNS_KEPT = 20;
export const CRON_RUNS_IN_DETAIL = 10;
export const CRON_PER_SITE = 5;
export const CRON_PER_ACCOUNT = 25;

/** S6: a paused cron job has `enabled` false, `state` `paused`; PATCH `enabled: true` clears both (spec table). */
export const CRON_PAUSED_STATE = 'paused';

/** S7: the job record types the simulator adds to `GET /jobs` (A5 layout). */
export const JOB_TYPES = ['backup', 'backup_restore', 'php_version', 'health_recheck', 'reinstall', 'dns_publish', 'hourly_restore', 'link_edit'] as const;

/** S8: shape of items the spec leaves open: integrity findings {code, message}; `bandwidth` null; `addons` []. */
export const OPAQUE_SHAPES = 'findings {code,message}; bandwidth null; addons []; candidates {id,name,address,url}; autopilot null';

/** S9: every 200 GET carries a weak ETag of its body; `If-None-Match` with it answers 304 (no Last-Modified). The default; `etags: false` (SimulatorOptions) serves a server without validators. */
export const ETAG_ON_GET = true;

/** S10: DELETE of a rank domain / AI brand removes at once (no job); an extra database goes `deleting`, then is gone a tick later; ids are never reused. */
export const IDS_NOT_REUSED = true;

/*
 * The remaining "not shown" answers, kept here so this file is the one list (docs/simulator.md
 * repeats it with the reasons):
 * S11 cron: delete = `DELETE /sites/{id}/cron-jobs/{cron_id}`, run now = `POST .../{cron_id}/run`
 *     (202, run appears next tick, trigger `manual`); switch on/off = PATCH `enabled`.
 * S12 `POST /rank/groups/{id}/keywords`: body `{keywords: string[]}`; 201 `{added: RankKeyword[], skipped: string[], not_added: {count, keywords, limit, plans_url}}`.
 * S13 `PATCH /ai-visibility/prompts/{id}`: 200 the prompt as in brand detail.
 * S14 `POST /reputation/businesses/{id}/profiles`: 200 the platform block of the business detail.
 * S15 footprint external site with no free slot: HTTP 422, code `payment_required`, `details.pack` names the pack.
 * S16 security rules over the plan limit: 409 `conflict` with `details.limit`; changing a rule made outside
 *     this dashboard: 422 `validation_failed` naming `rule_id`.
 * S17 rate limits: usage refresh once per 5 minutes, hourly backup now once per 10 minutes, mail test 5 per
 *     10 minutes, health recheck 10 per hour, reputation search 3 per business per day; all 429 `rate_limited`.
 * S18 `GET /archive` `restores` is the list of Restore records; free site slots = 100 - sites.
 * S19 a PUT mail-sending whose secret contains "invalid" ends in `error` (the provider refuses the key).
 * S22 site states beyond `live`: `installing`, `expired` (plan expired: backup restore answers 402),
 *     `suspended`; files answer 409 in those, writes that need a live site answer 409 otherwise.
 * S20 jobs the simulator adds (JOB_TYPES) finish `done` after a tick or two; `job_id` is added to the
 *     202/200 replies of php-version, health recheck and backup restore so a client can follow them.
 */
