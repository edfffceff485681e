/**
 * Backups (kept by World, which moves started ones Pending → Creating → Ok/Error on tick)
 * and hourly backups (the per-site `hourly` family), spec 1 "Backups" and "Hourly backups".
 */
import { gzipSync } from 'node:zlib';
import { LIMITS, PAGING, ticksFor } from '../assumptions.js';
import type { Family } from '../resources.js';
import { fail, find, invalid, ok, paged, requireConfirm, str, type Ctx } from '../routes.js';
import { BACKUP_STATES, type BackupState } from '../types.js';
import { HOUR_MS, MINUTE_MS, dateOf, isoAgo, isoIn, isoUtc, msBetween, visible } from './common.js';

/** Hourly restore points kept (the spec's `retention` says 48 hours). */
export const HOURLY_POINTS_KEPT = 48;

export interface HourlyPoint {
  id: number;
  taken_at: string;
  kind: string;
  bytes: number;
  database: boolean;
}

export interface HourlyDownload {
  id: number;
  backup_id: number;
  state: 'pending' | 'ready' | 'error';
  bytes: number | null;
  error: string | null;
}

/** Spec "Hourly backups status" plus `_`-prefixed bookkeeping. */
export interface HourlyState {
  active: boolean;
  available: boolean;
  price_per_month: string;
  retention: string;
  paid_until: string | null;
  next_run: string | null;
  last_ok: string | null;
  last_error: string;
  restoring: boolean;
  restore_state: string;
  backups: HourlyPoint[];
  downloads: HourlyDownload[];
  manage_url: string;
  _last_now: string | null;
}

const hourly = (c: Ctx): HourlyState => c.res.site<HourlyState>('hourly', c.siteId);

function backupOf(c: Ctx) {
  return c.world.getBackup(c.siteId, c.params.backup_id as number) ?? fail('not_found', `site ${c.siteId} has no backup ${c.params.backup_id}`);
}

/** Adds an hourly restore point and keeps the newest 48. */
function takePoint(s: HourlyState, at: string, id: number, bytes: number): void {
  s.backups.push({ id, taken_at: at, kind: 'hourly', bytes, database: true });
  while (s.backups.length > HOURLY_POINTS_KEPT) s.backups.shift();
  s.last_ok = at;
  s.last_error = '';
}

