/**
 * SEO metrics (per-site `seo` family) and the backlink tracker (account-level `backlinks`
 * family), spec 2 "SEO metrics and backlink tracker". `_change` fields are derived from the
 * reading before when served.
 */
import type { Family } from '../resources.js';
import { fail, find, ok, queryInt, requireConfirm, str, type Ctx } from '../routes.js';
import { DAY_MS, isoAgo } from './common.js';

const METRICS = ['trust_flow', 'citation_flow', 'backlinks', 'referring_domains'] as const;
type Metric = (typeof METRICS)[number];

export interface Reading {
  measured_at: string;
  trust_flow: number;
  citation_flow: number;
  backlinks: number;
  referring_domains: number;
}

export interface SeoState {
  /** Oldest first. */
  history: Reading[];
}

function withChanges(list: Reading[]): Record<string, unknown>[] {
  return list.map((r, i) => {
    const prev = list[i - 1];
    const out: Record<string, unknown> = { ...r };
    for (const m of METRICS) out[`${m}_change`] = prev ? r[m] - prev[m] : null;
    return out;
  });
}

function nextReading(prev: Reading, at: string, step: (n: number) => number, set: Partial<Record<Metric, number>> = {}): Reading {
  return {
    measured_at: at,
    trust_flow: set.trust_flow ?? Math.max(0, Math.min(100, prev.trust_flow + step(3))),
    citation_flow: set.citation_flow ?? Math.max(0, Math.min(100, prev.citation_flow + step(3))),
    backlinks: set.backlinks ?? Math.max(0, prev.backlinks + step(Math.max(5, Math.round(prev.backlinks * 0.1)))),
    referring_domains: set.referring_domains ?? Math.max(0, prev.referring_domains + step(Math.max(2, Math.round(prev.referring_domains * 0.08)))),
  };
}

export const seoFamily: Family<SeoState> = {
  name: 'seo',
  per: 'site',
  seed: ({ rng, epoch }) => {
    if (rng.chance(0.4)) return { history: [] };
    let r: Reading = { measured_at: isoAgo(epoch, 8 * 7 * DAY_MS), trust_flow: rng.int(5, 40), citation_flow: rng.int(10, 50), backlinks: rng.int(20, 3000), referring_domains: rng.int(5, 300) };
    const history = [r];
    for (let w = 7; w >= 1; w--) {
      r = nextReading(r, isoAgo(epoch, w * 7 * DAY_MS), (n) => rng.int(-n, n));
      history.push(r);
    }
    return { history };
  },
  actions: {
    /** A new reading (args: any of trust_flow, citation_flow, backlinks, referring_domains to set). */
    reading: (s, args, a) => {
      const prev = s.history.at(-1) ?? { measured_at: a.iso(), trust_flow: 10, citation_flow: 15, backlinks: 100, referring_domains: 20 };
      const set: Partial<Record<Metric, number>> = {};
      for (const m of METRICS) if (typeof args[m] === 'number') set[m] = args[m] as number;
      const r = nextReading(prev, a.iso(), (n) => a.rng.int(-n, n), set);
      s.history.push(r);
      if (s.history.length > 400) s.history.shift();
      a.record('reading', { ...r });
      return r;
    },
  },
  drift: (s, a) => void seoFamily.actions!.reading!(s, {}, a),
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/sites/{site_id}/seo-metrics',
      scope: 'sites:read',
      handler: (c) => {
        const s = c.res.site<SeoState>('seo', c.siteId);
        const limit = queryInt(c, 'limit', 90, 1, 400);
        const all = withChanges(s.history);
        return ok({ site_id: c.siteId, latest: all.at(-1) ?? null, history: all.reverse().slice(0, limit) });
      },
    },
  ],
};

export interface BacklinkLink {
  id: number;
  url: string;
  text: string;
  anchor: string;
  links: number;
  posts: number;
  sites: number;
}

export interface BacklinkDomain {
  id: number;
  domain: string;
  your_site_id: number | null;
  links: BacklinkLink[];
  found_on: { url: string; site_id: number; site_domain: string }[];
}

export interface BacklinksState {
  domains: BacklinkDomain[];
}

