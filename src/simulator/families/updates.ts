/**
 * Held plugin updates (spec 1 "Held plugin updates"): the account-level `updates` family.
 * Drift holds an update now and then, or blocks one that broke the site again.
 */
import type { Family } from '../resources.js';
import { fail, find, ok, queryId, type Ctx } from '../routes.js';
import { DAY_MS, isoAgo } from './common.js';

const PLUGINS = [
  ['form-builder', 'Form Builder', '3.2.1', '3.3.0'],
  ['seo-helper', 'SEO Helper', '20.1', '21.0'],
  ['shop-engine', 'Shop Engine', '8.4.0', '8.5.0'],
  ['cache-boost', 'Cache Boost', '1.9.2', '2.0.0'],
] as const;

export interface HeldUpdate {
  id: number;
  site_id: number;
  domain: string;
  plugin: string;
  name: string;
  kept_at_version: string;
  breaking_version: string;
  state: 'holding' | 'blocked' | 'released';
  times_it_broke: number;
  first_seen: string;
  last_seen: string;
  next: string;
  can_try_again: boolean;
}

export interface UpdatesState {
  held: HeldUpdate[];
}

const state = (c: Ctx): UpdatesState => c.res.account<UpdatesState>('updates');

function nextText(h: HeldUpdate): string {
  return h.state === 'holding' ? 'tried again on the next update run' : h.state === 'blocked' ? 'waits for a newer version or a try-again request' : 'the next update run tries it';
}

export const updatesFamily: Family<UpdatesState> = {
  name: 'updates',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const held: HeldUpdate[] = [];
    for (const site of world.sites.slice(0, 5)) {
      if (!rng.chance(0.3)) continue;
      const [plugin, name, kept, breaking] = rng.pick(PLUGINS);
      const h: HeldUpdate = { id: site.id * 100 + 1, site_id: site.id, domain: site.domain, plugin, name, kept_at_version: kept, breaking_version: breaking, state: 'holding', times_it_broke: 1, first_seen: isoAgo(epoch, rng.int(2, 20) * DAY_MS), last_seen: isoAgo(epoch, DAY_MS), next: '', can_try_again: false };
      h.next = nextText(h);
      held.push(h);
    }
    return { held };
  },
  onSiteRemoved: (s, siteId) => {
    s.held = s.held.filter((h) => h.site_id !== siteId);
  },
  actions: {
    /** An update breaks a site and is held (args.site_id, default a random site; args.plugin). */
    hold: (s, args, a) => {
      const site = typeof args.site_id === 'number' ? a.world.getSite(args.site_id) : a.rng.pick(a.world.sites);
      if (!site) return undefined;
      const p = PLUGINS.find((x) => x[0] === args.plugin) ?? a.rng.pick(PLUGINS);
      const h: HeldUpdate = { id: a.nextId(), site_id: site.id, domain: site.domain, plugin: p[0], name: p[1], kept_at_version: p[2], breaking_version: p[3], state: 'holding', times_it_broke: 1, first_seen: a.iso(), last_seen: a.iso(), next: '', can_try_again: false };
      h.next = nextText(h);
      s.held.push(h);
      a.record('held', { id: h.id, site_id: site.id, plugin: h.plugin });
      return h;
    },
    /** A held update broke the site a second time: blocked, can be tried again (args.hold_id, default the oldest holding one). */
    block: (s, args, a) => {
      const h = typeof args.hold_id === 'number' ? s.held.find((x) => x.id === args.hold_id) : s.held.find((x) => x.state === 'holding');
      if (!h) return undefined;
      Object.assign(h, { state: 'blocked', times_it_broke: h.times_it_broke + 1, last_seen: a.iso(), can_try_again: true });
      h.next = nextText(h);
      a.record('blocked', { id: h.id, site_id: h.site_id });
      return h;
    },
  },
  drift: (s, a) => {
    if (a.rng.chance(0.5) && s.held.some((h) => h.state === 'holding')) updatesFamily.actions!.block!(s, {}, a);
    else if (a.rng.chance(0.3)) updatesFamily.actions!.hold!(s, {}, a);
  },
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/plugin-updates/held',
      scope: 'updates:read',
      handler: (c) => {
        const siteId = queryId(c, 'site_id');
        return ok(state(c).held.filter((h) => siteId === undefined || h.site_id === siteId));
      },
    },
    { method: 'GET', path: '/sites/{site_id}/plugin-updates/held', scope: 'updates:read', handler: (c) => ok(state(c).held.filter((h) => h.site_id === c.siteId)) },
    {
      method: 'POST',
      path: '/plugin-updates/held/{hold_id}/try-again',
      scope: 'updates:write',
      handler: (c) => {
        const h = find(state(c).held, c.params.hold_id as number, 'held update');
        if (!h.can_try_again) fail('conflict', `held update ${h.id} cannot be tried again now (state ${h.state})`);
        Object.assign(h, { state: 'released', can_try_again: false });
        h.next = nextText(h);
        c.world.note('updates.released', h.site_id, { id: h.id });
        return ok(h);
      },
    },
  ],
};
