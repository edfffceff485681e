import { OPERATOR_EVENT_NAMES } from './operator.js';
/**
 * The event catalog of PRODUCT.md: names other tools depend on (fixed: more may be added,
 * none renamed). Tests check that a built-in rule raises each (the operator events of
 * events/operator.ts come from the poller, platform incidents and the watchdog) and that
 * docs/events.md documents each.
 */
export const CATALOG: readonly string[] = [
  'site.added',
  'site.removed',
  'site.offline',
  'site.slow',
  'site.integrity_problems',
  'site.frozen',
  'usage.over_limit',
  'usage.disk_high',
  'job.completed',
  'job.failed',
  'backup.completed',
  'backup.failed',
  'hourly_backup.failed',
  'cron.run_failed',
  'cron.job_paused',
  'dns.record_changed',
  'dns.publishing_failed',
  'nameservers.unpointed',
  'dns.zone_expired',
  'security.under_attack',
  'security.rules_changed',
  'botcheck.revoked',
  'extradb.in_grace',
  'mail_sending.failed',
  'plugin_update.held',
  'rank.position_changed',
  'local.map_pack_lost',
  'reputation.poor_review',
  'reputation.rating_dropped',
  'competitor.changed',
  'footprint.finding_new',
  'footprint.score_dropped',
  'seo.metrics_changed',
  'aivis.visibility_changed',
  'archive.restore_finished',
  'report.created',
  'research.credits_low',
  'source.degraded',
  'source.scope_missing',
  'source.mass_change',
  'api.unauthorized',
  'api.unreachable',
  // Contract additions (2026-11-23): time, silence, clients and incidents.
  'platform.incident',
  'hostwatch.watchdog',
  'site.suspended',
  'backup.stale',
  'backup.stuck',
  'hourly_backup.stale',
  'usage.db_high',
  'usage.inodes_high',
  'subscription.expiring',
  'cron.wp_cron_dead',
  'cron.runs_near_limit',
  'mail_sending.fallback',
  'mail_sending.disabled',
  'extradb.read_only',
  'extradb.error',
  'local.profile_changed',
  'local.unclaimed',
  'reputation.brand_term_lost',
  'backlink.lost',
  'report.overdue',
  // Issue 15: the store itself.
  'storage.failing',
];

/**
 * Catalog events hostwatch raises itself, not through a rule file: the operator events
 * (events/operator.ts), platform incidents and the watchdog.
 */
export const NOT_FROM_RULES: readonly string[] = [...OPERATOR_EVENT_NAMES, 'platform.incident', 'hostwatch.watchdog'];

/**
 * Every event name hostwatch can raise with these rules: the catalog, the operator events
 * and the `event:` of each rule (built-in and the user's, enabled or not), sorted, once each.
 * What a type filter, a route's event name or an inhibition is checked against.
 */
export function knownEventNames(rules: ReadonlyArray<{ event: string }>): string[] {
  return [...new Set([...CATALOG, ...OPERATOR_EVENT_NAMES, ...rules.map((r) => r.event)])].sort();
}
