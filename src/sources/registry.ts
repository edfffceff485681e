import type { EntityRef, SiteInfo, SourceDef } from './types.js';

const MINUTE = 60_000;

/** The site list: everything per-site is driven by it (A4 in docs/api-assumptions.md). */
export const sitesSource: SourceDef = {
  name: 'sites',
  scope: 'sites:read',
  per: 'account',
  path: '/sites',
  paged: true,
  key: 'id',
  siteField: 'id',
  volatile: ['[].updated_at'],
  defaultEveryMs: 10 * MINUTE,
};

/** Account-wide jobs (A5): completed and failed jobs become events. */
export const jobsSource: SourceDef = {
  name: 'jobs',
  scope: 'account:read',
  per: 'account',
  path: '/jobs',
  paged: true,
  key: 'id',
  siteField: 'site_id',
  volatile: ['[].updated_at', '[].progress'],
  defaultEveryMs: 2 * MINUTE,
};

/** Site health: online status and application integrity. */
export const healthSource: SourceDef = {
  name: 'health',
  scope: 'sites:read',
  per: 'site',
  path: '/sites/{site_id}/health',
  paged: false,
  // `checked` is a display string that moves on every integrity run without meaning a change.
  volatile: ['integrity.checked'],
  defaultEveryMs: 5 * MINUTE,
};

/** Site usage: disk, database, inodes, frozen state. Measured every few hours upstream. */
export const usageSource: SourceDef = {
  name: 'usage',
  scope: 'sites:read',
  per: 'site',
  path: '/sites/{site_id}/usage',
  paged: false,
  volatile: ['disk.measured_at', 'busy'],
  defaultEveryMs: 30 * MINUTE,
};

/** Backups of a site, newest first (paged, limit up to 200). */
export const backupsSource: SourceDef = {
  name: 'backups',
  scope: 'backups:read',
  per: 'site',
  path: '/sites/{site_id}/backups',
  paged: true,
  pageSize: 200,
  key: 'id',
  volatile: [],
  defaultEveryMs: 15 * MINUTE,
};

/** Every source hostwatch knows, in the order a full cycle runs them (the site list first). */
export const SOURCES: readonly SourceDef[] = [sitesSource, jobsSource, healthSource, usageSource, backupsSource];

/** Look a source up by its config name. */
export function sourceByName(name: string): SourceDef | undefined {
  return SOURCES.find((s) => s.name === name);
}

/** The entity one fetch of `source` for `site` (or the account) refers to. */
export function entityOf(source: SourceDef, site: SiteInfo | null): EntityRef {
  if (source.per === 'account' || site === null) return { source, entity: source.name, siteId: null };
  return { source, entity: `sites/${site.id}/${source.name}`, siteId: site.id };
}

/** The request path of a source for a site. */
export function pathOf(source: SourceDef, siteId: number | null): string {
  return siteId === null ? source.path : source.path.replace('{site_id}', String(siteId));
}
