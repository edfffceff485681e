/**
 * Competitor tracking (spec 2 "Competitor tracking"): the account-level `competitors`
 * family. Weekly readings move traffic, keywords and rank (drift or the `move` action);
 * `traffic` is a string, as the spec says.
 */
import type { Family } from '../resources.js';
import { fail, find, ok, reqStr, str, type Ctx } from '../routes.js';
import { DAY_MS, byIdOrRandom, dateOf, isoAgo } from './common.js';

const COUNTRIES = ['US', 'GB', 'DE', 'FR', 'ES', 'IT', 'CA', 'AU'] as const;

export interface WatchedDomain {
  id: number;
  domain: string;
  country: string;
  note: string;
  covered: boolean;
  state: string;
  keywords: number | null;
  traffic: string | null;
  top3: number | null;
  top10: number | null;
  domain_rank: number | null;
  referring_domains: number | null;
  new_referring_domains: number | null;
  lost_referring_domains: number | null;
  spam_score: number | null;
  shared_keywords: number | null;
  last_read_at: string | null;
}

export interface CompetitorsState {
  plan: { plan: string; unlimited: boolean; paid_until: string; domains_included: number; jumps_this_week: number };
  domains: WatchedDomain[];
  history: Record<string, { read_at: string; keywords: number; traffic: string; domain_rank: number; referring_domains: number }[]>;
  top_pages: Record<string, { url: string; traffic: number; keywords: number }[]>;
}

const comp = (c: Ctx): CompetitorsState => c.res.account<CompetitorsState>('competitors');

/** A weekly reading of a domain; args may set keywords, traffic (number), domain_rank, referring_domains. */
function read(s: CompetitorsState, d: WatchedDomain, at: string, step: (n: number) => number, set: Record<string, unknown> = {}): void {
  const num = (k: string, cur: number | null, spread: number, min = 0): number => (typeof set[k] === 'number' ? (set[k] as number) : Math.max(min, (cur ?? spread * 5) + step(spread)));
  const prevTraffic = d.traffic === null ? null : Number(d.traffic);
  const keywords = num('keywords', d.keywords, 40);
  const traffic = num('traffic', prevTraffic, 300);
  const rank = num('domain_rank', d.domain_rank, 2, 1);
  const refs = num('referring_domains', d.referring_domains, 10);
  d.new_referring_domains = Math.max(0, refs - (d.referring_domains ?? refs));
  d.lost_referring_domains = Math.max(0, (d.referring_domains ?? refs) - refs);
  if (prevTraffic !== null && prevTraffic > 0 && Math.abs(traffic - prevTraffic) / prevTraffic >= 0.2) s.plan.jumps_this_week++;
  Object.assign(d, { keywords, traffic: String(traffic), domain_rank: rank, referring_domains: refs, top3: Math.round(keywords * 0.05), top10: Math.round(keywords * 0.2), spam_score: d.spam_score ?? 3, shared_keywords: Math.round(keywords * 0.1), last_read_at: at, state: 'ok' });
  const h = (s.history[d.id] ??= []);
  h.push({ read_at: at, keywords, traffic: String(traffic), domain_rank: rank, referring_domains: refs });
  if (h.length > 104) h.shift();
  s.top_pages[d.id] = [{ url: `https://${d.domain}/`, traffic: Math.round(traffic * 0.4), keywords: Math.round(keywords * 0.3) }, { url: `https://${d.domain}/blog/`, traffic: Math.round(traffic * 0.2), keywords: Math.round(keywords * 0.2) }];
}

export const competitorsFamily: Family<CompetitorsState> = {
  name: 'competitors',
  per: 'account',
  seed: ({ rng, epoch }) => {
    const s: CompetitorsState = { plan: { plan: 'competitors-5', unlimited: false, paid_until: dateOf(epoch, 39), domains_included: 5, jumps_this_week: 0 }, domains: [], history: {}, top_pages: {} };
    for (const [i, domain] of ['rival.example.org', 'bigshop.example.net'].entries()) {
      const d: WatchedDomain = { id: i + 1, domain, country: 'US', note: '', covered: true, state: 'ok', keywords: null, traffic: null, top3: null, top10: null, domain_rank: null, referring_domains: null, new_referring_domains: null, lost_referring_domains: null, spam_score: null, shared_keywords: null, last_read_at: null };
      s.domains.push(d);
      for (let w = 4; w >= 1; w--) read(s, d, isoAgo(epoch, w * 7 * DAY_MS), (n) => rng.int(-n, n));
    }
    s.plan.jumps_this_week = 0;
    return s;
  },
  actions: {
    /** A reading of a watched domain (args.watch_id, default random; args.keywords/traffic/domain_rank/referring_domains). */
    move: (s, args, a) => {
      const d = byIdOrRandom(s.domains, args.watch_id, a.rng);
      if (!d) return undefined;
      read(s, d, a.iso(), (n) => a.rng.int(-n * 3, n * 3), args);
      a.record('reading', { watch_id: d.id, traffic: d.traffic, keywords: d.keywords, domain_rank: d.domain_rank });
      return d;
    },
  },
  drift: (s, a) => void competitorsFamily.actions!.move!(s, {}, a),
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/competitors',
      scope: 'competitors:read',
      handler: (c) => {
        const s = comp(c);
        return ok({ ...s.plan, watched: s.domains.length, free_domains: Math.max(0, s.plan.domains_included - s.domains.length), price_from: '7.00' });
      },
    },
    { method: 'GET', path: '/competitors/domains', scope: 'competitors:read', handler: (c) => ok(comp(c).domains) },
    {
      method: 'GET',
      path: '/competitors/domains/{watch_id}',
      scope: 'competitors:read',
      handler: (c) => {
        const s = comp(c);
        const d = find(s.domains, c.params.watch_id as number, 'watched domain');
        return ok({ ...d, top_pages: s.top_pages[d.id] ?? [], history: s.history[d.id] ?? [] });
      },
    },
    {
      method: 'POST',
      path: '/competitors/domains',
      scope: 'competitors:write',
      handler: (c) => {
        const s = comp(c);
        const domain = reqStr(c, 'domain', { pattern: /^(https?:\/\/)?(www\.)?[a-z0-9-]+(\.[a-z0-9-]+)+\/?$/i }).replace(/^https?:\/\//, '').replace(/^www\./, '').replace(/\/$/, '').toLowerCase();
        const country = reqStr(c, 'country', { oneOf: COUNTRIES });
        const note = str(c, 'note', { max: 120 }) ?? '';
        if (!s.plan.unlimited && s.domains.length >= s.plan.domains_included) fail('payment_required', 'the packs have no room for another domain', { plans_url: 'https://panel.example.com/competitors/plans' });
        const d: WatchedDomain = { id: c.res.nextId('competitors'), domain, country, note, covered: true, state: 'ok', keywords: null, traffic: null, top3: null, top10: null, domain_rank: null, referring_domains: null, new_referring_domains: null, lost_referring_domains: null, spam_score: null, shared_keywords: null, last_read_at: null };
        s.domains.push(d);
        c.res.actCtx('competitors', null).later(1, 'move', { watch_id: d.id });
        return ok(d, 201);
      },
    },
    {
      method: 'DELETE',
      path: '/competitors/domains/{watch_id}',
      scope: 'competitors:write',
      handler: (c) => {
        const s = comp(c);
        const d = find(s.domains, c.params.watch_id as number, 'watched domain');
        s.domains = s.domains.filter((x) => x !== d);
        return ok({ deleted: true });
      },
    },
  ],
};
