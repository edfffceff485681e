/**
 * Sites, jobs, health, usage and the site tools (spec 1, "Site tools"): the site list and
 * jobs come from World; the per-site `site` family holds what the tools change.
 */
import { LIMITS, PAGING, ticksFor } from '../assumptions.js';
import { displayUtc } from '../time.js';
import type { Family } from '../resources.js';
import { fail, ok, paged, reqStr, requireConfirm, type Ctx } from '../routes.js';
import { HOUR_MS, MINUTE_MS, dateOf, isoIn, msBetween } from './common.js';

export const PHP_VERSIONS = ['7.4', '8.0', '8.1', '8.2', '8.3'] as const;
const APPS = ['cms', 'cms', 'cms', 'static', 'php'] as const;

/** The `site` family: what kind of site it is and what the tools have done to it. */
export interface SiteTools {
  /** cms = application site (admin login, bot check, cmscron); static/php = plain hosting. */
  app: 'cms' | 'static' | 'php';
  php_version: string;
  reinstalling: boolean;
  refreshed_at: string | null;
  /** Timestamps of health rechecks (10 per hour) and temporary unfreezes (3 per day). */
  rechecks: string[];
  unfreezes: string[];
  unfreeze_ends_at: string | null;
}

const tools = (c: Ctx): SiteTools => c.res.site<SiteTools>('site', c.siteId);

function busy(c: Ctx): boolean {
  const t = tools(c);
  return t.reinstalling || (c.world.getUsage(c.siteId)?.busy ?? false) || c.world.getSite(c.siteId)?.state !== 'live';
}

function recent(times: string[], now: Date, windowMs: number): string[] {
  return times.filter((t) => msBetween(t, now) < windowMs);
}

