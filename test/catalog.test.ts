/**
 * Every catalog event of PRODUCT.md, end to end against the simulator: put the world in
 * the before state through /_sim, poll (baseline), make the change, poll: exactly that
 * event with the right subject and data; poll again: nothing.
 *
 * `HOSTWATCH_WRITE_EXAMPLES=1 npx vitest run test/catalog.test.ts` also writes each
 * emitted event into docs/events.md (the examples there are these, never hand-written).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { rulesFor } from '../src/rules/parse.js';
import { SOURCE_NAMES, SOURCES } from '../src/sources/registry.js';
import { CATALOG, NOT_FROM_RULES } from '../src/events/catalog.js';
import { PROFILE_EDIT_FIELDS, SUSPENDED_SITE_STATES } from '../src/api/assumptions.js';
import { packageRoot } from '../src/paths.js';
import { Control } from './catalog-world.js';
import { clockRuleNames, configFrom, names, startWorld, TEST_KEY, type World } from './harness.js';

type Json = Record<string, unknown>;

interface Case {
  /** The catalog name. */
  event: string;
  /** Extra config (e.g. the files source's paths). */
  config?: Json;
  /** Put the world in the before state; may return values the other steps use. */
  before?: (c: Control) => Promise<Json | void>;
  /** The change the next poll must report. */
  change: (c: Control, ctx: Json) => Promise<Json | void>;
  /** The expected subject. */
  subject: (ctx: Json) => string;
  /** Alerts carry status `firing`. */
  alert?: boolean;
  /** Expected site id of the event (null for account-wide records that name no site). */
  site?: number | null;
  /** Further checks of `data`. */
  check?: (e: HostwatchEvent, ctx: Json) => void;
  /**
   * Move the daemon's clock this far before the change poll (a detail's slow schedule).
   * The clock rules are then switched off (quietClock()) unless `rules` says otherwise:
   * the seeded backups' age depends on the time of day, and three hours more can pass 26 h.
   */
  skewMs?: number;
  /** Rule overrides for this case (YAML text of a rule file). */
  rules?: string;
}

const SITE = 1;
const first = <T>(list: T[], what: string): T => {
  if (list.length === 0) throw new Error(`the seeded world has no ${what}`);
  return list[0]!;
};

/** A cron job on a watched site (sites 1-3), from the account-wide cron state. */
async function cronJob(c: Control): Promise<Json> {
  const s = await c.state<{ jobs: { id: number; site_id: number; enabled: boolean }[] }>('cron');
  const job = first(s.jobs.filter((j) => j.site_id <= 3 && j.enabled), 'enabled cron job on sites 1-3');
  await c.set('cron', { [`jobs.${job.id}.paused_reason`]: null });
  return { job: job.id, site: job.site_id };
}

