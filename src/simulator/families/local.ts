/**
 * Local rankings (spec 2 "Local rankings"): the account-level `local` family. Business
 * figures (keywords, in_map_pack, average_map_position) are derived when served; a map
 * position crossing the pack (top 3) is written to the business's `recent_changes`.
 */
import { PAGING } from '../assumptions.js';
import type { Family } from '../resources.js';
import { fail, find, int, invalid, ok, omit, paged, queryInt, str, type Ctx } from '../routes.js';
import { DAY_MS, KEYWORD_WORDS, byIdOrRandom, dateOf, isoAgo, mean, requireRoom } from './common.js';

const PRICE_FROM = '12.00';
const PLANS_URL = 'https://panel.example.com/local/plans';

export interface Business {
  id: number;
  name: string;
  domain: string;
  category: string;
  address: string;
  phone: string;
  rating: number | null;
  reviews: number;
  claimed: boolean;
  photos: number;
  last_checked_at: string | null;
}

export interface LocalKeyword {
  id: number;
  business_id: number;
  town_id: number;
  keyword: string;
  town: string;
  device: string;
  map_position: number | null;
  map_change: number | null;
  organic_position: number | null;
  organic_change: number | null;
  best_map_position: number | null;
  checked_every: string;
  last_checked_at: string | null;
}

export interface LocalState {
  plan: { plan: string; unlimited: boolean; paid_until: string; checks_used: number; checks_included: number; keyword_limit: number };
  businesses: Business[];
  towns: { id: number; business_id: number; town: string; device: string }[];
  keywords: LocalKeyword[];
  history: Record<string, { checked_at: string; map_position: number | null; organic_position: number | null }[]>;
  recent_changes: Record<string, { what: string; from: unknown; to: unknown; at: string }[]>;
}

const local = (c: Ctx): LocalState => c.res.account<LocalState>('local');

function inPack(p: number | null): boolean {
  return p !== null && p <= 3;
}

function businessView(s: LocalState, b: Business): Record<string, unknown> {
  const kws = s.keywords.filter((k) => k.business_id === b.id);
  return { ...b, keywords: kws.length, in_map_pack: kws.filter((k) => inPack(k.map_position)).length, average_map_position: mean(kws.map((k) => k.map_position)) };
}

function keywordView(k: LocalKeyword): Record<string, unknown> {
  return omit(k, 'business_id', 'town_id');
}

/** A check of one local keyword; leaving or entering the pack is a recent change of the business. */
function check(s: LocalState, k: LocalKeyword, map: number | null, organic: number | null, at: string): void {
  const before = k.map_position;
  k.map_change = map !== null && before !== null ? before - map : null;
  k.organic_change = organic !== null && k.organic_position !== null ? k.organic_position - organic : null;
  k.map_position = map;
  k.organic_position = organic;
  if (map !== null) k.best_map_position = k.best_map_position === null ? map : Math.min(k.best_map_position, map);
  k.last_checked_at = at;
  const h = (s.history[k.id] ??= []);
  h.push({ checked_at: at, map_position: map, organic_position: organic });
  if (h.length > 400) h.shift();
  if (inPack(before) !== inPack(map)) {
    const changes = (s.recent_changes[k.business_id] ??= []);
    changes.push({ what: `map pack: ${k.keyword} (${k.town})`, from: before, to: map, at });
    if (changes.length > 20) changes.shift();
  }
  const b = s.businesses.find((x) => x.id === k.business_id);
  if (b) b.last_checked_at = at;
}

