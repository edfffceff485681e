import { cronJobsSource, cronListSource, cronRunsSource } from './families/cron.js';
import { site } from './families/define.js';
import { filesSource } from './families/files.js';
import * as hosting from './families/hosting.js';
import { MINUTE } from './families/time.js';
import * as visibility from './families/visibility.js';
import type { EntityRef, SiteInfo, SourceDef } from './types.js';

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
  types: { state: 'string' },
  // A site id goes into every per-site path (`/sites/-7/health`, `/sites/../cron-jobs`).
  keyShape: { test: (id) => /^[1-9][0-9]{0,15}$/.test(id) && Number.isSafeInteger(Number(id)), what: 'a positive integer' },
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
  defaultEveryMs: 5 * MINUTE,
  types: { state: 'string' },
  // A5: newest first. Running jobs are followed until their end even when newer ones push them down.
  newestFirst: { keep: 200, open: { field: 'state', values: ['queued', 'running', 'pending'] } },
  // Follow running jobs closely; between jobs there is nothing to follow.
  fast: { field: 'state', values: ['queued', 'running', 'pending'], everyMs: 15_000 },
};

/** Site health: online status and application integrity. */
export const healthSource = site('health', 'sites:read', '/sites/{site_id}/health', 5 * MINUTE, {
  // `checked` is a display string that moves on every integrity run without meaning a change.
  volatile: ['integrity.checked'],
  types: { 'online.status': 'string' },
});

/** Site usage: disk, database, inodes, frozen state. Measured every few hours upstream. */
export const usageSource = site('usage', 'sites:read', '/sites/{site_id}/usage', 30 * MINUTE, {
  volatile: ['disk.measured_at', 'busy'],
  types: { state: 'string', frozen: 'boolean', 'disk.over': 'boolean' },
});

/** Backups of a site, newest first (paged, limit up to 200). */
export const backupsSource = site('backups', 'backups:read', '/sites/{site_id}/backups', 15 * MINUTE, {
  paged: true,
  pageSize: 200,
  key: 'id',
  newestFirst: { keep: 200, open: { field: 'state', values: ['Pending', 'Creating', 'Storing'] } },
  types: { state: 'string' },
});

/**
 * Every source hostwatch knows, in the order a full cycle runs them (the site list first).
 * Per-record sources follow their parent; views follow the source they re-read.
 */
export const SOURCES: readonly SourceDef[] = [
  sitesSource,
  jobsSource,
  healthSource,
  usageSource,
  backupsSource,
  hosting.hourlyBackupsSource,
  cronListSource,
  cronJobsSource,
  cronRunsSource,
  hosting.dnsSource,
  hosting.dnsPublishingSource,
  hosting.nameserversSource,
  hosting.securitySource,
  hosting.securityRulesSource,
  hosting.botcheckSource,
  hosting.siteExtraDbSource,
  hosting.mailSendingSource,
  hosting.seoMetricsSource,
  hosting.sitePluginUpdatesSource,
  filesSource,
  hosting.extraDatabasesSource,
  hosting.pluginUpdatesSource,
  visibility.rankSource,
  visibility.rankDomainsSource,
  visibility.rankKeywordsSource,
  visibility.localSource,
  visibility.localBusinessesSource,
  visibility.localBusinessSource,
  visibility.localKeywordsSource,
  visibility.clientReportsSource,
  visibility.reportClientsSource,
  visibility.reportsSource,
  visibility.reputationSource,
  visibility.reputationBusinessesSource,
  visibility.reputationProfilesSource,
  visibility.reputationReviewsSource,
  visibility.reputationBrandTermsSource,
  visibility.footprintSource,
  visibility.footprintReportsSource,
  visibility.footprintFindingsSource,
  visibility.backlinksSource,
  visibility.backlinkSource,
  visibility.backlinkLinksSource,
  visibility.archiveSource,
  visibility.competitorsSource,
  visibility.competitorDomainsSource,
  visibility.competitorSource,
  visibility.aivisSource,
  visibility.aivisBrandsSource,
  visibility.aivisBrandSource,
  visibility.researchSource,
];

/**
 * The sources the scheduler does not run itself (details and views), each with the
 * top-level source whose cycles read it: that one's interval and priority govern it.
 */
export const SOURCE_READ_BY: Readonly<Record<string, string>> = Object.fromEntries(
  SOURCES.filter((s) => !isTopLevel(s)).map((s) => [s.name, ownerOf(s).name]),
);

/** Names of every source, for config and rule validation. */
export const SOURCE_NAMES = SOURCES.map((s) => s.name);

/** The views: sources that re-read another's reply, at its interval (no `every` of their own). */
export const VIEW_NAMES: readonly string[] = SOURCES.filter((s) => s.from !== undefined).map((s) => s.name);

/** What config parsing needs to know of the sources (names; who reads details and views; which are views). */
export const CONFIG_SOURCES = { sourceNames: SOURCE_NAMES, readBy: SOURCE_READ_BY, views: VIEW_NAMES } as const;

/** The top-level source whose cycles read `s` (itself when it is top-level). */
export function ownerOf(s: SourceDef): SourceDef {
  let cur = s;
  for (let guard = 0; !isTopLevel(cur) && guard < 10; guard++) {
    const up = SOURCES.find((x) => x.name === (cur.from ?? cur.parent));
    if (!up) break;
    cur = up;
  }
  return cur;
}

/** Look a source up by its config name. */
export function sourceByName(name: string): SourceDef | undefined {
  return SOURCES.find((s) => s.name === name);
}

/** Detail sources that follow `parent`'s records, one per record or per site (not views). */
export function childrenOf(parent: SourceDef, among: readonly SourceDef[] = SOURCES): SourceDef[] {
  return among.filter((s) => s.parent === parent.name && s.from === undefined);
}

/** Views that re-read what `origin` fetched. */
export function viewsOf(origin: SourceDef, among: readonly SourceDef[] = SOURCES): SourceDef[] {
  return among.filter((s) => s.from === origin.name);
}

/** True for sources the scheduler runs itself (not details driven by a parent, not views). */
export function isTopLevel(s: SourceDef): boolean {
  return s.parent === undefined && s.from === undefined;
}

/**
 * The entity one fetch of `source` refers to: for the account, a site, or (per-record
 * sources) one record of the parent, named by `recordKey`.
 */
export function entityOf(source: SourceDef, site: SiteInfo | null, recordKey?: string): EntityRef {
  const siteId = source.per === 'account' ? null : (site?.id ?? null);
  const template = source.entity ?? (siteId === null ? source.name : `sites/{site_id}/${source.name}`);
  const entity = fill(template, siteId, recordKey);
  return recordKey === undefined ? { source, entity, siteId } : { source, entity, siteId, recordKey };
}

/** The request path of a source for a site (and a parent record, for per-record sources). */
export function pathOf(source: SourceDef, siteId: number | null, recordKey?: string): string {
  return fill(source.path, siteId, recordKey);
}

function fill(template: string, siteId: number | null, recordKey: string | undefined): string {
  let out = template;
  if (siteId !== null) out = out.replace('{site_id}', String(siteId));
  if (recordKey !== undefined) out = out.replace('{id}', encodeURIComponent(recordKey));
  return out;
}
