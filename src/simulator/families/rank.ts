/**
 * Rank tracking (spec 2 "Rank tracking"): the account-level `rank` family. Domain figures
 * (keywords, avg_position, top10, top3) and plan usage are derived from the keywords when
 * served, so a control patch of one position is reflected everywhere. Drift moves positions.
 */
import { ticksFor } from '../assumptions.js';
import type { Family } from '../resources.js';
import { fail, find, int, invalid, ok, omit, queryInt, reqStr, requireConfirm, str, strings, type Ctx } from '../routes.js';
import { DAY_MS, KEYWORD_WORDS, LANGUAGES, LOCATIONS, dateOf, isoAgo, locationOf, mean } from './common.js';

const PLANS_URL = 'https://panel.example.com/rank/plans';
const MAX_GROUPS = 25;
const HISTORY_KEPT = 400;

export interface TrackedDomain {
  id: number;
  domain: string;
  label: string;
  hosted_site_id: number | null;
  prev_avg_position: number | null;
  last_checked_at: string | null;
  url: string;
}

export interface Group {
  id: number;
  domain_id: number;
  search_label: string;
  location_code: number;
  location: string;
  country: string;
  language_code: string;
  language: string;
  device: 'desktop' | 'mobile';
  name: string;
}

export interface RankKeyword {
  id: number;
  keyword: string;
  domain_id: number;
  group_id: number;
  active: boolean;
  position: number | null;
  previous_position: number | null;
  change: number | null;
  best_position: number | null;
  worst_position: number | null;
  ranking_url: string | null;
  checks: number;
  last_checked_at: string | null;
}

export interface RankState {
  plan: { active: boolean; plan: string; paid_until: string; keyword_limit: number; cadence: 'weekly' | 'daily'; reduced_to_weekly_this_month: boolean };
  domains: TrackedDomain[];
  groups: Group[];
  keywords: RankKeyword[];
  history: Record<string, { checked_at: string; position: number | null; ranking_url: string | null }[]>;
}

const rank = (c: Ctx): RankState => c.res.account<RankState>('rank');

function domainView(s: RankState, d: TrackedDomain): Record<string, unknown> {
  const kws = s.keywords.filter((k) => k.domain_id === d.id && k.active);
  const positions = kws.map((k) => k.position);
  return {
    id: d.id,
    domain: d.domain,
    label: d.label,
    hosted_site_id: d.hosted_site_id,
    keywords: kws.length,
    avg_position: mean(positions),
    prev_avg_position: d.prev_avg_position,
    top10: positions.filter((p) => p !== null && p <= 10).length,
    top3: positions.filter((p) => p !== null && p <= 3).length,
    last_checked_at: d.last_checked_at,
    url: d.url,
  };
}

function groupView(g: Group): Omit<Group, 'domain_id'> {
  return omit(g, 'domain_id');
}

function makeGroup(id: number, domainId: number, code: number, lang: string, device: 'desktop' | 'mobile', name?: string): Group {
  const loc = locationOf(code)!;
  const language = LANGUAGES.find((l) => l.code === lang)!;
  const search_label = `${loc.name} · ${language.name} · ${device}`;
  return { id, domain_id: domainId, search_label, location_code: code, location: loc.name, country: loc.country, language_code: lang, language: language.name, device, name: name ?? search_label };
}

function makeKeyword(id: number, keyword: string, g: Group, position: number | null, at: string | null, domain: string): RankKeyword {
  return { id, keyword, domain_id: g.domain_id, group_id: g.id, active: true, position, previous_position: null, change: null, best_position: position, worst_position: position, ranking_url: position === null ? null : `https://${domain}/`, checks: at ? 1 : 0, last_checked_at: at };
}

/** A check of one keyword: position moves (or is set), change = previous - new (positive = better), history grows. */
function check(s: RankState, k: RankKeyword, position: number | null, at: string): void {
  const d = s.domains.find((x) => x.id === k.domain_id);
  if (d) {
    d.prev_avg_position = mean(s.keywords.filter((x) => x.domain_id === d.id && x.active).map((x) => x.position));
    d.last_checked_at = at;
  }
  k.previous_position = k.position;
  k.position = position;
  k.change = position !== null && k.previous_position !== null ? k.previous_position - position : null;
  if (position !== null) {
    k.best_position = k.best_position === null ? position : Math.min(k.best_position, position);
    k.worst_position = k.worst_position === null ? position : Math.max(k.worst_position, position);
    k.ranking_url = `https://${d?.domain ?? 'example.com'}/${k.keyword.replace(/\s+/g, '-')}`;
  } else k.ranking_url = null;
  k.checks++;
  k.last_checked_at = at;
  const h = (s.history[k.id] ??= []);
  h.push({ checked_at: at, position, ranking_url: k.ranking_url });
  if (h.length > HISTORY_KEPT) h.shift();
}

