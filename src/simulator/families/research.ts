/**
 * Keyword research and domain overview (spec 2): the account-level `research` family.
 * Metrics are generated from a hash of the question (same question, same answer); credits
 * are spent as the spec says (none for a repeat within 30 / 14 days) and drift spends a
 * few as other users of the account would.
 */
import { Random } from '../random.js';
import { deriveSeed, type Family } from '../resources.js';
import { fail, find, int, invalid, ok, reqStr, str, strings, type Ctx } from '../routes.js';
import { DAY_MS, KEYWORD_WORDS, LANGUAGES, LOCATIONS, isoAgo, locationOf, msBetween } from './common.js';

const KINDS = ['matching', 'related', 'questions', 'ideas'] as const;
const PLANS_URL = 'https://panel.example.com/research/plans';

interface Tool {
  active: boolean;
  plan: string | null;
  credits: { used: number; limit: number };
}

export interface ResearchState {
  keyword_research: Tool;
  domain_overview: Tool;
  lists: { id: number; name: string; site_id: number | null; keywords: KeywordMetrics[] }[];
  /** When each question was last asked (key -> ISO time), for the free repeats. */
  asked: Record<string, string>;
}

export interface KeywordMetrics {
  keyword: string;
  search_volume: number;
  cpc_usd: number;
  competition: number;
  difficulty: number;
  intent: string;
  trend_12m: number[];
}

const research = (c: Ctx): ResearchState => c.res.account<ResearchState>('research');

function metrics(seed: number, keyword: string): KeywordMetrics {
  const r = new Random(deriveSeed(seed, 0, `kw:${keyword}`));
  const volume = r.int(10, 50_000);
  return { keyword, search_volume: volume, cpc_usd: r.int(5, 900) / 100, competition: r.int(0, 100) / 100, difficulty: r.int(1, 100), intent: r.pick(['informational', 'commercial', 'transactional', 'navigational']), trend_12m: Array.from({ length: 12 }, () => Math.round(volume * (0.7 + r.float() * 0.6))) };
}

/** Spends `credits` of a tool unless the same question was asked within `days`; 402 when the plan is out of credits. */
function spend(c: Ctx, tool: Tool, key: string, days: number, credits: number): number {
  const s = research(c);
  const now = c.world.time();
  const last = s.asked[key];
  if (last && (days === Infinity || msBetween(last, now) < days * DAY_MS)) return 0;
  if (!tool.active) fail('payment_required', 'this research tool is not on the account', { plans_url: PLANS_URL });
  if (tool.credits.used + credits > tool.credits.limit) fail('payment_required', `not enough research credits: ${tool.credits.limit - tool.credits.used} left, ${credits} needed`, { plans_url: PLANS_URL, used: tool.credits.used, limit: tool.credits.limit });
  tool.credits.used += credits;
  s.asked[key] = now.toISOString();
  c.world.note('research.credits_used', undefined, { key, credits, used: tool.credits.used });
  return credits;
}

function market(c: Ctx): { location_code: number; language_code: string } {
  const code = int(c, 'location_code') ?? 2840;
  if (!locationOf(code)) invalid('location_code', 'is not a location from GET /rank/locations', code);
  const lang = str(c, 'language_code', { oneOf: LANGUAGES.map((l) => l.code) }) ?? 'en';
  return { location_code: code, language_code: lang };
}

function domainOf(field: string, raw: string): string {
  const d = raw.replace(/^https?:\/\//, '').replace(/^www\./, '').replace(/\/.*$/, '').toLowerCase();
  if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(d)) invalid(field, 'is not a domain name', raw);
  return d;
}