/** A watched business with a confirmed profile, and that profile's platform. */
async function reputationProfile(c: Control): Promise<Json> {
  const s = await c.state<{ businesses: { id: number }[]; profiles: Record<string, Record<string, unknown>> }>('reputation');
  const b = first(s.businesses.filter((x) => Object.keys(s.profiles[x.id] ?? {}).length > 0), 'business with a profile');
  return { business: b.id, platform: Object.keys(s.profiles[b.id]!)[0] };
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** A plain API date `days` from now. */
const dateIn = (days: number): string => new Date(Date.now() + days * DAY).toISOString().slice(0, 10);

/**
 * A rule file that switches off every built-in clock rule but `keep`: a case that moves the
 * daemon's clock on must see only the event it is about (the world's own clock stands still).
 */
function quietClock(...keep: string[]): string {
  return `rules:\n${clockRuleNames().filter((n) => !keep.includes(n)).map((n) => `  - { name: ${n}, enabled: false }\n`).join('')}`;
}

/** Site 1's database size or file count at `share` of its limit. */
async function usageShare(c: Control, figure: 'db' | 'inodes', share: number): Promise<void> {
  const w = await c.world<{ usage: { site_id: number; db: { limit_mib: number }; inodes: { limit: number } }[] }>();
  const u = w.usage.find((x) => x.site_id === SITE)!;
  const limit = figure === 'db' ? u.db.limit_mib : u.inodes.limit;
  await c.usage(SITE, { [figure === 'db' ? 'db_used_mib' : 'inodes_used']: Math.ceil(limit * share) });
}

/** An extra database on a watched site (sites 1-3). */
async function extraDb(c: Control): Promise<Json> {
  const s = await c.state<{ databases: { id: number; site_id: number }[] }>('extradb');
  const db = first(s.databases.filter((d) => d.site_id <= 3), 'extra database on sites 1-3');
  await c.set('extradb', { [`databases.${db.id}.read_only`]: false, [`databases.${db.id}.error`]: '' });
  return { db: db.id, site: db.site_id };
}

/** Site 1's usage record as the simulator holds it. */
async function siteUsage(c: Control): Promise<{ disk: { limit_mib: number } }> {
  const w = await c.world<{ usage: { site_id: number; disk: { limit_mib: number } }[] }>();
  return w.usage.find((x) => x.site_id === SITE)!;
}

/** A site's health, through the control interface. */
const health = (c: Control, change: Json, site = SITE): Promise<unknown> => c.call('POST', `/sites/${site}/health`, change);

/** A job of site 1 that is running. */
async function runningJob(c: Control): Promise<Json> {
  const job = (await c.call('POST', '/jobs', { type: 'restore', state: 'running', site_id: SITE })) as { id: number };
  return { job: job.id };
}

const CASES: Case[] = [
  // The foundation's events: a site's health, usage, backups and jobs, and the site list.
  {
    event: 'site.offline',
    alert: true,
    before: (c) => health(c, { status: 'online', problems: 0 }).then(() => undefined),
    change: (c) => health(c, { status: 'offline' }).then(() => undefined),
    subject: () => `sites/${SITE}/health`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'online.status', before: 'online', after: 'offline' }),
  },
  {
    event: 'site.slow',
    alert: true,
    before: (c) => health(c, { status: 'online', problems: 0 }).then(() => undefined),
    change: (c) => health(c, { status: 'slow' }).then(() => undefined),
    subject: () => `sites/${SITE}/health`,
    site: SITE,
  },
  {
    event: 'site.integrity_problems',
    alert: true,
    before: (c) => health(c, { status: 'online', problems: 0 }).then(() => undefined),
    change: (c) => health(c, { problems: 3 }).then(() => undefined),
    subject: () => `sites/${SITE}/health`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual(expect.objectContaining({ path: 'integrity.problems', before: 0, after: 3 })),
  },
  {
    event: 'site.frozen',
    alert: true,
    before: (c) => c.usage(SITE, { frozen: false, over: [], disk_used_mib: 100 }),
    change: (c) => c.usage(SITE, { frozen: true }),
    subject: () => `sites/${SITE}/usage`,
    site: SITE,
  },
  {
    event: 'usage.over_limit',
    alert: true,
    before: (c) => c.usage(SITE, { frozen: false, over: [], disk_used_mib: 100 }),
    change: (c) => c.usage(SITE, { over: ['traffic'] }),
    subject: () => `sites/${SITE}/usage`,
    site: SITE,
  },
  {
    event: 'usage.disk_high',
    alert: true,
    before: (c) => c.usage(SITE, { frozen: false, over: [], disk_used_mib: 100 }),
    change: async (c) => c.usage(SITE, { disk_used_mib: Math.ceil((await siteUsage(c)).disk.limit_mib * 0.95) }),
    subject: () => `sites/${SITE}/usage`,
    site: SITE,
  },
  {
    event: 'site.added',
    change: async (c) => ({ site: ((await c.call('POST', '/sites', { domain: 'new-shop.example.com', name: 'New shop' })) as { id: number }).id }),
    subject: (ctx) => `sites/${ctx['site']}`,
    check: (e, ctx) => expect(e.data.site_id).toBe(ctx['site']),
  },
  {
    event: 'site.removed',
    before: async (c) => ({ domain: (await c.world<{ sites: { id: number; domain: string }[] }>()).sites.find((x) => x.id === 3)!.domain }),
    change: (c) => c.call('DELETE', '/sites/3').then(() => undefined),
    subject: () => 'sites/3',
    site: 3,
    check: (e, ctx) => expect(e.data.domain).toBe(ctx['domain']),
  },
  {
    event: 'backup.completed',
    change: async (c) => ({ backup: ((await c.call('POST', `/sites/${SITE}/backups`, { state: 'Ok', type: 'Manual' })) as { id: number }).id }),
    subject: (ctx) => `sites/${SITE}/backups/${ctx['backup']}`,
    site: SITE,
  },
  {
    event: 'backup.failed',
    before: async (c) => ({ backup: ((await c.call('POST', `/sites/${SITE}/backups`, { state: 'Creating', type: 'Manual' })) as { id: number }).id }),
    change: (c, ctx) => c.call('POST', `/sites/${SITE}/backups/${ctx['backup']}`, { state: 'Error' }).then(() => undefined),
    subject: (ctx) => `sites/${SITE}/backups/${ctx['backup']}`,
    site: SITE,
  },
  {
    event: 'job.completed',
    before: runningJob,
    change: (c, ctx) => c.call('POST', `/jobs/${ctx['job']}`, { state: 'done' }).then(() => undefined),
    subject: (ctx) => `jobs/${ctx['job']}`,
    site: SITE,
  },
  {
    event: 'job.failed',
    before: runningJob,
    change: (c, ctx) => c.call('POST', `/jobs/${ctx['job']}`, { state: 'failed', error: 'restore failed: the archive is damaged' }).then(() => undefined),
    subject: (ctx) => `jobs/${ctx['job']}`,
    site: SITE,
  },
  {
    event: 'hourly_backup.failed',
    change: (c) => c.act('hourly', 'run', { error: 'disk quota exceeded while copying' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/hourly_backups`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'last_error', before: expect.anything(), after: 'disk quota exceeded while copying' }),
  },
  {
    event: 'cron.run_failed',
    before: cronJob,
    change: async (c, ctx) => {
      const r = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: ctx['job'], status: 'failed' });
      return { run: r.runs[0]!.id };
    },
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}/runs/${ctx['run']}`,
    check: (e, ctx) => {
      expect(e.data.site_id).toBe(ctx['site']);
      expect(e.data.changes).toEqual([{ path: `[id=${ctx['run']}]`, before: null, after: expect.objectContaining({ status: 'failed' }) }]);
    },
  },
  {
    event: 'cron.job_paused',
    alert: true,
    before: cronJob,
    change: (c, ctx) => c.set('cron', { [`jobs.${ctx['job']}.paused_reason`]: 'timed out 3 times in a row' }).then(() => undefined),
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}`,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'paused_reason', before: null, after: 'timed out 3 times in a row' }),
  },
  {
    event: 'dns.record_changed',
    before: async (c) => ({ record: first((await c.state<{ records: { id: number; type: string }[] }>('dns', SITE)).records.filter((r) => r.type === 'A'), 'A record').id }),
    change: (c, ctx) => c.set('dns', { [`records.${ctx['record']}.value`]: '192.0.2.200' }, SITE).then(() => undefined),
    subject: (ctx) => `sites/${SITE}/dns/${ctx['record']}`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'value', before: expect.any(String), after: '192.0.2.200' }),
  },
  {
    event: 'dns.publishing_failed',
    alert: true,
    before: (c) => c.act('dns', 'publish', {}, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'refuse', { error: 'record conflicts with an existing CNAME' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/dns_publishing`,
    site: SITE,
    check: (e) => expect(JSON.stringify(e.data.changes)).toContain('record conflicts with an existing CNAME'),
  },
  {
    event: 'nameservers.unpointed',
    alert: true,
    before: (c) => c.act('dns', 'point', {}, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'unpoint', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/nameservers`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'pointed', before: true, after: false }),
  },
  {
    event: 'dns.zone_expired',
    alert: true,
    before: (c) => c.act('dns', 'expire_zone', { expired: false }, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'expire_zone', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/nameservers`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'zone_expired', before: false, after: true }),
  },
  {
    event: 'security.under_attack',
    alert: true,
    before: async (c) => {
      await c.cdnCms(SITE);
      await c.act('security', 'under_attack', { on: false }, SITE);
    },
    change: (c) => c.act('security', 'under_attack', { on: true }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/security`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'under_attack.on', before: false, after: true }),
  },
  {
    event: 'security.rules_changed',
    before: (c) => c.cdnCms(SITE),
    change: async (c) => ({ rule: (await c.act<{ id: string }>('security', 'external_rule', { name: 'Block a range' }, SITE)).id }),
    subject: (ctx) => `sites/${SITE}/security_rules/${ctx['rule']}`,
    site: SITE,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['rule']}]`, before: null, after: expect.objectContaining({ name: 'Block a range' }) }]),
  },
  {
    event: 'botcheck.revoked',
    alert: true,
    before: async (c) => {
      await c.cdnCms(SITE);
      await c.act('botcheck', 'revoke', { revoked: false }, SITE);
    },
    change: (c) => c.act('botcheck', 'revoke', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/botcheck`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'revoked', before: false, after: true }),
  },
  {
    event: 'extradb.in_grace',
    alert: true,
    before: async (c) => {
      const s = await c.state<{ databases: { id: number; site_id: number }[] }>('extradb');
      const db = first(s.databases.filter((d) => d.site_id <= 3), 'extra database on sites 1-3');
      await c.act('extradb', 'grace', { db_id: db.id, in_grace: false });
      return { db: db.id, site: db.site_id };
    },
    change: (c, ctx) => c.act('extradb', 'grace', { db_id: ctx['db'] }).then(() => undefined),
    subject: (ctx) => `extra-databases/${ctx['db']}`,
    check: (e, ctx) => {
      expect(e.data.site_id).toBe(ctx['site']);
      expect(e.data.changes).toContainEqual({ path: 'in_grace', before: false, after: true });
    },
  },
  {
    event: 'mail_sending.failed',
    alert: true,
    before: (c) => c.set('mail', { state: 'active', last_test: null }, SITE).then(() => undefined),
    change: (c) => c.act('mail', 'fail', { note: 'the provider refused the key' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/mail_sending`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'state', before: 'active', after: 'error' }),
  },
  {
    event: 'plugin_update.held',
    change: async (c) => ({ hold: (await c.act<{ id: number }>('updates', 'hold', { site_id: SITE })).id }),
    subject: (ctx) => `plugin-updates/${ctx['hold']}`,
    site: SITE,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['hold']}]`, before: null, after: expect.objectContaining({ state: 'holding', site_id: SITE }) }]),
  },
  {
    event: 'file.changed',
    config: { sources: { files: { paths: ['.htaccess'] } } },
    change: (c) => c.act('files', 'touch', { path: '.htaccess', content: 'Deny from all\n', mode: '600' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/files/.htaccess`,
    site: SITE,
    check: (e) => {
      expect(e.data.changes).toContainEqual({ path: 'mode', before: '644', after: '600' });
      expect(e.data.changes.map((x) => x.path)).toEqual(expect.arrayContaining(['size', 'modified']));
    },
  },
  {
    event: 'rank.position_changed',
    before: async (c) => {
      const s = await c.state<{ keywords: { id: number; domain_id: number; active: boolean }[] }>('rank');
      const k = first(s.keywords.filter((x) => x.active), 'active rank keyword');
      await c.act('rank', 'move', { keyword_id: k.id, position: 14 });
      return { keyword: k.id, domain: k.domain_id };
    },
    change: (c, ctx) => c.act('rank', 'move', { keyword_id: ctx['keyword'], position: 8 }).then(() => undefined),
    subject: (ctx) => `rank/domains/${ctx['domain']}/keywords/${ctx['keyword']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'position', before: 14, after: 8 }),
  },
  {
    event: 'local.map_pack_lost',
    before: async (c) => {
      const s = await c.state<{ keywords: { id: number }[] }>('local');
      const k = first(s.keywords, 'local keyword');
      await c.act('local', 'move', { keyword_id: k.id, map_position: 2 });
      return { keyword: k.id };
    },
    change: (c, ctx) => c.act('local', 'move', { keyword_id: ctx['keyword'], map_position: 6 }).then(() => undefined),
    subject: (ctx) => `local/keywords/${ctx['keyword']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'map_position', before: 2, after: 6 }),
  },
  {
    event: 'reputation.poor_review',
    // A new 1-star review also lowers the profile's average: that event has its own case.
    rules: 'rules:\n  - { name: reputation-rating-dropped, enabled: false }\n',
    before: reputationProfile,
    change: async (c, ctx) => {
      const r = await c.act<{ url: string }>('reputation', 'review', { business_id: ctx['business'], platform: ctx['platform'], rating: 1 });
      return { url: r.url };
    },
    // The review's url is its key, as it is (a subject is a name, not an address).
    subject: (ctx) => `reputation/businesses/${ctx['business']}/reviews/${ctx['url']}`,
    site: null,
    check: (e, ctx) =>
      expect(e.data.changes).toEqual([{ path: `[url=${ctx['url']}]`, before: null, after: expect.objectContaining({ rating: 1, poor: true, replied: false }) }]),
  },
  {
    event: 'reputation.rating_dropped',
    before: reputationProfile,
    // A replied 1-star review: the average drops, the business list does not move, so the
    // slow schedule of the detail (2 h) is what reads it.
    change: (c, ctx) => c.act('reputation', 'review', { business_id: ctx['business'], platform: ctx['platform'], rating: 1, replied: true }).then(() => undefined),
    skewMs: 3 * 3_600_000,
    subject: (ctx) => `reputation/businesses/${ctx['business']}/profiles/${ctx['platform']}`,
    site: null,
    check: (e) => {
      const rating = e.data.changes.find((x) => x.path === 'profile.rating')!;
      expect(rating.after as number).toBeLessThan(rating.before as number);
    },
  },
  {
    event: 'competitor.changed',
    before: async (c) => {
      const s = await c.state<{ domains: { id: number; keywords: number }[] }>('competitors');
      const d = first(s.domains, 'watched competitor');
      return { watch: d.id, keywords: d.keywords };
    },
    change: (c, ctx) => c.act('competitors', 'move', { watch_id: ctx['watch'], keywords: Number(ctx['keywords']) * 2 + 10 }).then(() => undefined),
    subject: (ctx) => `competitors/domains/${ctx['watch']}`,
    site: null,
    check: (e, ctx) => expect(e.data.changes).toContainEqual({ path: 'keywords', before: ctx['keywords'], after: Number(ctx['keywords']) * 2 + 10 }),
  },
  {
    event: 'footprint.finding_new',
    before: (c) => c.act('footprint', 'report', { drop: ['shared_ip'], score: 80 }).then(() => undefined),
    change: (c) => c.act('footprint', 'report', { add: ['shared_ip'], score: 80 }).then(() => undefined),
    subject: () => 'footprint/latest/findings/shared_ip',
    site: null,
    check: (e) => expect(e.data.changes).toEqual([{ path: '[code=shared_ip]', before: null, after: expect.objectContaining({ owner: 'customer', code: 'shared_ip' }) }]),
  },
  {
    event: 'footprint.score_dropped',
    before: (c) => c.act('footprint', 'report', { score: 90 }).then(() => undefined),
    change: (c) => c.act('footprint', 'report', { score: 70 }).then(() => undefined),
    subject: () => 'footprint',
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'latest.score', before: 90, after: 70 }),
  },
  {
    event: 'seo.metrics_changed',
    before: (c) => c.act('seo', 'reading', { trust_flow: 20, citation_flow: 25, backlinks: 1000, referring_domains: 100 }, SITE).then(() => undefined),
    change: (c) => c.act('seo', 'reading', { trust_flow: 30, citation_flow: 25, backlinks: 1000, referring_domains: 100 }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/seo_metrics`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'latest.trust_flow', before: 20, after: 30 }),
  },
  {
    event: 'aivis.visibility_changed',
    before: async (c) => {
      const s = await c.state<{ brands: { id: number }[] }>('aivis');
      const b = first(s.brands, 'AI visibility brand');
      await c.act('aivis', 'move', { brand_id: b.id, visibility: 20 });
      return { brand: b.id };
    },
    change: (c, ctx) => c.act('aivis', 'move', { brand_id: ctx['brand'], visibility: 40 }).then(() => undefined),
    subject: (ctx) => `ai-visibility/brands/${ctx['brand']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'visibility', before: 20, after: 40 }),
  },
  {
    event: 'archive.restore_finished',
    before: async (c) => {
      const s = await c.state<{ restores: { id: number }[] }>('archive');
      const r = first(s.restores, 'archive restore');
      await c.set('archive', { [`restores.${r.id}.state`]: 'running', [`restores.${r.id}.state_label`]: 'Running', [`restores.${r.id}.running`]: true, [`restores.${r.id}.done`]: false, [`restores.${r.id}.progress_pct`]: 50 });
      return { restore: r.id };
    },
    change: (c, ctx) => c.act('archive', 'finish', { restore_id: ctx['restore'], state: 'done' }).then(() => undefined),
    subject: (ctx) => `archive/restores/${ctx['restore']}`,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'done', before: false, after: true }),
  },
  {
    event: 'report.created',
    change: async (c) => {
      const s = await c.state<{ clients: { id: number }[] }>('reports');
      const r = await c.act<{ id: number }>('reports', 'create', { client_id: first(s.clients, 'report client').id });
      return { report: r.id };
    },
    subject: (ctx) => `client-reports/reports/${ctx['report']}`,
    site: null,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['report']}]`, before: null, after: expect.objectContaining({ id: ctx['report'] }) }]),
  },
  {
    event: 'site.suspended',
    alert: true,
    change: (c) => c.siteState(SITE, 'suspended'),
    subject: () => `sites/${SITE}`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'state', before: 'live', after: 'suspended' }),
  },
  {
    event: 'backup.stale',
    alert: true,
    // Only site 1: every seeded site's newest Ok backup grows old with the clock.
    config: { sites: [SITE] },
    rules: quietClock('backup-stale'),
    // Nothing changes in the world: 27 hours pass, and the stored list is judged again.
    change: async () => undefined,
    skewMs: 27 * HOUR,
    subject: () => `sites/${SITE}/backups`,
    site: SITE,
    check: (e) => {
      expect(e.data.changes).toEqual([]);
      expect(e.data.summary).toMatch(/^No good backup of \S+ in 26 h \(the last Ok one is \d+ h( \d+ min)? old\)$/);
    },
  },
  {
    event: 'backup.stuck',
    alert: true,
    rules: quietClock('backup-stuck'),
    change: async (c) => ({ backup: ((await c.call('POST', `/sites/${SITE}/backups`, { state: 'Pending' })) as { id: number }).id }),
    skewMs: 7 * HOUR,
    subject: (ctx) => `sites/${SITE}/backups/${ctx['backup']}`,
    site: SITE,
    check: (e) => expect(e.data.summary).toMatch(/has been Pending for 7 h/),
  },
  {
    event: 'hourly_backup.stale',
    alert: true,
    rules: quietClock('hourly-backup-stale'),
    before: (c) => c.set('hourly', { active: true, paid_until: dateIn(60), last_ok: new Date(Date.now() - 30 * 60_000).toISOString(), last_error: '' }, SITE).then(() => undefined),
    change: async () => undefined,
    skewMs: 3 * HOUR,
    subject: () => `sites/${SITE}/hourly_backups`,
    site: SITE,
    check: (e) => expect(e.data.changes).toEqual([]),
  },
  {
    event: 'usage.db_high',
    alert: true,
    change: (c) => usageShare(c, 'db', 0.95),
    subject: () => `sites/${SITE}/usage`,
    site: SITE,
    check: (e) => expect(e.data.changes.map((x) => x.path)).toContain('db.used_mib'),
  },
  {
    event: 'usage.inodes_high',
    alert: true,
    change: (c) => usageShare(c, 'inodes', 0.97),
    subject: () => `sites/${SITE}/usage`,
    site: SITE,
    check: (e) => expect(e.data.changes.map((x) => x.path)).toContain('inodes.used'),
  },
  {
    event: 'subscription.expiring',
    alert: true,
    change: (c) => c.set('rank', { 'plan.paid_until': dateIn(10) }).then(() => undefined),
    subject: () => 'rank',
    site: null,
    check: (e) => {
      expect(e.data.changes.map((x) => x.path)).toContain('paid_until');
      expect(e.data.summary).toMatch(/^Rank tracking is paid until \d{4}-\d{2}-\d{2} \(\d+ days\)$/);
    },
  },
  {
    event: 'cron.wp_cron_dead',
    before: async (c) => {
      const ctx = await cronJob(c);
      await c.set('cron', { [`jobs.${ctx['job']}.kind`]: 'cmscron', [`jobs.${ctx['job']}.cms_pseudo_cron_off`]: true });
      return ctx;
    },
    change: (c, ctx) => c.set('cron', { [`jobs.${ctx['job']}.enabled`]: false }).then(() => undefined),
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}`,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'enabled', before: true, after: false }),
  },
  {
    event: 'cron.runs_near_limit',
    before: cronJob,
    change: async (c, ctx) => {
      const r = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: ctx['job'], status: 'ok', duration_seconds: 880 });
      return { run: r.runs[0]!.id };
    },
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}/runs/${ctx['run']}`,
    check: (e) => expect(e.data.changes).toEqual([{ path: expect.stringMatching(/^\[id=/), before: null, after: expect.objectContaining({ status: 'ok', duration_seconds: 880 }) }]),
  },
  {
    event: 'mail_sending.fallback',
    alert: true,
    before: (c) => c.set('mail', { route: 'own', provider: 'keyonly_1', provider_name: 'Key-only provider 1', enabled: true, state: 'active' }, SITE).then(() => undefined),
    change: (c) => c.set('mail', { route: 'ours' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/mail_sending`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'route', before: 'own', after: 'ours' }),
  },
  {
    event: 'mail_sending.disabled',
    alert: true,
    before: (c) => c.set('mail', { route: 'ours', provider: null, enabled: true, state: 'active' }, SITE).then(() => undefined),
    change: (c) => c.set('mail', { enabled: false }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/mail_sending`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'enabled', before: true, after: false }),
  },
  {
    event: 'extradb.read_only',
    alert: true,
    before: extraDb,
    change: (c, ctx) => c.set('extradb', { [`databases.${ctx['db']}.read_only`]: true }).then(() => undefined),
    subject: (ctx) => `extra-databases/${ctx['db']}`,
    check: (e, ctx) => {
      expect(e.data.site_id).toBe(ctx['site']);
      expect(e.data.changes).toContainEqual({ path: 'read_only', before: false, after: true });
    },
  },
  {
    event: 'extradb.error',
    alert: true,
    before: extraDb,
    change: (c, ctx) => c.set('extradb', { [`databases.${ctx['db']}.error`]: 'restore failed: disk full' }).then(() => undefined),
    subject: (ctx) => `extra-databases/${ctx['db']}`,
    check: (e) => expect(e.data.summary).toContain('restore failed: disk full'),
  },
  {
    event: 'local.profile_changed',
    // The edit changes the business in the list, so its detail (with recent_changes) is read again.
    change: (c) => c.act('local', 'edit', { business_id: 1, field: 'phone', to: '+1 555 0199' }).then(() => undefined),
    subject: () => 'local/businesses/1',
    site: null,
    check: (e) => expect(String(e.data['description'])).toContain('phone: '),
  },
  {
    event: 'local.unclaimed',
    alert: true,
    change: (c) => c.set('local', { 'businesses.1.claimed': false }).then(() => undefined),
    subject: () => 'local/businesses/1',
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'claimed', before: true, after: false }),
  },
  {
    event: 'reputation.brand_term_lost',
    // The business list does not move, so the detail's slow schedule (2 h) reads it.
    before: reputationProfile,
    change: (c) => c.set('reputation', { 'brand_terms.1.11.lost': 1 }).then(() => undefined),
    skewMs: 3 * HOUR,
    subject: () => 'reputation/businesses/1/brand_terms/11',
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'lost', before: 0, after: 1 }),
  },
  {
    event: 'backlink.lost',
    before: async (c) => {
      const s = await c.state<{ domains: { id: number; links: { id: number }[] }[] }>('backlinks');
      const d = first(s.domains.filter((x) => x.links.length > 0), 'backlink domain with links');
      return { domain: d.id, link: d.links[0]!.id };
    },
    change: (c, ctx) => c.ops('backlinks', [{ op: 'remove', path: `domains.${ctx['domain']}.links.${ctx['link']}` }]).then(() => undefined),
    subject: (ctx) => `backlink-tracker/${ctx['domain']}/links/${ctx['link']}`,
    site: null,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['link']}]`, before: expect.objectContaining({ id: ctx['link'] }), after: null }]),
  },
  {
    event: 'report.overdue',
    alert: true,
    before: async (c) => ({ client: first((await c.state<{ clients: { id: number }[] }>('reports')).clients, 'report client').id }),
    change: (c, ctx) => c.set('reports', { [`clients.${ctx['client']}.next_report_on`]: dateIn(-2) }).then(() => undefined),
    subject: (ctx) => `client-reports/clients/${ctx['client']}`,
    site: null,
    check: (e) => expect(e.data.changes.map((x) => x.path)).toContain('next_report_on'),
  },
  {
    event: 'research.credits_low',
    alert: true,
    before: async (c) => {
      const s = await c.state<{ keyword_research: { credits: { used: number; limit: number } }; domain_overview: { credits: { used: number; limit: number } } }>('research');
      await c.set('research', { 'keyword_research.credits.used': 0, 'domain_overview.credits.used': 0 });
      return { limit: s.keyword_research.credits.limit };
    },
    change: (c, ctx) => c.act('research', 'use', { tool: 'keyword_research', credits: Math.ceil(Number(ctx['limit']) * 0.95) }).then(() => undefined),
    subject: () => 'research',
    site: null,
    check: (e) => expect(e.data.changes.map((x) => x.path)).toContain('keyword_research.credits.used'),
  },
];

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const examples = new Map<string, HostwatchEvent>();

