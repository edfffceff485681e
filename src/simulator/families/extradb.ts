/**
 * Extra databases (spec 1 "Extra databases"): the account-level `extradb` family. Creating
 * one answers 402 `payment_required` unless the account gets them free (`free`, patchable).
 */
import type { Family } from '../resources.js';
import { bool, fail, findOnSite, invalid, ok, reqStr, requireConfirm, type Ctx } from '../routes.js';
import { DAY_MS, dateOf, isoAgo, isoUtc, label } from './common.js';

const PRICE = '5.00';
const VAT = 21;
const MAX_PER_SITE = 3;

export interface ExtraDb {
  id: number;
  site_id: number;
  site_domain: string;
  name: string;
  label: string;
  state: string;
  state_label: string;
  read_only: boolean;
  size_bytes: number;
  measured_at: string;
  paid_until: string;
  last_paid_day: string;
  in_grace: boolean;
  cancel_at_end: boolean;
  last_backup_at: string;
  restore_pending: boolean;
  error: string;
  created_at: string;
  manage_url: string;
}

export interface ExtradbState {
  /** The account gets extra databases free (else creation answers 402). */
  free: boolean;
  sales_open: boolean;
  databases: ExtraDb[];
  /** Restore points per database id. */
  restore_points: Record<string, { id: string; taken_at: number; bytes: number }[]>;
}

const state = (c: Ctx): ExtradbState => c.res.account<ExtradbState>('extradb');

function dbOf(c: Ctx, s: ExtradbState): ExtraDb {
  return findOnSite(s.databases, c.params.db_id as number, c.siteId, 'extra database');
}

function requireName(c: Ctx, db: ExtraDb): void {
  const name = reqStr(c, 'name');
  if (name !== db.name) invalid('name', `must be exactly ${db.name}`, name);
}

function setState(db: ExtraDb, st: string): void {
  db.state = st;
  db.state_label = label(st);
}

function points(epoch: Date, id: number, bytes: number): { id: string; taken_at: number; bytes: number }[] {
  return [1, 2, 3].map((d) => ({ id: `rp-${id}-${d}`, taken_at: Math.floor((epoch.getTime() - d * DAY_MS) / 1000), bytes }));
}