export const researchFamily: Family<ResearchState> = {
  name: 'research',
  per: 'account',
  seed: ({ rng, world, epoch }) => ({
    keyword_research: { active: true, plan: 'research-basic', credits: { used: rng.int(10, 60), limit: 200 } },
    domain_overview: { active: true, plan: 'research-basic', credits: { used: rng.int(0, 20), limit: 50 } },
    lists: [{ id: 1, name: 'Ideas', site_id: world.sites[0]?.id ?? null, keywords: ['bakery near me', 'sourdough bread'].map((k) => metrics(world.seed, k)) }],
    asked: { seeded: isoAgo(epoch, DAY_MS) },
  }),
  actions: {
    /** Credits used elsewhere on the account (args.tool: keyword_research | domain_overview; args.credits). */
    use: (s, args, a) => {
      const tool = args.tool === 'domain_overview' ? s.domain_overview : s.keyword_research;
      const credits = typeof args.credits === 'number' ? args.credits : a.rng.int(1, 4);
      tool.credits.used = Math.min(tool.credits.limit, tool.credits.used + credits);
      a.record('credits_used', { tool: args.tool ?? 'keyword_research', credits, used: tool.credits.used });
      return tool;
    },
  },
  drift: (s, a) => void researchFamily.actions!.use!(s, { tool: a.rng.chance(0.7) ? 'keyword_research' : 'domain_overview' }, a),
  driftWeight: 1,
  routes: [
    { method: 'GET', path: '/research', scope: 'research:read', handler: (c) => ok({ keyword_research: research(c).keyword_research, domain_overview: research(c).domain_overview }) },
    { method: 'GET', path: '/research/markets', scope: 'research:read', handler: () => ok(LOCATIONS.filter((l) => l.type === 'Country').map((l) => ({ location_code: l.code, name: l.name, languages: LANGUAGES.filter((x) => x.code === 'en' || l.country.toLowerCase() === x.code).map((x) => [x.code, x.name]) }))) },
    {
      method: 'POST',
      path: '/keyword-research',
      scope: 'research:run',
      handler: (c) => {
        const keyword = reqStr(c, 'keyword', { min: 1, max: 80 }).trim().toLowerCase();
        const kind = str(c, 'kind', { oneOf: KINDS }) ?? 'matching';
        const m = market(c);
        const used = spend(c, research(c).keyword_research, `kr:${kind}:${keyword}:${m.location_code}:${m.language_code}`, 30, 1);
        const related = KEYWORD_WORDS.map((w) => (kind === 'questions' ? `how to ${keyword} ${w}` : `${keyword} ${w}`)).map((k) => metrics(c.world.seed, k));
        related.sort((x, y) => y.search_volume - x.search_volume);
        return ok({ keyword, kind, credits_used: used, seed: metrics(c.world.seed, keyword), total_in_database: related.length * 37, keywords: related.slice(0, 100) });
      },
    },
    {
      method: 'POST',
      path: '/keyword-research/local-volumes',
      scope: 'research:run',
      handler: (c) => {
        const keywords = strings(c, 'keywords', { required: true, min: 1, max: 1000 }) as string[];
        const code = int(c, 'location_code', { required: true }) as number;
        const loc = locationOf(code) ?? invalid('location_code', 'is not a location from GET /rank/locations', code);
        const lang = str(c, 'language_code', { oneOf: LANGUAGES.map((l) => l.code) }) ?? 'en';
        const used = spend(c, research(c).keyword_research, `lv:${code}:${lang}:${[...keywords].sort().join('|')}`, Infinity, 4);
        return ok({ location: loc.name, credits_used: used, volumes: Object.fromEntries(keywords.map((k) => [k, Math.round(metrics(c.world.seed, k).search_volume / 20)])) });
      },
    },
    {
      method: 'POST',
      path: '/domain-overview',
      scope: 'research:run',
      handler: (c) => {
        const domain = domainOf('domain', reqStr(c, 'domain'));
        const m = market(c);
        const used = spend(c, research(c).domain_overview, `do:${domain}:${m.location_code}:${m.language_code}`, 14, 1);
        const kws = KEYWORD_WORDS.map((w, i) => ({ ...metrics(c.world.seed, `${domain.split('.')[0]} ${w}`), position: i + 1, url: `https://${domain}/`, traffic: 100 - i * 5 }));
        return ok({ domain, credits_used: used, metrics: { keywords: kws.length, traffic: kws.reduce((n, k) => n + k.traffic, 0), traffic_value: 1234.5, positions: [3, 5, 8, 10, 12, 9, 7, 5, 4, 3, 2, 1] }, keywords: kws, pages: [{ url: `https://${domain}/`, keywords: kws.length, traffic: 600 }], competitors: [{ domain: 'rival.example.org', shared_keywords: 5, average_position: 7.5 }] });
      },
    },
    {
      method: 'POST',
      path: '/domain-overview/gap',
      scope: 'research:run',
      handler: (c) => {
        const domain = domainOf('domain', reqStr(c, 'domain'));
        const competitors = (strings(c, 'competitors', { required: true, min: 1, max: 3 }) as string[]).map((d) => domainOf('competitors', d));
        const m = market(c);
        let used = 0;
        for (const comp of competitors) used += spend(c, research(c).domain_overview, `gap:${domain}:${comp}:${m.location_code}:${m.language_code}`, 14, 1);
        const keywords = KEYWORD_WORDS.slice(0, 6).map((w, i) => ({ ...metrics(c.world.seed, `${w} ${domain.split('.')[0]}`), competitor_positions: Object.fromEntries(competitors.map((d, j) => [d, i + j + 1])) }));
        return ok({ domain, competitors, credits_used: used, keywords });
      },
    },
    { method: 'GET', path: '/keyword-research/lists', scope: 'research:read', handler: (c) => ok(research(c).lists.map((l) => ({ ...l, keywords: l.keywords.length }))) },
    { method: 'GET', path: '/keyword-research/lists/{list_id}', scope: 'research:read', handler: (c) => ok(find(research(c).lists, c.params.list_id as number, 'keyword list')) },
  ],
};
