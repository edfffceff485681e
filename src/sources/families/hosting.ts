/**
 * Per-site hosting resources of API document 1 (hourly backups, DNS, nameservers, security,
 * bot check, extra-database allowance, e-mail sending, held plugin updates, SEO metrics).
 */
import { list, site, view } from './define.js';
import { HOUR, MINUTE } from './time.js';

/**
 * Hourly backups status: `last_error` turning into a new value is the event; `last_ok`
 * growing old is `hourly_backup.stale`, `paid_until` coming close `subscription.expiring`.
 */
export const hourlyBackupsSource = site('hourly_backups', 'backups:read', '/sites/{site_id}/hourly-backups', 15 * MINUTE, {
  // These move every hour by design; restore points and download builds are not changes.
  // `last_ok` is not volatile although it moves every hour: hourly_backup.stale reads it on
  // the stored snapshot as time passes, so the stored one must be the latest (a snapshot
  // version an hour for sites with hourly backups on).
  volatile: ['next_run', 'count', 'backups', 'downloads'],
  types: { active: 'boolean' },
});

/** DNS records of a site, one record per event subject. */
export const dnsSource = site('dns', 'dns:read', '/sites/{site_id}/dns', 15 * MINUTE, {
  key: 'id',
  listField: 'records',
  volatile: ['records[].updated_at', 'publishing.last_synced_at'],
});

/** The publishing state of the same DNS reply, as one whole object (a view: no extra request). */
export const dnsPublishingSource = view('dns_publishing', dnsSource, 'sites/{site_id}/dns_publishing', {
  // The records are the `dns` source's business; here only `publishing` counts.
  volatile: ['records', 'publishing.last_synced_at'],
});

/** Nameserver status (checked daily upstream). */
export const nameserversSource = site('nameservers', 'dns:read', '/sites/{site_id}/nameservers', HOUR, {
  volatile: ['checked_at'],
  types: { pointed: 'boolean', zone_expired: 'boolean' },
});

/** Site security settings; a site not on the CDN answers 409, which means "not applicable". */
export const securitySource = site('security', 'security:read', '/sites/{site_id}/security', 10 * MINUTE, {
  // The rules have their own view (security_rules); form metadata is static text.
  volatile: ['rules', 'fields', 'ratelimit_fields', 'actions', 'auto_off_choices'],
  notApplicable: ['conflict'],
  types: { 'under_attack.on': 'boolean' },
});

/** Firewall and rate-limit rules of the same security reply, one record per rule. */
export const securityRulesSource = view('security_rules', securitySource, 'sites/{site_id}/security_rules', {
  key: 'id',
  listField: ['rules.http_request_firewall_custom', 'rules.http_ratelimit'],
  volatile: ['under_attack', 'bot_protection', 'fields', 'ratelimit_fields', 'actions', 'auto_off_choices', 'changes_paused', 'rules.status'],
  notApplicable: ['conflict'],
});

/** Bot check status; only CMS sites on the CDN can use it, others may answer 409. */
export const botcheckSource = site('botcheck', 'botcheck:read', '/sites/{site_id}/botcheck', HOUR, {
  // Display strings that move on every verification, and static option lists.
  volatile: ['verified_at', 'modes', 'all_forms'],
  notApplicable: ['conflict'],
  types: { revoked: 'boolean' },
});

/** The site's extra-database allowance (price, limits, usage). */
export const siteExtraDbSource = site('site_extradb', 'extradb:read', '/sites/{site_id}/extra-databases', 6 * HOUR, {
  volatile: ['usage.main_bytes', 'usage.extra_bytes', 'usage.used_bytes', 'databases[].size_bytes', 'databases[].measured_at', 'databases[].last_backup_at'],
});

/** Website e-mail sending settings and state. */
export const mailSendingSource = site('mail_sending', 'sites:read', '/sites/{site_id}/mail-sending', 30 * MINUTE, {
  volatile: ['last_send'],
  types: { state: 'string', route: 'string' },
});

/** SEO metrics of a site; only the latest reading is read (`limit=1`) and compared. */
export const seoMetricsSource = site('seo_metrics', 'sites:read', '/sites/{site_id}/seo-metrics', 12 * HOUR, {
  query: { limit: 1 },
  volatile: ['history'],
});

/**
 * Held plugin updates of one site. Off by default: the account list (`plugin_updates`)
 * holds the same records for every site in one request.
 */
export const sitePluginUpdatesSource = site('site_plugin_updates', 'updates:read', '/sites/{site_id}/plugin-updates/held', HOUR, {
  key: 'id',
  volatile: ['[].last_seen'],
  defaultEnabled: false,
  types: { state: 'string' },
});

/** Extra databases of every site (account list); `in_grace` is the alert. */
export const extraDatabasesSource = list('extra_databases', 'extradb:read', '/extra-databases', HOUR, {
  siteField: 'site_id',
  volatile: ['[].size_bytes', '[].measured_at', '[].last_backup_at'],
  types: { in_grace: 'boolean', cancel_at_end: 'boolean', read_only: 'boolean' },
});

/** Held plugin updates of every site (account list). */
export const pluginUpdatesSource = list('plugin_updates', 'updates:read', '/plugin-updates/held', 30 * MINUTE, {
  siteField: 'site_id',
  entity: 'plugin-updates',
  volatile: ['[].last_seen'],
  types: { state: 'string' },
});