describe('the built-in rules', () => {
  it('cover every event of the PRODUCT.md catalog, and docs/events.md documents each', () => {
    expect(CATALOG.length).toBeGreaterThan(30);
    const config = configFrom('api: { base_url: https://x.example, key: k }\n', {}, '/tmp');
    const events = new Set(rulesFor(config).map((r) => r.event));
    // Operator events (events/operator.ts), platform incidents and the watchdog are raised by hostwatch itself, not by rules.
    const missing = CATALOG.filter((name) => !events.has(name) && !NOT_FROM_RULES.includes(name));
    expect(missing).toEqual([]);
    const documented = readFileSync(join(packageRoot(), 'docs', 'events.md'), 'utf8');
    expect(CATALOG.filter((name) => !documented.includes(`| \`${name}\` |`))).toEqual([]);
    expect(SOURCE_NAMES.length).toBeGreaterThan(40);
  });
});

describe('every catalog event, end to end against the simulator', () => {
  for (const t of CASES) {
    it(`${t.event}: a baseline poll, the change, then exactly one ${t.event} with its subject and data, then nothing`, async () => {
      world = await startWorld({ config: t.config ?? {} });
      const c = new Control(world.sim);
      await c.still();
      const ctx: Json = { ...((await t.before?.(c)) ?? {}) };
      let rules: string[] = [];
      const ruleText = t.rules ?? (t.skewMs ? quietClock() : undefined);
      if (ruleText) {
        writeFileSync(join(world.dir, 'case-rules.yaml'), ruleText);
        rules = [join(world.dir, 'case-rules.yaml')];
      }
      let skew = 0;
      const app = await world.app({ ...(t.config ?? {}), rules }, { now: () => Date.now() + skew });
      await app.runOnce();
      const baseline = world.events.length;
      Object.assign(ctx, (await t.change(c, ctx)) ?? {});
      skew += t.skewMs ?? 0;
      await app.runOnce();
      const got = world.events.slice(baseline);
      expect(names(got)).toEqual([t.alert ? `${t.event}:firing` : t.event]);
      const e = got[0]!;
      expect(e.type).toBe(`hostwatch.${t.event}`);
      expect(e.subject).toBe(t.subject(ctx));
      expect(e.data.name).toBe(t.event);
      if (t.site !== undefined) expect(e.data.site_id).toBe(t.site);
      // A removed site's domain is the one it had (the case's check says it).
      const simSite = e.data.site_id === null ? undefined : world.sim.world.getSite(e.data.site_id);
      if (simSite) expect(e.data.domain).toBe(simSite.domain);
      expect(e.data.summary).not.toContain(' on sites/'); // the template rendered, not the fallback
      t.check?.(e, ctx);
      examples.set(t.event, e);
      const after = world.events.length;
      await app.runOnce();
      expect(names(world.events.slice(after))).toEqual([]);
    });
  }
});

