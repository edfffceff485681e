/**
 * Archive restore (spec 2 "Archive restore"): the account-level `archive` family. A first
 * look-up of a domain is `pending` and ready on the next tick; an ordered restore goes
 * `queued` → `running` (progress) → `done` over ticks (or `failed` via the `finish` action).
 */
import type { Family } from '../resources.js';
import { bool, fail, find, int, invalid, ok, reqStr, str, type Ctx } from '../routes.js';
import { DAY_MS, dateOf, isoAgo } from './common.js';

const OUTPUTS = ['static', 'cms'] as const;
const PAGE_URL = 'https://panel.example.com/archive';

export interface Restore {
  id: number;
  reference: string;
  domain: string;
  day: string;
  output: string;
  target_domain: string;
  target: string;
  site_id: number | null;
  state: string;
  state_label: string;
  pay_status: 'unpaid' | 'paid';
  pay_label: string;
  message: string;
  pages: number;
  assets: number;
  archive_mb: number;
  fetched: number;
  missing: number;
  failed: number;
  progress_pct: number;
  running: boolean;
  done: boolean;
  created_at: string;
}

export interface ArchiveState {
  available: boolean;
  credits: number;
  site_limit: number;
  restores: Restore[];
  lookups: Record<string, { state: 'pending' | 'ready' | 'error'; days: string[]; truncated: boolean; error: string | null }>;
}

const ar = (c: Ctx): ArchiveState => c.res.account<ArchiveState>('archive');

const LABELS: Record<string, string> = { planned: 'Ready to order', queued: 'Queued', running: 'Restoring', done: 'Done', failed: 'Failed' };

function setState(r: Restore, state: string): void {
  r.state = state;
  r.state_label = LABELS[state] ?? state;
  r.running = state === 'running';
  r.done = state === 'done' || state === 'failed';
}

function freeSlots(c: Ctx, s: ArchiveState): number {
  return Math.max(0, s.site_limit - c.world.sites.length);
}