export const hourlyFamily: Family<HourlyState> = {
  name: 'hourly',
  per: 'site',
  seed: ({ rng, siteId, epoch }) => {
    const active = rng.chance(0.3);
    const s: HourlyState = {
      active,
      available: true,
      price_per_month: '4.00',
      retention: '48 hours',
      paid_until: active ? dateOf(epoch, rng.int(20, 60)) : null,
      next_run: active ? isoIn(epoch, rng.int(1, 59) * MINUTE_MS) : null,
      last_ok: null,
      last_error: '',
      restoring: false,
      restore_state: '',
      backups: [],
      downloads: [],
      manage_url: `https://panel.example.com/sites/${siteId}/hourly-backups`,
      _last_now: null,
    };
    if (active) for (let h = 6; h >= 1; h--) takePoint(s, isoAgo(epoch, h * HOUR_MS), (siteId as number) * 100 + 7 - h, rng.int(50, 900) * 1_048_576);
    return s;
  },
  actions: {
    /** An hourly run: a new restore point (args.error: the run failed with that message instead). */
    run: (s, args, a) => {
      if (typeof args.error === 'string' && args.error !== '') {
        s.last_error = args.error;
        a.record('failed', { error: args.error });
        return s;
      }
      takePoint(s, a.iso(), a.nextId(), a.rng.int(50, 900) * 1_048_576);
      s.next_run = isoIn(a.now(), HOUR_MS);
      a.record('run', { points: s.backups.length });
      return s;
    },
    /** Timer: a download archive is built. */
    download_ready: (s, args) => {
      const d = s.downloads.find((x) => x.id === args.id);
      if (d && d.state === 'pending') Object.assign(d, { state: 'ready', bytes: 4096 });
    },
    /** Timer: a roll-back finished. */
    restored: (s, args, a) => {
      s.restoring = false;
      s.restore_state = 'done';
      a.world.setJobState(args.job as number, 'done');
    },
  },
  drift: (s, a) => {
    if (!s.active) return;
    if (s.last_error !== '' || !a.rng.chance(0.1)) hourlyFamily.actions!.run!(s, {}, a);
    else hourlyFamily.actions!.run!(s, { error: a.rng.pick(['archive upload timed out', 'database dump failed: lock wait timeout']) }, a);
  },
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/sites/{site_id}/backups',
      scope: 'backups:read',
      handler: (c) => {
        const state = c.query.get('state');
        if (state !== null && !BACKUP_STATES.includes(state as BackupState)) {
          invalid('state', `must be one of ${BACKUP_STATES.join(', ')}`, state);
        }
        return paged(c, c.world.getBackups(c.siteId) ?? [], { ...PAGING.backups, order: 'desc', filter: state === null ? undefined : (b) => b.state === state });
      },
    },
    { method: 'GET', path: '/sites/{site_id}/backups/{backup_id}', scope: 'backups:read', handler: (c) => ok(backupOf(c)) },
    {
      method: 'POST',
      path: '/sites/{site_id}/backups',
      scope: 'backups:write',
      handler: (c) => {
        if (c.world.getSite(c.siteId)?.state !== 'live') fail('conflict', 'the site is busy or switched off');
        return ok(c.world.startBackup(c.siteId, 'Manual').backup, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/backups/{backup_id}/download-link',
      scope: 'backups:read',
      handler: (c) => {
        const b = backupOf(c);
        if (b.state !== 'Ok') fail('conflict', `backup ${b.id} is ${b.state}, not Ok`);
        return ok({ url: `https://downloads.example.com/backups/${c.siteId}/${b.id}.tar.gz?expires=${LIMITS.backup_download_link_seconds}`, expires_in_seconds: LIMITS.backup_download_link_seconds, size_bytes: b.size_bytes });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/backups/{backup_id}/restore',
      scope: 'backups:write',
      handler: (c) => {
        requireConfirm(c);
        const b = backupOf(c);
        if (b.state !== 'Ok') fail('conflict', `backup ${b.id} is ${b.state}, not Ok`);
        const siteState = c.world.getSite(c.siteId)?.state;
        // S22: a site whose plan expired has the state string `expired`.
        if (siteState === 'expired') fail('payment_required', 'the plan of this site expired; renew it first', { checkout_url: `https://panel.example.com/sites/${c.siteId}/renew` });
        if (siteState !== 'live') fail('conflict', 'the site is busy or switched off');
        const job = c.world.addJob({ type: 'backup_restore', site_id: c.siteId, state: 'running' });
        c.res.actCtx('hourly', c.siteId).later(2, 'restored', { job: job.id });
        return ok({ restoring: true, job_id: job.id }, 202);
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/backups/{backup_id}',
      scope: 'backups:write',
      handler: (c) => {
        const b = backupOf(c);
        if (b.is_blueprint) fail('conflict', 'a backup used by a blueprint cannot be deleted');
        if (b.locked) fail('conflict', 'the backup is locked');
        c.world.deleteBackup(c.siteId, b.id);
        return ok({ deleted: true, id: b.id });
      },
    },
    { method: 'GET', path: '/sites/{site_id}/hourly-backups', scope: 'backups:read', handler: (c) => ok({ ...visible(hourly(c)), count: hourly(c).backups.length }) },
    {
      method: 'POST',
      path: '/sites/{site_id}/hourly-backups/now',
      scope: 'backups:write',
      handler: (c) => {
        const s = hourly(c);
        if (!s.active) fail('conflict', 'hourly backups are not active for this site; switch them on at manage_url');
        const now = c.world.time();
        if (s._last_now && msBetween(s._last_now, now) < 10 * MINUTE_MS) fail('rate_limited', 'once per site every 10 minutes');
        s._last_now = isoUtc(now);
        c.res.actCtx('hourly', c.siteId).later(1, 'run');
        return ok({ queued: true, message: 'the backup appears in the status within a minute or two' }, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/hourly-backups/{backup_id}/restore',
      scope: 'backups:write',
      handler: (c) => {
        const what = str(c, 'what', { oneOf: ['both', 'files', 'db'] }) ?? 'both';
        requireConfirm(c);
        const s = hourly(c);
        if (!s.active) fail('unavailable', 'hourly backups are not active for this site');
        find(s.backups, c.params.backup_id as number, 'hourly backup');
        if (s.restoring) fail('conflict', 'a roll-back is already running for this site');
        s.restoring = true;
        s.restore_state = 'queued';
        const job = c.world.addJob({ type: 'hourly_restore', site_id: c.siteId, state: 'queued' });
        c.res.actCtx('hourly', c.siteId).later(ticksFor(10), 'restored', { job: job.id });
        return ok({ queued: true, restore_id: job.id, message: `roll-back of ${what} queued; a backup of the current state is taken first; an e-mail follows` }, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/hourly-backups/{backup_id}/download',
      scope: 'backups:read',
      handler: (c) => {
        const s = hourly(c);
        find(s.backups, c.params.backup_id as number, 'hourly backup');
        const d: HourlyDownload = { id: c.res.nextId('hourly'), backup_id: c.params.backup_id as number, state: 'pending', bytes: null, error: null };
        s.downloads.push(d);
        c.res.actCtx('hourly', c.siteId).later(1, 'download_ready', { id: d.id });
        return ok({ download_id: d.id, state: d.state, message: 'building the archive; kept 24 hours once ready' }, 202);
      },
    },
    {
      method: 'GET',
      path: '/sites/{site_id}/hourly-backups/downloads/{download_id}',
      scope: 'backups:read',
      handler: (c) => {
        const d = find(hourly(c).downloads, c.params.download_id as number, 'download');
        if (d.state !== 'ready') fail('conflict', `the download is ${d.state}, not ready`);
        return { status: 200, body: gzipSync(Buffer.from(`simulated archive of hourly backup ${d.backup_id}\n`)), headers: { 'content-type': 'application/gzip' } };
      },
    },
  ],
};