describe('operator events hostwatch raises itself', () => {
  it('platform.incident: two sites offline with incidents.min_sites 2 make one incident listing both', async () => {
    world = await startWorld({ config: { incidents: { min_sites: 2 } } });
    const c = new Control(world.sim);
    await c.still();
    const app = await world.app();
    await app.runOnce();
    const base = world.events.length;
    world.sim.world.setHealth(1, { status: 'offline' });
    world.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();
    const got = world.events.slice(base);
    expect(names(got)).toEqual(['site.offline:firing', 'site.offline:firing', 'platform.incident:firing']);
    const e = got[2]!;
    expect(e).toMatchObject({ type: 'hostwatch.platform.incident', subject: 'incidents/site.offline', data: { alert: 'site.offline', count: 2, threshold: 2, site_id: null } });
    expect((e.data['sites'] as Array<{ site_id: number }>).map((x) => x.site_id)).toEqual([1, 2]);
    examples.set('platform.incident', e);
  });

  it('api.unauthorized: the key refused in the cycles of two sources is one alert for the whole API', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.api.deleteKey(TEST_KEY);
    await app.runOnce();
    const got = world.events.filter((e) => e.data.name === 'api.unauthorized');
    expect(names(got)).toEqual(['api.unauthorized:firing']);
    expect(got[0]).toMatchObject({ subject: 'api', data: { code: 'unauthorized', site_id: null } });
    examples.set('api.unauthorized', got[0]!);
  });

  it('api.unreachable: no request of two sources\' cycles reaching the panel is one alert for the whole API', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.faults.add({ path: '.*', kind: 'reset' });
    await app.runOnce();
    const got = world.events.filter((e) => e.data.name === 'api.unreachable');
    expect(names(got)).toEqual(['api.unreachable:firing']);
    expect(got[0]).toMatchObject({ subject: 'api', data: { code: 'network', site_id: null } });
    examples.set('api.unreachable', got[0]!);
  });

  it('source.degraded: one endpoint failing three polls in a row while the others answer', async () => {
    world = await startWorld();
    const app = await world.app();
    await app.runOnce();
    world.sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    for (let i = 0; i < 3; i++) await app.runOnce();
    const got = world.events.filter((e) => e.data.name.startsWith('source.') || e.data.name.startsWith('api.'));
    expect(names(got)).toEqual(['source.degraded:firing']);
    expect(got[0]).toMatchObject({ subject: 'sources/jobs', data: { source: 'jobs', failing: 1, site_id: null } });
    examples.set('source.degraded', got[0]!);
  });

  it('source.scope_missing: a key without the scope one source needs', async () => {
    world = await startWorld();
    world.sim.api.setKey(TEST_KEY, [...new Set(SOURCES.map((s) => s.scope))].filter((scope) => scope !== 'account:read'));
    const app = await world.app();
    await app.runOnce();
    const got = world.events.filter((e) => e.data.name === 'source.scope_missing');
    expect(names(got)).toEqual(['source.scope_missing:firing']);
    expect(got[0]).toMatchObject({ subject: 'sources/jobs', data: { source: 'jobs', required: 'account:read' } });
    examples.set('source.scope_missing', got[0]!);
  });

  it('source.mass_change: more change events in one poll than sources.<name>.max_events', async () => {
    world = await startWorld({ config: { sources: { sites: { max_events: 2 } } } });
    const app = await world.app();
    await app.runOnce();
    for (let i = 0; i < 5; i++) world.sim.world.addSite({ domain: `new-${i}.example.com` });
    await app.runOnce();
    const got = world.events.filter((e) => e.data.name === 'source.mass_change');
    expect(names(world.events.filter((e) => e.data.name === 'site.added'))).toEqual(['site.added', 'site.added']);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ subject: 'sites', data: { source: 'sites', total: 5, sent: 2, held: 3, max_events: 2 } });
    examples.set('source.mass_change', got[0]!);
  });

  it('hostwatch.watchdog: with config watchdog, one firing at start', async () => {
    world = await startWorld({ config: { watchdog: { every: '1h' } } });
    const app = await world.app();
    await app.runOnce();
    const dogs = world.events.filter((e) => e.data.name === 'hostwatch.watchdog');
    expect(names(dogs)).toEqual(['hostwatch.watchdog:firing']);
    examples.set('hostwatch.watchdog', dogs[0]!);
  });
});