export const localFamily: Family<LocalState> = {
  name: 'local',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: LocalState = { plan: { plan: 'local-50', unlimited: false, paid_until: dateOf(epoch, 48), checks_used: 0, checks_included: 500, keyword_limit: 50 }, businesses: [], towns: [], keywords: [], history: {}, recent_changes: {} };
    for (const [i, site] of world.sites.slice(0, 2).entries()) {
      // Every seeded profile is claimed (a healthy world: local.unclaimed stays quiet until a
      // test or the `unclaim` action says otherwise); the draw stays so the seed stream is unchanged.
      const b: Business = { id: i + 1, name: site.name, domain: site.domain, category: rng.pick(['Bakery', 'Dentist', 'Bike shop', 'Law firm']), address: `${rng.int(1, 200)} Main Street, Springfield`, phone: `+1 555 01${rng.int(10, 99)}`, rating: rng.int(35, 49) / 10, reviews: rng.int(10, 300), claimed: rng.chance(0.8) || true, photos: rng.int(0, 40), last_checked_at: isoAgo(epoch, DAY_MS) };
      s.businesses.push(b);
      const town = { id: b.id * 10 + 1, business_id: b.id, town: 'Springfield', device: 'mobile' };
      s.towns.push(town);
      s.recent_changes[b.id] = [];
      for (let k = 1; k <= rng.int(4, 7); k++) {
        const map = rng.chance(0.15) ? null : rng.int(1, 12);
        const kw: LocalKeyword = { id: town.id * 100 + k, business_id: b.id, town_id: town.id, keyword: `${b.category.toLowerCase()} ${KEYWORD_WORDS[k % KEYWORD_WORDS.length]}`, town: town.town, device: town.device, map_position: map, map_change: null, organic_position: rng.int(1, 40), organic_change: null, best_map_position: map, checked_every: 'weekly', last_checked_at: isoAgo(epoch, DAY_MS) };
        s.keywords.push(kw);
        s.history[kw.id] = [{ checked_at: isoAgo(epoch, DAY_MS), map_position: map, organic_position: kw.organic_position }];
      }
    }
    return s;
  },
  actions: {
    /**
     * An edit of a business's map profile (args.business_id, default the first; args.field:
     * name, phone or address; args.to): the field changes and `recent_changes` records it
     * as { what: <field>, from, to, at } (S23), as an owner's edit or a hijack would.
     */
    edit: (s, args, a) => {
      const b = typeof args.business_id === 'number' ? s.businesses.find((x) => x.id === args.business_id) : s.businesses[0];
      if (!b) return undefined;
      const field = String(args.field ?? 'phone');
      if (!['name', 'phone', 'address'].includes(field)) fail('validation_failed', 'field must be name, phone or address');
      const key = field as 'name' | 'phone' | 'address';
      const from = b[key];
      const to = typeof args.to === 'string' ? args.to : `${from} (edited)`;
      b[key] = to;
      const changes = (s.recent_changes[b.id] ??= []);
      changes.push({ what: field, from, to, at: a.iso() });
      if (changes.length > 20) changes.shift();
      a.record('edited', { business_id: b.id, field });
      return { ...b };
    },
    /** A check of a keyword (args.keyword_id, default random; args.map_position / organic_position to set). */
    move: (s, args, a) => {
      const k = byIdOrRandom(s.keywords, args.keyword_id, a.rng);
      if (!k) return undefined;
      const map = 'map_position' in args ? (args.map_position as number | null) : k.map_position === null ? a.rng.int(5, 20) : Math.max(1, k.map_position + a.rng.int(-3, 3));
      const organic = 'organic_position' in args ? (args.organic_position as number | null) : k.organic_position === null ? null : Math.max(1, k.organic_position + a.rng.int(-4, 4));
      check(s, k, map, organic, a.iso());
      a.record('moved', { keyword_id: k.id, map_position: map });
      return keywordView(k);
    },
  },
  drift: (s, a) => void localFamily.actions!.move!(s, {}, a),
  driftWeight: 2,
  routes: [
    {
      method: 'GET',
      path: '/local-rankings',
      scope: 'local:read',
      handler: (c) => {
        const s = local(c);
        const { plan, unlimited, paid_until, checks_used, checks_included } = s.plan;
        return ok({ plan, unlimited, paid_until, checks_used, checks_included, businesses: s.businesses.length, keywords: s.keywords.length, in_map_pack: s.keywords.filter((k) => inPack(k.map_position)).length, average_map_position: mean(s.keywords.map((k) => k.map_position)), price_from: PRICE_FROM });
      },
    },
    { method: 'GET', path: '/local-rankings/businesses', scope: 'local:read', handler: (c) => ok(local(c).businesses.map((b) => businessView(local(c), b))) },
    {
      method: 'GET',
      path: '/local-rankings/businesses/{business_id}',
      scope: 'local:read',
      handler: (c) => {
        const s = local(c);
        const b = find(s.businesses, c.params.business_id as number, 'business');
        return ok({ ...businessView(s, b), towns: s.towns.filter((t) => t.business_id === b.id).map(({ id, town, device }) => ({ id, town, device })), recent_changes: [...(s.recent_changes[b.id] ?? [])].reverse() });
      },
    },
    {
      method: 'GET',
      path: '/local-rankings/keywords',
      scope: 'local:read',
      handler: (c) => {
        const rawBiz = c.query.get('business_id');
        if (rawBiz !== null && !/^\d+$/.test(rawBiz)) invalid('business_id', 'must be an integer', rawBiz);
        const st = c.query.get('state');
        if (st !== null && !['pack', 'map', 'nomap'].includes(st)) invalid('state', 'must be one of pack, map, nomap', st);
        const search = (c.query.get('search') ?? '').toLowerCase();
        const filter = (k: LocalKeyword): boolean =>
          (rawBiz === null || k.business_id === Number(rawBiz)) &&
          (st === null || (st === 'pack' ? inPack(k.map_position) : st === 'map' ? k.map_position !== null : k.map_position === null)) &&
          (search === '' || k.keyword.toLowerCase().includes(search));
        return paged(c, local(c).keywords, { ...PAGING.localKeywords, order: 'asc', filter, map: keywordView });
      },
    },
    {
      method: 'GET',
      path: '/local-rankings/keywords/{keyword_id}/history',
      scope: 'local:read',
      handler: (c) => {
        const s = local(c);
        const k = find(s.keywords, c.params.keyword_id as number, 'local keyword');
        const limit = queryInt(c, 'limit', 90, 1, 400);
        return ok([...(s.history[k.id] ?? [])].reverse().slice(0, limit));
      },
    },
    {
      method: 'POST',
      path: '/local-rankings/keywords',
      scope: 'local:write',
      handler: (c) => {
        const s = local(c);
        const townId = int(c, 'town_id', { required: true }) as number;
        const words = c.body.keywords;
        if (!Array.isArray(words) || words.length === 0 || !words.every((w) => typeof w === 'string' && w.trim() !== '')) invalid('keywords', 'must be a non-empty array of strings');
        const frequency = str(c, 'frequency', { oneOf: ['daily', 'weekly', 'monthly'] }) ?? 'weekly';
        const town = s.towns.find((t) => t.id === townId) ?? fail('validation_failed', `town_id ${townId} is not a town of a tracked business`, { field: 'town_id', value: townId });
        // Refused before anything is spent if the month would not fit the plan.
        requireRoom(s.keywords.length, words.length, s.plan.keyword_limit, s.plan.unlimited, PLANS_URL, 'keywords');
        for (const w of words as string[]) {
          s.keywords.push({ id: c.res.nextId('local'), business_id: town.business_id, town_id: town.id, keyword: w.trim().toLowerCase(), town: town.town, device: town.device, map_position: null, map_change: null, organic_position: null, organic_change: null, best_map_position: null, checked_every: frequency, last_checked_at: null });
        }
        return ok({ added: words.length, town: town.town }, 201);
      },
    },
    {
      method: 'POST',
      path: '/local-rankings/check',
      scope: 'local:write',
      handler: (c) => {
        const s = local(c);
        const ids = c.body.keyword_ids;
        if (!Array.isArray(ids) || ids.length === 0 || ids.length > 100 || !ids.every((x) => Number.isInteger(x))) invalid('keyword_ids', 'must be an array of 1 to 100 keyword ids', ids);
        for (const id of ids as number[]) find(s.keywords, id, 'local keyword');
        requireRoom(s.plan.checks_used, ids.length, s.plan.checks_included, s.plan.unlimited, PLANS_URL, 'checks this month');
        s.plan.checks_used += ids.length;
        for (const id of ids as number[]) c.res.actCtx('local', null).later(1, 'move', { keyword_id: id });
        return ok({ queued: ids.length });
      },
    },
  ],
};

