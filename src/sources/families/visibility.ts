/**
 * Account-wide tools of API document 2: rank tracking, local rankings, client reports,
 * reputation, footprint, backlink tracker, archive restore, competitors, AI visibility and
 * research usage. Plan/usage endpoints are whole objects; lists are keyed by `id`; detail
 * endpoints are per-record sources fetched only when their list record moves, or on their
 * slow schedule (`defaultEveryMs`).
 */
import type { SourceDef } from '../types.js';
import { detail, list, plan } from './define.js';
import { DAY, HOUR, MINUTE } from './time.js';

/** A plan endpoint's `active` flag (A27: some plans have none), which subscription-expiring reads. */
const PLAN_TYPES: Partial<SourceDef> = { types: { active: 'boolean' } };

// ---- rank tracking -------------------------------------------------------------------------

export const rankSource = plan('rank', 'rank:read', '/rank', 6 * HOUR, PLAN_TYPES);
export const rankDomainsSource = list('rank_domains', 'rank:read', '/rank/domains', 30 * MINUTE);
/** Every keyword position of a tracked domain (its groups), fetched after a check moved the list. */
export const rankKeywordsSource = detail('rank_keywords', rankDomainsSource, DAY, {
  key: 'id',
  listField: 'groups[].keywords',
  entity: 'rank/domains/{id}/keywords',
  volatile: ['groups[].keywords[].last_checked_at', 'groups[].keywords[].checks', 'last_checked_at'],
});

// ---- local rankings ------------------------------------------------------------------------

export const localSource = plan('local', 'local:read', '/local-rankings', 6 * HOUR, PLAN_TYPES);
export const localBusinessesSource = list('local_businesses', 'local:read', '/local-rankings/businesses', HOUR, {
  entity: 'local/businesses',
  volatile: ['[].last_checked_at'],
  types: { claimed: 'boolean' },
});
/** Business detail with its towns and `recent_changes`. */
export const localBusinessSource = detail('local_business', localBusinessesSource, DAY, {
  path: '/local-rankings/businesses/{id}',
  volatile: ['last_checked_at'],
});
export const localKeywordsSource = list('local_keywords', 'local:read', '/local-rankings/keywords', HOUR, {
  paged: true,
  pageSize: 50,
  entity: 'local/keywords',
  volatile: ['[].last_checked_at'],
});

// ---- client reports ------------------------------------------------------------------------

export const clientReportsSource = plan('client_reports', 'reports:read', '/client-reports', 6 * HOUR, PLAN_TYPES);
export const reportClientsSource = list('report_clients', 'reports:read', '/client-reports/clients', 6 * HOUR);
export const reportsSource = list('reports', 'reports:read', '/client-reports/reports', 30 * MINUTE, {
  paged: true,
  pageSize: 25,
  newestFirst: { keep: 100 },
  entity: 'client-reports/reports',
  volatile: ['[].views'],
});

// ---- reputation ----------------------------------------------------------------------------

export const reputationSource = plan('reputation', 'reputation:read', '/reputation', 6 * HOUR, PLAN_TYPES);
export const reputationBusinessesSource = list('reputation_businesses', 'reputation:read', '/reputation/businesses', 30 * MINUTE);
/** A watched business's profiles, one record per platform (rating, reviews count). */
export const reputationProfilesSource = detail('reputation_profiles', reputationBusinessesSource, 2 * HOUR, {
  key: 'platform',
  listField: 'platforms',
  entity: 'reputation/businesses/{id}/profiles',
  volatile: ['platforms[].history', 'platforms[].reviews', 'platforms[].candidates', 'platforms[].profile.last_read_at', 'brand_terms[].last_checked_at'],
});
/** The reviews of the same business detail, one record per review (keyed by its address). */
export const reputationReviewsSource: SourceDef = {
  ...reputationProfilesSource,
  name: 'reputation_reviews',
  from: 'reputation_profiles',
  path: '',
  key: 'url',
  listField: 'platforms[].reviews',
  entity: 'reputation/businesses/{id}/reviews',
  volatile: ['platforms[].history', 'platforms[].profile', 'platforms[].candidates', 'brand_terms'],
  types: { poor: 'boolean', replied: 'boolean' },
};