describe('the assumptions the built-in rules rest on', () => {
  it('are the ones docs/api-assumptions.md and src/api/assumptions.ts write down (A24, A26)', () => {
    const config = configFrom('api: { base_url: https://x.example, key: k }\n', {}, '/tmp');
    const rules = rulesFor(config);
    expect(rules.find((r) => r.name === 'site-suspended')!.params['states']).toEqual(SUSPENDED_SITE_STATES);
    expect(rules.find((r) => r.name === 'local-profile-changed')!.params['fields']).toBe(PROFILE_EDIT_FIELDS);
  });
});

afterAll(() => {
  if (!process.env['HOSTWATCH_WRITE_EXAMPLES'] || examples.size === 0) return;
  const file = join(packageRoot(), 'docs', 'events.md');
  const text = readFileSync(file, 'utf8');
  const start = '<!-- examples:start (written by test/catalog.test.ts; do not edit) -->';
  const end = '<!-- examples:end -->';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < 0) throw new Error('docs/events.md has no examples markers');
  const body = [...examples.keys()]
    .sort()
    .map((name) => `### \`${name}\`\n\n\`\`\`json\n${JSON.stringify(examples.get(name), null, 2)}\n\`\`\`\n`)
    .join('\n');
  writeFileSync(file, `${text.slice(0, i + start.length)}\n\n${body}\n${text.slice(j)}`);
});

describe('thresholds', () => {
  it('are rule params a user file overrides by name (rank min_move 10: a move of 6 places is quiet, 12 is not)', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const s = await c.state<{ keywords: { id: number; active: boolean }[] }>('rank');
    const k = first(s.keywords.filter((x) => x.active), 'active rank keyword');
    await c.act('rank', 'move', { keyword_id: k.id, position: 40 });
    writeFileSync(join(world.dir, 'mine.yaml'), 'rules:\n  - { name: rank-position-changed, params: { min_move: 10 } }\n');
    const app = await world.app({ rules: [join(world.dir, 'mine.yaml')] });
    await app.runOnce();
    const base = world.events.length;
    await c.act('rank', 'move', { keyword_id: k.id, position: 34 });
    await app.runOnce();
    expect(names(world.events.slice(base))).toEqual([]);
    await c.act('rank', 'move', { keyword_id: k.id, position: 22 });
    await app.runOnce();
    expect(names(world.events.slice(base))).toEqual(['rank.position_changed']);
  });
});