const bl = (c: Ctx): BacklinksState => c.res.account<BacklinksState>('backlinks');

function domainSummary(d: BacklinkDomain): Record<string, unknown> {
  return { id: d.id, domain: d.domain, your_site_id: d.your_site_id, links: d.links.reduce((n, l) => n + l.links, 0), posts: d.links.reduce((n, l) => n + l.posts, 0), sites: new Set(d.found_on.map((f) => f.site_id)).size };
}

function linkOf(c: Ctx): { d: BacklinkDomain; l: BacklinkLink } {
  for (const d of bl(c).domains) {
    const l = d.links.find((x) => x.id === c.params.anchor_id);
    if (l) return { d, l };
  }
  return fail('not_found', `no link ${c.params.anchor_id}`);
}

/** One link_edit job per site carrying the link (spec: "one job per site"). */
function queueJobs(c: Ctx, d: BacklinkDomain): number {
  const sites = [...new Set(d.found_on.map((f) => f.site_id))];
  for (const siteId of sites) {
    const job = c.world.addJob({ type: 'link_edit', site_id: siteId, state: 'queued' });
    c.res.actCtx('backlinks', null).later(1, 'job_done', { job: job.id });
  }
  return sites.length;
}

export const backlinksFamily: Family<BacklinksState> = {
  name: 'backlinks',
  per: 'account',
  seed: ({ rng, world }) => {
    const targets = ['partner-shop.example.org', 'supplier.example.net', ...world.sites.slice(1, 2).map((x) => x.domain)];
    const carriers = world.sites.slice(0, 3);
    return {
      domains: targets.map((domain, i) => {
        const own = world.sites.find((x) => x.domain === domain);
        const links = [1, 2].map((k) => ({ id: (i + 1) * 100 + k, url: `https://${domain}/${k === 1 ? '' : 'offer'}`, text: k === 1 ? domain : 'our offer', anchor: `<a href="https://${domain}/">${k === 1 ? domain : 'our offer'}</a>`, links: rng.int(1, 6), posts: rng.int(1, 4), sites: 1 }));
        const found_on = carriers.map((s, j) => ({ url: `https://${s.domain}/blog/post-${j + 1}`, site_id: s.id, site_domain: s.domain }));
        return { id: i + 1, domain, your_site_id: own?.id ?? null, links, found_on };
      }),
    };
  },
  onSiteRemoved: (s, siteId) => {
    for (const d of s.domains) d.found_on = d.found_on.filter((f) => f.site_id !== siteId);
  },
  actions: {
    job_done: (_s, args, a) => void a.world.setJobState(args.job as number, 'done'),
  },
  routes: [
    { method: 'GET', path: '/backlink-tracker', scope: 'sites:read', handler: (c) => ok(bl(c).domains.map(domainSummary)) },
    {
      method: 'GET',
      path: '/backlink-tracker/{domain_id}',
      scope: 'sites:read',
      handler: (c) => {
        const d = find(bl(c).domains, c.params.domain_id as number, 'backlink domain');
        const sum = domainSummary(d);
        return ok({ ...sum, links: d.links, found_on: d.found_on });
      },
    },
    {
      method: 'PATCH',
      path: '/backlink-tracker/links/{anchor_id}',
      scope: 'content:write',
      handler: (c) => {
        const url = str(c, 'url', { pattern: /^https?:\/\/\S+$/ });
        const text = str(c, 'text', { min: 1, max: 300 });
        const { d, l } = linkOf(c);
        if (url !== undefined) l.url = url;
        if (text !== undefined) l.text = text;
        l.anchor = `<a href="${l.url}">${l.text}</a>`;
        return ok({ queued: true, sites: queueJobs(c, d) }, 202);
      },
    },
    {
      method: 'DELETE',
      path: '/backlink-tracker/links/{anchor_id}',
      scope: 'content:write',
      handler: (c) => {
        requireConfirm(c);
        const { d, l } = linkOf(c);
        d.links = d.links.filter((x) => x !== l);
        return ok({ queued: true, sites: queueJobs(c, d) }, 202);
      },
    },
  ],
};