/** The brand terms of the same business detail, one record per term (page-one results of yours). */
export const reputationBrandTermsSource: SourceDef = {
  ...reputationProfilesSource,
  name: 'reputation_brand_terms',
  from: 'reputation_profiles',
  path: '',
  key: 'id',
  listField: 'brand_terms',
  entity: 'reputation/businesses/{id}/brand_terms',
  volatile: ['platforms', 'brand_terms[].last_checked_at'],
};

// ---- footprint -----------------------------------------------------------------------------

export const footprintSource = plan('footprint', 'footprint:read', '/footprint', HOUR, PLAN_TYPES);
export const footprintReportsSource = list('footprint_reports', 'footprint:read', '/footprint/reports', HOUR, {
  paged: true,
  pageSize: 25,
  newestFirst: { keep: 100, open: { field: 'state', values: ['queued', 'running'] } },
});
/**
 * The findings of the newest report, one record per finding code. One entity whatever the
 * report id, so a new report is compared with the previous one.
 */
export const footprintFindingsSource = detail('footprint_findings', footprintReportsSource, DAY, {
  pick: 'first',
  key: 'code',
  listField: 'findings',
  entity: 'footprint/latest/findings',
  watch: ['id', 'state'],
  types: { owner: 'string', is_good: 'boolean' },
});

// ---- SEO metrics / backlink tracker --------------------------------------------------------

export const backlinksSource = list('backlinks', 'sites:read', '/backlink-tracker', 6 * HOUR);
export const backlinkSource = detail('backlink', backlinksSource, DAY);
/**
 * The links of one backlink domain's detail, one record per link: a link that goes is
 * `backlink.lost`. (The `found_on` pages are not watched: a site leaving the account takes
 * its posts along, which is site.removed, not a lost link.)
 */
export const backlinkLinksSource: SourceDef = {
  ...backlinkSource,
  name: 'backlink_links',
  from: 'backlink',
  path: '',
  key: 'id',
  listField: 'links',
  entity: 'backlink-tracker/{id}/links',
  volatile: ['found_on'],
};

// ---- archive restore -----------------------------------------------------------------------

/** The archive overview; `restores` is read as the list of Restore records (A12). */
export const archiveSource: SourceDef = {
  name: 'archive',
  scope: 'archive:read',
  per: 'account',
  path: '/archive',
  paged: false,
  key: 'id',
  listField: 'restores',
  entity: 'archive/restores',
  volatile: ['restores[].progress_pct', 'restores[].fetched', 'restores[].missing', 'restores[].failed', 'restores[].archive_mb'],
  defaultEveryMs: 10 * MINUTE,
  types: { done: 'boolean' },
};

// ---- competitors ---------------------------------------------------------------------------

export const competitorsSource = plan('competitors', 'competitors:read', '/competitors', 6 * HOUR, PLAN_TYPES);
export const competitorDomainsSource = list('competitor_domains', 'competitors:read', '/competitors/domains', HOUR, {
  entity: 'competitors/domains',
  volatile: ['[].last_read_at'],
});
export const competitorSource = detail('competitor', competitorDomainsSource, DAY, { volatile: ['last_read_at'] });

// ---- AI visibility -------------------------------------------------------------------------

export const aivisSource = plan('aivis', 'aivis:read', '/ai-visibility', 6 * HOUR, PLAN_TYPES);
export const aivisBrandsSource = list('aivis_brands', 'aivis:read', '/ai-visibility/brands', HOUR, {
  entity: 'ai-visibility/brands',
  volatile: ['[].last_checked_at'],
});
/** Brand detail with its prompts (`prompt_list`). */
export const aivisBrandSource = detail('aivis_brand', aivisBrandsSource, DAY, { volatile: ['last_checked_at', 'trend'] });

// ---- research ------------------------------------------------------------------------------

export const researchSource = plan('research', 'research:read', '/research', HOUR);