export const archiveFamily: Family<ArchiveState> = {
  name: 'archive',
  per: 'account',
  seed: ({ epoch }) => {
    const r: Restore = { id: 1, reference: 'AR-0001', domain: 'old-shop.example.org', day: dateOf(epoch, -400), output: 'static', target_domain: 'old-shop.example.org', target: 'new', site_id: null, state: 'done', state_label: 'Done', pay_status: 'paid', pay_label: 'Paid', message: 'restored', pages: 120, assets: 430, archive_mb: 85.2, fetched: 540, missing: 10, failed: 0, progress_pct: 100, running: false, done: true, created_at: isoAgo(epoch, 40 * DAY_MS) };
    return { available: true, credits: 2, site_limit: 100, restores: [r], lookups: {} };
  },
  actions: {
    /** Timer: a look-up finishes (domains containing "unarchived" end in `error`). */
    lookup_done: (s, args, a) => {
      const l = s.lookups[args.domain as string];
      if (!l || l.state !== 'pending') return;
      if (String(args.domain).includes('unarchived')) Object.assign(l, { state: 'error', error: 'the archive has no copies of this domain' });
      else Object.assign(l, { state: 'ready', days: [400, 200, 90, 30].map((d) => dateOf(a.now(), -d)) });
    },
    /** A restore moves on: queued → running (50%) → done; args.state 'failed' ends it failed (args.restore_id, default the newest running). */
    finish: (s, args, a) => {
      const r = typeof args.restore_id === 'number' ? s.restores.find((x) => x.id === args.restore_id) : [...s.restores].reverse().find((x) => x.state === 'queued' || x.state === 'running');
      if (!r || r.done) return r;
      if (args.state === 'failed') {
        setState(r, 'failed');
        r.message = typeof args.message === 'string' ? args.message : 'the archive copy could not be fetched';
      } else if (args.state === 'done' || r.state === 'running') {
        setState(r, 'done');
        Object.assign(r, { progress_pct: 100, fetched: r.pages + r.assets - r.missing, message: 'restored' });
      } else {
        setState(r, 'running');
        Object.assign(r, { progress_pct: 50, fetched: Math.round((r.pages + r.assets) / 2) });
        a.later(1, 'finish', { restore_id: r.id });
      }
      a.record('restore', { id: r.id, state: r.state });
      return r;
    },
  },
  routes: [
    {
      method: 'GET',
      path: '/archive',
      scope: 'archive:read',
      handler: (c) => {
        const s = ar(c);
        const prices = { static: { price: '19.00', vat: '3.99', charge: '22.99' }, cms: { price: '39.00', vat: '8.19', charge: '47.19' } };
        return ok({ available: s.available, credits: s.credits, free_site_slots: freeSlots(c, s), site_limit: s.site_limit, prices, restores: s.restores, page_url: PAGE_URL });
      },
    },
    {
      method: 'GET',
      path: '/archive/archive/{domain}',
      scope: 'archive:read',
      handler: (c) => {
        const s = ar(c);
        const domain = String(c.params.domain).toLowerCase();
        if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(domain)) invalid('domain', 'is not a domain name', domain);
        if (!s.available) fail('unavailable', 'the archive service is not available');
        let l = s.lookups[domain];
        if (!l) {
          l = s.lookups[domain] = { state: 'pending', days: [], truncated: false, error: null };
          c.res.actCtx('archive', null).later(1, 'lookup_done', { domain });
        }
        return ok({ domain, ...l });
      },
    },
    {
      method: 'GET',
      path: '/archive/restores/{restore_id}',
      scope: 'archive:read',
      handler: (c) => {
        const s = ar(c);
        const r = find(s.restores, c.params.restore_id as number, 'restore');
        if (r.state !== 'planned') return ok(r);
        const sites = c.world.sites.slice(0, 20).map((x) => ({ id: x.id, domain: x.domain }));
        return ok({ ...r, sample: ['/', '/about', '/contact', '/products'], existing_sites: { static: sites, cms: sites } });
      },
    },
    {
      method: 'POST',
      path: '/archive/restores',
      scope: 'archive:write',
      handler: (c) => {
        const s = ar(c);
        const domain = reqStr(c, 'domain', { pattern: /^[a-z0-9-]+(\.[a-z0-9-]+)+$/i }).toLowerCase();
        const day = reqStr(c, 'day', { pattern: /^\d{4}-\d{2}-\d{2}$/ });
        const output = str(c, 'output', { oneOf: OUTPUTS }) ?? 'static';
        if (!s.available) fail('unavailable', 'the archive service is not available');
        const l = s.lookups[domain];
        if (!l || l.state !== 'ready' || !l.days.includes(day)) invalid('day', 'must be one of the archive days of GET /archive/archive/{domain}', day);
        const id = c.res.nextId('archive');
        const r: Restore = { id, reference: `AR-${id}`, domain, day, output, target_domain: domain, target: 'new', site_id: null, state: '', state_label: '', pay_status: 'unpaid', pay_label: 'Not paid', message: 'nothing charged', pages: 80, assets: 200, archive_mb: 42.5, fetched: 0, missing: 4, failed: 0, progress_pct: 0, running: false, done: false, created_at: c.res.actCtx('archive', null).iso() };
        setState(r, 'planned');
        s.restores.push(r);
        return ok(r, 201);
      },
    },
    {
      method: 'POST',
      path: '/archive/restores/{restore_id}/order',
      scope: 'archive:write',
      handler: (c) => {
        const s = ar(c);
        const output = reqStr(c, 'output', { oneOf: OUTPUTS });
        const target = reqStr(c, 'target', { oneOf: ['new', 'existing'] });
        const newDomain = str(c, 'new_domain', { pattern: /^[a-z0-9-]+(\.[a-z0-9-]+)+$/i });
        const siteId = int(c, 'site_id', { min: 1 });
        if (bool(c, 'accept_terms', { required: true }) !== true) invalid('accept_terms', 'must be true');
        if (bool(c, 'ack_rights', { required: true }) !== true) invalid('ack_rights', 'must be true (the right to republish)');
        if (target === 'existing' && (siteId === undefined || !c.world.getSite(siteId))) invalid('site_id', 'must be a site of the account when target is existing', siteId);
        const r = find(s.restores, c.params.restore_id as number, 'restore');
        if (r.state !== 'planned') fail('conflict', `restore ${r.id} is ${r.state}, not planned`);
        if (!s.available) fail('unavailable', 'the archive service is not available');
        if (s.credits < 1) fail('payment_required', 'no restore credit left; credits are bought in packs in the browser', { page_url: PAGE_URL });
        if (target === 'new' && freeSlots(c, s) < 1) fail('conflict', 'no free site slot for a new site');
        s.credits--;
        Object.assign(r, { output, target, site_id: target === 'existing' ? siteId : null, target_domain: newDomain ?? (target === 'existing' ? c.world.getSite(siteId as number)?.domain : r.domain), pay_status: 'paid', pay_label: 'Paid', message: 'queued' });
        setState(r, 'queued');
        c.res.actCtx('archive', null).later(1, 'finish', { restore_id: r.id });
        return ok({ ...r, credits_left: s.credits }, 202);
      },
    },
  ],
};