export const extradbFamily: Family<ExtradbState> = {
  name: 'extradb',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: ExtradbState = { free: false, sales_open: true, databases: [], restore_points: {} };
    const site = world.sites[0];
    if (site) {
      for (const [k, lbl] of [[1, 'shop'], [2, 'stats']] as const) {
        const id = site.id * 100 + k;
        const size = rng.int(5, 400) * 1_048_576;
        s.databases.push({
          id, site_id: site.id, site_domain: site.domain, name: `site${site.id}_${lbl}`, label: lbl, state: 'ready', state_label: 'Ready', read_only: false,
          size_bytes: size, measured_at: isoAgo(epoch, 3 * 3_600_000), paid_until: dateOf(epoch, rng.int(20, 90)), last_paid_day: dateOf(epoch, -rng.int(1, 25)),
          in_grace: false, cancel_at_end: false, last_backup_at: isoAgo(epoch, 20 * 3_600_000), restore_pending: false, error: '',
          created_at: isoAgo(epoch, rng.int(30, 300) * DAY_MS), manage_url: `https://panel.example.com/sites/${site.id}/databases/${id}`,
        });
        s.restore_points[id] = points(epoch, id, size);
      }
    }
    return s;
  },
  onSiteRemoved: (s, siteId) => {
    s.databases = s.databases.filter((d) => d.site_id !== siteId);
  },
  actions: {
    /** A database enters (args.in_grace false: leaves) its grace period (args.db_id, default the first). */
    grace: (s, args, a) => {
      const db = typeof args.db_id === 'number' ? s.databases.find((d) => d.id === args.db_id) : s.databases[0];
      if (!db) return undefined;
      db.in_grace = args.in_grace !== false;
      a.record('grace', { db_id: db.id, in_grace: db.in_grace });
      return db;
    },
    /** Timer: a database is created, removed or restored. */
    created: (s, args) => {
      const db = s.databases.find((d) => d.id === args.id);
      if (db) setState(db, 'ready');
    },
    removed: (s, args) => {
      s.databases = s.databases.filter((d) => d.id !== args.id);
    },
    restored: (s, args) => {
      const db = s.databases.find((d) => d.id === args.id);
      if (db) db.restore_pending = false;
    },
  },
  drift: (s, a) => {
    const db = s.databases.length > 0 ? a.rng.pick(s.databases) : undefined;
    if (!db) return;
    db.size_bytes = Math.max(1_048_576, db.size_bytes + a.rng.int(-2, 8) * 1_048_576);
    db.measured_at = a.iso();
  },
  driftWeight: 1,
  routes: [
    { method: 'GET', path: '/extra-databases', scope: 'extradb:read', handler: (c) => ok(state(c).databases.filter((d) => c.world.getSite(d.site_id))) },
    {
      method: 'GET',
      path: '/sites/{site_id}/extra-databases',
      scope: 'extradb:read',
      handler: (c) => {
        const s = state(c);
        const dbs = s.databases.filter((d) => d.site_id === c.siteId);
        const usage = c.world.getUsage(c.siteId);
        const main = (usage?.db.used_mib ?? 0) * 1_048_576;
        const extra = dbs.reduce((n, d) => n + d.size_bytes, 0);
        const limitMib = usage?.db.limit_mib ?? 1024;
        return ok({
          available: s.sales_open || s.free,
          site_has_database: true,
          sales_open: s.sales_open,
          included_with_staff_account: s.free,
          price_usd_per_month: PRICE,
          vat_percent: VAT,
          months_offered: [1, 3, 12],
          max_per_site: MAX_PER_SITE,
          backups_kept_days: 7,
          removed_copy_kept_days: 30,
          grace_days: 14,
          usage: { main_bytes: main, extra_bytes: extra, used_bytes: main + extra, limit_mib: limitMib, over: main + extra > limitMib * 1_048_576 },
          databases: dbs,
          checkout_url: `https://panel.example.com/checkout/extra-database?site=${c.siteId}`,
        });
      },
    },
    { method: 'GET', path: '/sites/{site_id}/extra-databases/{db_id}', scope: 'extradb:read', handler: (c) => { const s = state(c); const db = dbOf(c, s); return ok({ ...db, restore_points: s.restore_points[db.id] ?? [] }); } },
    {
      method: 'POST',
      path: '/sites/{site_id}/extra-databases',
      scope: 'extradb:write',
      handler: (c) => {
        const s = state(c);
        const lbl = reqStr(c, 'label', { pattern: /^[a-z0-9]{1,16}$/ });
        const name = `site${c.siteId}_${lbl}`;
        if (s.databases.some((d) => d.name === name)) fail('validation_failed', `a database ${name} exists`, { field: 'label', value: lbl });
        if (s.databases.filter((d) => d.site_id === c.siteId).length >= MAX_PER_SITE) fail('validation_failed', `at most ${MAX_PER_SITE} extra databases per site`, { field: 'label' });
        if (!s.free) {
          // Never starts a payment: the reply names where to buy and the price (spec).
          fail('payment_required', 'extra databases must be bought in the browser', { checkout_url: `https://panel.example.com/checkout/extra-database?site=${c.siteId}&label=${lbl}`, price_usd_per_month: PRICE, vat_percent: VAT });
        }
        if (!s.sales_open) fail('unavailable', 'extra databases are not offered at the moment');
        const now = c.world.time();
        const id = c.res.nextId('extradb');
        const db: ExtraDb = {
          id, site_id: c.siteId, site_domain: c.world.getSite(c.siteId)?.domain ?? '', name, label: lbl, state: 'creating', state_label: 'Creating', read_only: false,
          size_bytes: 0, measured_at: isoUtc(now), paid_until: dateOf(now, 30), last_paid_day: dateOf(now), in_grace: false, cancel_at_end: false,
          last_backup_at: isoUtc(now), restore_pending: false, error: '', created_at: isoUtc(now), manage_url: `https://panel.example.com/sites/${c.siteId}/databases/${id}`,
        };
        s.databases.push(db);
        s.restore_points[id] = [];
        c.res.actCtx('extradb', null).later(1, 'created', { id });
        c.world.note('extradb.created', c.siteId, { id });
        return ok(db, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/extra-databases/{db_id}/cancel',
      scope: 'extradb:write',
      handler: (c) => {
        const cancel = bool(c, 'cancel') ?? true;
        requireConfirm(c);
        const db = dbOf(c, state(c));
        db.cancel_at_end = cancel;
        return ok(db);
      },
    },
    {
      method: 'DELETE',
      path: '/sites/{site_id}/extra-databases/{db_id}',
      scope: 'extradb:write',
      handler: (c) => {
        const db = dbOf(c, state(c));
        requireName(c, db);
        requireConfirm(c);
        setState(db, 'deleting');
        c.res.actCtx('extradb', null).later(1, 'removed', { id: db.id });
        c.world.note('extradb.deleted', c.siteId, { id: db.id });
        return ok(db, 202);
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/extra-databases/{db_id}/restore',
      scope: 'extradb:write',
      handler: (c) => {
        const s = state(c);
        const db = dbOf(c, s);
        const backup = reqStr(c, 'backup');
        requireName(c, db);
        requireConfirm(c);
        if (!(s.restore_points[db.id] ?? []).some((p) => p.id === backup)) fail('validation_failed', `backup must be one of this database's restore points`, { field: 'backup', value: backup });
        db.restore_pending = true;
        c.res.actCtx('extradb', null).later(2, 'restored', { id: db.id });
        return ok(db, 202);
      },
    },
  ],
};