export const sitesFamily: Family<SiteTools> = {
  name: 'site',
  per: 'site',
  seed: ({ rng }) => ({
    app: rng.pick(APPS),
    php_version: rng.pick(PHP_VERSIONS.slice(2)),
    reinstalling: false,
    refreshed_at: null,
    rechecks: [],
    unfreezes: [],
    unfreeze_ends_at: null,
  }),
  actions: {
    /** Timer: the background job of a PHP change is done; the site is live again. */
    php_done: (_s, args, a) => {
      a.world.setSiteState(a.siteId as number, 'live');
      a.world.setJobState(args.job as number, 'done');
    },
    /** Timer: a usage measurement finished. */
    refreshed: (_s, _args, a) => {
      const usage = a.world.getUsage(a.siteId as number);
      if (usage) usage.busy = false;
      a.world.setUsage(a.siteId as number, {});
    },
    /** Timer: reinstall finished. */
    reinstalled: (s, args, a) => {
      s.reinstalling = false;
      a.world.setSiteState(a.siteId as number, 'live');
      a.world.setJobState(args.job as number, 'done');
    },
    /** Timer: a health recheck job finished. */
    rechecked: (_s, args, a) => void a.world.setJobState(args.job as number, 'done'),
    /** Timer: a temporary unfreeze ended; frozen again only if still over a limit. */
    unfreeze_ended: (s, _args, a) => {
      s.unfreeze_ends_at = null;
      const usage = a.world.getUsage(a.siteId as number);
      if (usage && usage.over.length > 0) a.world.setUsage(a.siteId as number, { frozen: true });
    },
  },
  routes: [
    { method: 'GET', path: '/sites', scope: 'sites:read', handler: (c) => paged(c, c.world.sites, { ...PAGING.sites, order: 'asc' }) },
    // Newest first, so a poller reading only the first pages sees recent jobs.
    { method: 'GET', path: '/jobs', scope: 'account:read', handler: (c) => paged(c, c.world.jobs, { ...PAGING.jobs, order: 'desc' }) },
    { method: 'GET', path: '/limits', scope: null, handler: () => ok(LIMITS) },
    { method: 'GET', path: '/sites/{site_id}/health', scope: 'sites:read', handler: (c) => ok(c.world.getHealth(c.siteId)) },
    { method: 'GET', path: '/sites/{site_id}/usage', scope: 'sites:read', handler: (c) => ok(c.world.getUsage(c.siteId)) },
    {
      method: 'PUT',
      path: '/sites/{site_id}/php-version',
      scope: 'sites:write',
      handler: (c) => {
        const version = reqStr(c, 'php_version', { oneOf: PHP_VERSIONS });
        tools(c).php_version = version;
        const state = 'Creating webserver config';
        c.world.setSiteState(c.siteId, state);
        const job = c.world.addJob({ type: 'php_version', site_id: c.siteId, state: 'running' });
        c.res.actCtx('site', c.siteId).later(1, 'php_done', { job: job.id });
        return ok({ php_version: version, state, job_id: job.id });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/usage/refresh',
      scope: 'sites:write',
      handler: (c) => {
        const t = tools(c);
        const usage = c.world.getUsage(c.siteId);
        if (!usage) return fail('not_found', `no site ${c.siteId}`);
        if (usage.busy) fail('conflict', 'a measurement is already running');
        const now = c.world.time();
        if (t.refreshed_at && msBetween(t.refreshed_at, now) < 5 * MINUTE_MS) fail('rate_limited', 'one measurement per site every few minutes');
        t.refreshed_at = now.toISOString();
        usage.busy = true;
        c.res.actCtx('site', c.siteId).later(1, 'refreshed');
        return ok({ busy: true, disk: { used_mib: usage.disk.used_mib } });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/purge-cache',
      scope: 'sites:write',
      handler: (c) => {
        if (c.world.getSite(c.siteId)?.state !== 'live') fail('conflict', 'the site is not live');
        return ok({ purged: true });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/reinstall',
      scope: 'sites:write',
      handler: (c) => {
        requireConfirm(c);
        if (busy(c)) fail('conflict', 'the site is busy, switched off or being deleted');
        tools(c).reinstalling = true;
        c.world.setSiteState(c.siteId, 'reinstalling');
        const job = c.world.addJob({ type: 'reinstall', site_id: c.siteId, state: 'running' });
        c.res.actCtx('site', c.siteId).later(2, 'reinstalled', { job: job.id });
        return ok({ reinstalling: true }, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/admin-login',
      scope: 'sites:login',
      handler: (c) => {
        if (tools(c).app !== 'cms') fail('conflict', 'admin login links exist only for application sites');
        const token = Buffer.from(`${c.siteId}:${c.world.ticks}:${c.world.history.length}`).toString('base64url');
        return ok({ url: `https://${c.world.getSite(c.siteId)?.domain}/login?token=${token}`, expires_in_seconds: 60, single_use: true });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/health/recheck',
      scope: 'sites:write',
      handler: (c) => {
        const t = tools(c);
        const now = c.world.time();
        t.rechecks = recent(t.rechecks, now, HOUR_MS);
        if (t.rechecks.length >= LIMITS.health_rechecks_per_hour) fail('rate_limited', 'at most 10 health rechecks per hour');
        t.rechecks.push(now.toISOString());
        const job = c.world.addJob({ type: 'health_recheck', site_id: c.siteId, state: 'running' });
        c.res.actCtx('site', c.siteId).later(1, 'rechecked', { job: job.id });
        return ok({ started: true, job_id: job.id }, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/health/integrity-check',
      scope: 'sites:write',
      handler: (c) => {
        if (tools(c).app !== 'cms') fail('conflict', 'the integrity check is for application sites');
        const { integrity } = c.world.getHealth(c.siteId)!;
        return ok({ ...integrity, checked: displayUtc(c.world.time()), message: integrity.problems > 0 ? `${integrity.problems} problem(s) found` : 'no problems found' });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/health/repair',
      scope: 'sites:write',
      handler: (c) => {
        if (tools(c).app !== 'cms') fail('conflict', 'repair is for application sites');
        const fixed = c.world.getHealth(c.siteId)!.integrity.findings.map((f) => f.code);
        c.world.setHealth(c.siteId, { problems: 0 });
        return ok({ status: 'ok', fixed, message: fixed.length > 0 ? `repaired ${fixed.length} problem(s); an e-mail lists them` : 'nothing to repair' });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/temporary-unfreeze',
      scope: 'sites:write',
      handler: (c) => {
        const t = tools(c);
        const usage = c.world.getUsage(c.siteId)!;
        if (!usage.frozen) fail('conflict', 'the site is not paused for a usage limit');
        const now = c.world.time();
        t.unfreezes = t.unfreezes.filter((x) => x.slice(0, 10) === dateOf(now));
        if (t.unfreezes.length >= LIMITS.temporary_unfreezes_per_day) fail('rate_limited', '3 temporary unfreezes per site per day');
        t.unfreezes.push(now.toISOString());
        t.unfreeze_ends_at = isoIn(now, 30 * MINUTE_MS);
        c.world.setUsage(c.siteId, { frozen: false });
        c.res.actCtx('site', c.siteId).later(ticksFor(30), 'unfreeze_ended');
        return ok({ active: true, ends_at: t.unfreeze_ends_at, message: 'unfrozen for 30 minutes' });
      },
    },
  ],
};