export const rankFamily: Family<RankState> = {
  name: 'rank',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: RankState = { plan: { active: true, plan: 'rank-100', paid_until: dateOf(epoch, 50), keyword_limit: 100, cadence: 'weekly', reduced_to_weekly_this_month: false }, domains: [], groups: [], keywords: [], history: {} };
    for (const [i, site] of world.sites.slice(0, 2).entries()) {
      const d: TrackedDomain = { id: i + 1, domain: site.domain, label: site.name, hosted_site_id: site.id, prev_avg_position: null, last_checked_at: isoAgo(epoch, DAY_MS), url: `https://panel.example.com/rank/domains/${i + 1}` };
      s.domains.push(d);
      const groups = [makeGroup(d.id * 10 + 1, d.id, 2840, 'en', 'desktop')];
      if (rng.chance(0.5)) groups.push(makeGroup(d.id * 10 + 2, d.id, 2840, 'en', 'mobile'));
      s.groups.push(...groups);
      for (const g of groups) {
        for (let k = 1; k <= rng.int(5, 8); k++) {
          const words = site.domain.split(/[-.]/)[0] ?? 'site';
          const position = rng.chance(0.1) ? null : rng.int(1, 60);
          const kw = makeKeyword(g.id * 100 + k, `${words} ${KEYWORD_WORDS[(k + g.id) % KEYWORD_WORDS.length]}`, g, position, isoAgo(epoch, DAY_MS), d.domain);
          s.keywords.push(kw);
          s.history[kw.id] = [1, 2, 3].map((w) => ({ checked_at: isoAgo(epoch, (1 + 7 * w) * DAY_MS), position, ranking_url: kw.ranking_url })).reverse();
        }
      }
      d.prev_avg_position = mean(s.keywords.filter((k) => k.domain_id === d.id).map((k) => k.position));
    }
    return s;
  },
  actions: {
    /** A keyword is checked (args.keyword_id, default random; args.position: the new position, null = outside 100; default a drift step). */
    move: (s, args, a) => {
      const k = typeof args.keyword_id === 'number' ? s.keywords.find((x) => x.id === args.keyword_id) : a.rng.pick(s.keywords.filter((x) => x.active));
      if (!k) return undefined;
      let position: number | null;
      if ('position' in args) position = args.position === null ? null : Number(args.position);
      else if (k.position === null) position = a.rng.chance(0.5) ? a.rng.int(60, 100) : null;
      else if (a.rng.chance(0.05)) position = null;
      else position = Math.min(100, Math.max(1, k.position + a.rng.int(-8, 8)));
      check(s, k, position, a.iso());
      a.record('moved', { keyword_id: k.id, from: k.previous_position, to: k.position });
      return k;
    },
  },
  drift: (s, a) => {
    for (let i = a.rng.int(1, 3); i > 0; i--) rankFamily.actions!.move!(s, {}, a);
  },
  driftWeight: 3,
  routes: [
    {
      method: 'GET',
      path: '/rank',
      scope: 'rank:read',
      handler: (c) => {
        const s = rank(c);
        const { keyword_limit, ...plan } = s.plan;
        return ok({ ...plan, keywords: { used: s.keywords.filter((k) => k.active).length, limit: keyword_limit }, domains: s.domains.length, plans_url: PLANS_URL });
      },
    },
    {
      method: 'GET',
      path: '/rank/plans',
      scope: 'rank:read',
      handler: () =>
        ok({
          plans: [
            { key: 'rank-100', name: 'Rank 100', price_usd: '9.00', keywords: 100, cadence: 'weekly', summary: '100 keywords checked weekly' },
            { key: 'rank-500', name: 'Rank 500', price_usd: '29.00', keywords: 500, cadence: 'daily', summary: '500 keywords checked daily' },
          ],
          pack: { key: 'rank-pack-100', name: '100 more keywords', price_usd: '5.00', keywords: 100, max_per_account: 10 },
          months_offered: [1, 12],
          can_buy: true,
          plans_url: PLANS_URL,
        }),
    },
    { method: 'GET', path: '/rank/domains', scope: 'rank:read', handler: (c) => ok(rank(c).domains.map((d) => domainView(rank(c), d))) },
    {
      method: 'GET',
      path: '/rank/domains/{domain_id}',
      scope: 'rank:read',
      handler: (c) => {
        const s = rank(c);
        const d = find(s.domains, c.params.domain_id as number, 'tracked domain');
        const groups = s.groups.filter((g) => g.domain_id === d.id).map((g) => ({ ...groupView(g), keywords: s.keywords.filter((k) => k.group_id === g.id) }));
        return ok({ ...domainView(s, d), groups });
      },
    },
    {
      method: 'GET',
      path: '/rank/keywords/{keyword_id}',
      scope: 'rank:read',
      handler: (c) => {
        const s = rank(c);
        const days = queryInt(c, 'days', 90, 1, 400);
        const k = find(s.keywords, c.params.keyword_id as number, 'keyword');
        const since = c.world.time().getTime() - days * DAY_MS;
        const g = s.groups.find((x) => x.id === k.group_id);
        return ok({ ...k, search_label: g?.search_label ?? '', history: (s.history[k.id] ?? []).filter((h) => new Date(h.checked_at).getTime() >= since) });
      },
    },
    {
      method: 'GET',
      path: '/rank/locations',
      scope: 'rank:read',
      handler: (c) => {
        const q = (c.query.get('q') ?? '').toLowerCase();
        const hits = q === '' ? LOCATIONS.filter((l) => l.type === 'Country') : LOCATIONS.filter((l) => l.name.toLowerCase().includes(q));
        return ok(hits.slice(0, 40).map(({ code, name, type }) => ({ code, name, type })));
      },
    },
    { method: 'GET', path: '/rank/languages', scope: 'rank:read', handler: () => ok(LANGUAGES) },
    {
      method: 'POST',
      path: '/rank/domains',
      scope: 'rank:write',
      handler: (c) => {
        const s = rank(c);
        const raw = reqStr(c, 'domain', { min: 1, max: 253 });
        const domain = raw.replace(/^https?:\/\//, '').replace(/^www\./, '').replace(/\/.*$/, '').toLowerCase();
        if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(domain)) invalid('domain', 'is not a domain name', raw);
        const label = str(c, 'label', { max: 80 });
        const existing = s.domains.find((d) => d.domain === domain);
        if (existing) return ok(domainView(s, existing), 201);
        if (!s.plan.active) fail('payment_required', 'rank tracking is not on this account', { plans_url: PLANS_URL });
        const id = c.res.nextId('rank');
        const hosted = c.world.sites.find((x) => x.domain === domain);
        const d: TrackedDomain = { id, domain, label: label ?? domain, hosted_site_id: hosted?.id ?? null, prev_avg_position: null, last_checked_at: null, url: `https://panel.example.com/rank/domains/${id}` };
        s.domains.push(d);
        c.world.note('rank.domain_added', undefined, { id, domain });
        return ok(domainView(s, d), 201);
      },
    },
    {
      method: 'DELETE',
      path: '/rank/domains/{domain_id}',
      scope: 'rank:write',
      handler: (c) => {
        const s = rank(c);
        const d = find(s.domains, c.params.domain_id as number, 'tracked domain');
        requireConfirm(c);
        s.domains = s.domains.filter((x) => x !== d);
        s.groups = s.groups.filter((g) => g.domain_id !== d.id);
        // History is kept (spec): only the keywords' listing goes.
        s.keywords = s.keywords.filter((k) => k.domain_id !== d.id);
        c.world.note('rank.domain_removed', undefined, { id: d.id });
        return ok({ removed: true, id: d.id });
      },
    },
    {
      method: 'POST',
      path: '/rank/domains/{domain_id}/groups',
      scope: 'rank:write',
      handler: (c) => {
        const s = rank(c);
        const d = find(s.domains, c.params.domain_id as number, 'tracked domain');
        const code = int(c, 'location_code', { required: true }) as number;
        if (!locationOf(code)) invalid('location_code', 'is not a location from GET /rank/locations', code);
        const lang = reqStr(c, 'language_code', { oneOf: LANGUAGES.map((l) => l.code) });
        const device = reqStr(c, 'device', { oneOf: ['desktop', 'mobile'] }) as 'desktop' | 'mobile';
        const name = str(c, 'name', { max: 80 });
        const existing = s.groups.find((g) => g.domain_id === d.id && g.location_code === code && g.language_code === lang && g.device === device);
        if (existing) return ok(groupView(existing), 201);
        if (s.groups.filter((g) => g.domain_id === d.id).length >= MAX_GROUPS) invalid('location_code', `at most ${MAX_GROUPS} search-engine versions per domain`);
        const g = makeGroup(c.res.nextId('rank'), d.id, code, lang, device, name);
        s.groups.push(g);
        return ok(groupView(g), 201);
      },
    },
    {
      // S12: body fields and reply shape are "not shown": body {keywords: string[]}, reply {added, skipped, not_added}.
      method: 'POST',
      path: '/rank/groups/{group_id}/keywords',
      scope: 'rank:write',
      handler: (c) => {
        const s = rank(c);
        const g = find(s.groups, c.params.group_id as number, 'group');
        const words = (strings(c, 'keywords', { required: true, min: 1, max: 1000 }) as string[]).map((w) => w.trim().toLowerCase()).filter((w) => w !== '');
        const have = new Set(s.keywords.filter((k) => k.group_id === g.id).map((k) => k.keyword));
        const skipped = words.filter((w) => have.has(w));
        const fresh = [...new Set(words.filter((w) => !have.has(w)))];
        const room = Math.max(0, s.plan.keyword_limit - s.keywords.filter((k) => k.active).length);
        const domain = s.domains.find((d) => d.id === g.domain_id)?.domain ?? '';
        const added = fresh.slice(0, room).map((w) => makeKeyword(c.res.nextId('rank'), w, g, null, null, domain));
        s.keywords.push(...added);
        // First check within the hour (spec, States).
        for (const k of added) c.res.actCtx('rank', null).later(ticksFor(60), 'move', { keyword_id: k.id });
        const rest = fresh.slice(room);
        return ok({ added, skipped, not_added: { count: rest.length, keywords: rest, limit: s.plan.keyword_limit, plans_url: PLANS_URL } }, 201);
      },
    },
  ],
};

