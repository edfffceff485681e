/**
 * Per-site hosting resources of API document 1 (hourly backups, DNS, nameservers, security,
 * bot check, extra-database allowance, e-mail sending, held plugin updates, SEO metrics).
 */
import type { SourceDef } from '../types.js';
import { HOUR, MINUTE } from './time.js';

/** Hourly backups status: `last_error` turning into a new value is the event. */
export const hourlyBackupsSource: SourceDef = {
  name: 'hourly_backups',
  scope: 'backups:read',
  per: 'site',
  path: '/sites/{site_id}/hourly-backups',
  paged: false,
  // These move every hour by design; restore points and download builds are not changes.
  volatile: ['next_run', 'last_ok', 'count', 'backups', 'downloads'],
  defaultEveryMs: 15 * MINUTE,
};

/** DNS records of a site, one record per event subject. */
export const dnsSource: SourceDef = {
  name: 'dns',
  scope: 'dns:read',
  per: 'site',
  path: '/sites/{site_id}/dns',
  paged: false,
  key: 'id',
  listField: 'records',
  volatile: ['records[].updated_at', 'publishing.last_synced_at'],
  defaultEveryMs: 15 * MINUTE,
};

/** The publishing state of the same DNS reply, as one whole object (a view: no extra request). */
export const dnsPublishingSource: SourceDef = {
  name: 'dns_publishing',
  scope: 'dns:read',
  per: 'site',
  from: 'dns',
  path: '',
  paged: false,
  entity: 'sites/{site_id}/dns_publishing',
  // The records are the `dns` source's business; here only `publishing` counts.
  volatile: ['records', 'publishing.last_synced_at'],
  defaultEveryMs: 15 * MINUTE,
};

/** Nameserver status (checked daily upstream). */
export const nameserversSource: SourceDef = {
  name: 'nameservers',
  scope: 'dns:read',
  per: 'site',
  path: '/sites/{site_id}/nameservers',
  paged: false,
  volatile: ['checked_at'],
  defaultEveryMs: HOUR,
};

/** Site security settings; a site not on the CDN answers 409, which means "not applicable". */
export const securitySource: SourceDef = {
  name: 'security',
  scope: 'security:read',
  per: 'site',
  path: '/sites/{site_id}/security',
  paged: false,
  // The rules have their own view (security_rules); form metadata is static text.
  volatile: ['rules', 'fields', 'ratelimit_fields', 'actions', 'auto_off_choices'],
  notApplicable: ['conflict'],
  defaultEveryMs: 10 * MINUTE,
};

/** Firewall and rate-limit rules of the same security reply, one record per rule. */
export const securityRulesSource: SourceDef = {
  name: 'security_rules',
  scope: 'security:read',
  per: 'site',
  from: 'security',
  path: '',
  paged: false,
  key: 'id',
  listField: ['rules.http_request_firewall_custom', 'rules.http_ratelimit'],
  entity: 'sites/{site_id}/security_rules',
  volatile: ['under_attack', 'bot_protection', 'fields', 'ratelimit_fields', 'actions', 'auto_off_choices', 'changes_paused', 'rules.status'],
  notApplicable: ['conflict'],
  defaultEveryMs: 10 * MINUTE,
};

/** Bot check status; only CMS sites on the CDN can use it, others may answer 409. */
export const botcheckSource: SourceDef = {
  name: 'botcheck',
  scope: 'botcheck:read',
  per: 'site',
  path: '/sites/{site_id}/botcheck',
  paged: false,
  // Display strings that move on every verification, and static option lists.
  volatile: ['verified_at', 'modes', 'all_forms'],
  notApplicable: ['conflict'],
  defaultEveryMs: HOUR,
};

/** The site's extra-database allowance (price, limits, usage). */
export const siteExtraDbSource: SourceDef = {
  name: 'site_extradb',
  scope: 'extradb:read',
  per: 'site',
  path: '/sites/{site_id}/extra-databases',
  paged: false,
  volatile: ['usage.main_bytes', 'usage.extra_bytes', 'usage.used_bytes', 'databases[].size_bytes', 'databases[].measured_at', 'databases[].last_backup_at'],
  defaultEveryMs: 6 * HOUR,
};

/** Website e-mail sending settings and state. */
export const mailSendingSource: SourceDef = {
  name: 'mail_sending',
  scope: 'sites:read',
  per: 'site',
  path: '/sites/{site_id}/mail-sending',
  paged: false,
  volatile: ['last_send'],
  defaultEveryMs: 30 * MINUTE,
};

/** SEO metrics of a site; only the latest reading is read (`limit=1`) and compared. */
export const seoMetricsSource: SourceDef = {
  name: 'seo_metrics',
  scope: 'sites:read',
  per: 'site',
  path: '/sites/{site_id}/seo-metrics',
  paged: false,
  query: { limit: 1 },
  volatile: ['history'],
  defaultEveryMs: 12 * HOUR,
};

/**
 * Held plugin updates of one site. Off by default: the account list (`plugin_updates`)
 * holds the same records for every site in one request.
 */
export const sitePluginUpdatesSource: SourceDef = {
  name: 'site_plugin_updates',
  scope: 'updates:read',
  per: 'site',
  path: '/sites/{site_id}/plugin-updates/held',
  paged: false,
  key: 'id',
  volatile: ['[].last_seen'],
  defaultEnabled: false,
  defaultEveryMs: HOUR,
};

/** Extra databases of every site (account list); `in_grace` is the alert. */
export const extraDatabasesSource: SourceDef = {
  name: 'extra_databases',
  scope: 'extradb:read',
  per: 'account',
  path: '/extra-databases',
  paged: false,
  key: 'id',
  siteField: 'site_id',
  entity: 'extra-databases',
  volatile: ['[].size_bytes', '[].measured_at', '[].last_backup_at'],
  defaultEveryMs: HOUR,
};

/** Held plugin updates of every site (account list). */
export const pluginUpdatesSource: SourceDef = {
  name: 'plugin_updates',
  scope: 'updates:read',
  per: 'account',
  path: '/plugin-updates/held',
  paged: false,
  key: 'id',
  siteField: 'site_id',
  entity: 'plugin-updates',
  volatile: ['[].last_seen'],
  defaultEveryMs: 30 * MINUTE,
};
