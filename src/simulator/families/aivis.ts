/**
 * AI visibility (spec 2 "AI visibility"): the account-level `aivis` family. A brand's
 * `visibility` is kept on the brand (drift and the `move` action change it, keeping
 * `prev_visibility`); prompt answers are generated per check.
 */
import type { Family } from '../resources.js';
import { fail, find, int, invalid, ok, queryInt, reqStr, requireConfirm, str, strings, type Ctx } from '../routes.js';
import { DAY_MS, LANGUAGES, byIdOrRandom, dateOf, isoAgo, locationOf, nudge, round } from './common.js';

const PLANS_URL = 'https://panel.example.com/ai-visibility/plans';
const ENGINES = [
  { key: 'assistant_a', name: 'Assistant A', default: true },
  { key: 'assistant_b', name: 'Assistant B', default: true },
  { key: 'assistant_c', name: 'Assistant C', default: false },
];
const DEFAULT_ENGINES = ENGINES.filter((e) => e.default).map((e) => e.key);

export interface Market {
  location_code: number;
  location: string;
  country: string;
  language_code: string;
  language: string;
}

export interface Brand {
  id: number;
  domain: string;
  brand_name: string;
  hosted_site_id: number | null;
  market: Market;
  visibility: number | null;
  prev_visibility: number | null;
  share_of_voice: number | null;
  mentions: number;
  answers: number;
  last_checked_at: string | null;
  url: string;
}

export interface Answer {
  engine: string;
  assistant: string;
  checked_at: string;
  mentioned: boolean;
  cited: boolean;
  rank: number | null;
  cited_url: string | null;
  snippet: string;
  sources: number;
  answer: string;
}

export interface Prompt {
  id: number;
  brand_id: number;
  text: string;
  active: boolean;
  engines: string[];
  visibility: number | null;
  change: number | null;
  checks: number;
  mentions: number;
  last_checked_at: string | null;
  answers: Answer[];
  history: { checked_at: string; visibility: number }[];
}

export interface AivisState {
  plan: { active: boolean; plan: string; paid_until: string; prompt_limit: number; cadence: string; reduced_this_month: boolean };
  brands: Brand[];
  prompts: Prompt[];
  trend: Record<string, { day: string; visibility: number; answers: number }[]>;
  competitors: Record<string, { domain: string; citations: number; prompts_hit: number; last_seen_at: string }[]>;
}

const aivis = (c: Ctx): AivisState => c.res.account<AivisState>('aivis');

function marketOf(code: number, lang: string): Market {
  const loc = locationOf(code);
  const language = LANGUAGES.find((l) => l.code === lang);
  if (!loc) invalid('location_code', 'is not a location from GET /rank/locations', code);
  if (!language) invalid('language_code', `must be one of ${LANGUAGES.map((l) => l.code).join(', ')}`, lang);
  return { location_code: loc.code, location: loc.name, country: loc.country, language_code: language.code, language: language.name };
}

function answersFor(p: Prompt, brand: Brand, mentionedShare: number, at: string, pick: () => number): Answer[] {
  return p.engines.map((engine) => {
    const mentioned = pick() < mentionedShare;
    const cited = mentioned && pick() < 0.6;
    const name = ENGINES.find((e) => e.key === engine)?.name ?? engine;
    return {
      engine,
      assistant: name,
      checked_at: at,
      mentioned,
      cited,
      rank: mentioned ? 1 + Math.floor(pick() * 5) : null,
      cited_url: cited ? `https://${brand.domain}/` : null,
      snippet: mentioned ? `${brand.brand_name} is one option …` : 'Popular options include …',
      sources: 3 + Math.floor(pick() * 6),
      answer: mentioned ? `For "${p.text}", ${brand.brand_name} (${brand.domain}) is often recommended.` : `For "${p.text}", several providers are recommended.`,
    };
  });
}

function promptView(p: Prompt, detail: boolean): Record<string, unknown> {
  const { answers, history, ...rest } = p;
  const latest = Object.fromEntries(answers.map((a) => [a.engine, { mentioned: a.mentioned, cited: a.cited, rank: a.rank }]));
  if (detail) return { ...rest, latest, answers, history: history.slice(-30) };
  return { ...rest, latest, answers: answers.length };
}

/** A round of checks for a brand: its prompts get answers, visibility moves (or is set). */
function checkBrand(s: AivisState, brand: Brand, visibility: number | null, at: string, pick: () => number): void {
  const prompts = s.prompts.filter((p) => p.brand_id === brand.id && p.active);
  const share = visibility === null ? (brand.visibility ?? 30) / 100 : visibility / 100;
  let mentions = 0;
  let answers = 0;
  for (const p of prompts) {
    p.answers = answersFor(p, brand, share, at, pick);
    const pv = p.answers.length === 0 ? 0 : round((100 * p.answers.filter((a) => a.mentioned).length) / p.answers.length, 1);
    p.change = p.visibility === null ? null : round(pv - p.visibility, 1);
    p.visibility = pv;
    p.checks++;
    p.mentions += p.answers.filter((a) => a.mentioned).length;
    p.last_checked_at = at;
    p.history.push({ checked_at: at, visibility: pv });
    if (p.history.length > 400) p.history.shift();
    mentions += p.answers.filter((a) => a.mentioned).length;
    answers += p.answers.length;
  }
  brand.prev_visibility = brand.visibility;
  brand.visibility = visibility ?? (answers === 0 ? brand.visibility : round((100 * mentions) / answers, 1));
  brand.mentions += mentions;
  brand.answers += answers;
  brand.share_of_voice = brand.visibility === null ? null : round(brand.visibility * 0.6, 1);
  brand.last_checked_at = at;
  const trend = (s.trend[brand.id] ??= []);
  trend.push({ day: at.slice(0, 10), visibility: brand.visibility ?? 0, answers });
  if (trend.length > 400) trend.shift();
}

export const aivisFamily: Family<AivisState> = {
  name: 'aivis',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: AivisState = { plan: { active: true, plan: 'aivis-25', paid_until: dateOf(epoch, 55), prompt_limit: 25, cadence: 'weekly', reduced_this_month: false }, brands: [], prompts: [], trend: {}, competitors: {} };
    const site = world.sites[0];
    if (!site) return s;
    const brand: Brand = { id: 1, domain: site.domain, brand_name: site.name, hosted_site_id: site.id, market: marketOf(2840, 'en'), visibility: null, prev_visibility: null, share_of_voice: null, mentions: 0, answers: 0, last_checked_at: null, url: 'https://panel.example.com/ai-visibility/brands/1' };
    s.brands.push(brand);
    for (let i = 1; i <= 3; i++) {
      s.prompts.push({ id: 100 + i, brand_id: 1, text: `Which ${['agency', 'shop', 'service'][i - 1]} do you recommend for ${site.name}?`, active: true, engines: [...DEFAULT_ENGINES], visibility: null, change: null, checks: 0, mentions: 0, last_checked_at: null, answers: [], history: [] });
    }
    const target = rng.int(20, 70);
    for (let w = 3; w >= 1; w--) checkBrand(s, brand, nudge(rng, target, 5, 0, 100, 1), isoAgo(epoch, w * 7 * DAY_MS), () => rng.float());
    s.competitors[1] = [{ domain: 'rival.example.org', citations: rng.int(2, 20), prompts_hit: rng.int(1, 3), last_seen_at: isoAgo(epoch, 7 * DAY_MS) }];
    return s;
  },
  actions: {
    /** A round of checks for a brand (args.brand_id, default random; args.visibility: the new percentage). */
    move: (s, args, a) => {
      const brand = byIdOrRandom(s.brands, args.brand_id, a.rng);
      if (!brand) return undefined;
      const visibility = typeof args.visibility === 'number' ? args.visibility : nudge(a.rng, brand.visibility ?? 30, 15, 0, 100, 1);
      checkBrand(s, brand, visibility, a.iso(), () => a.rng.float());
      a.record('checked', { brand_id: brand.id, from: brand.prev_visibility, to: brand.visibility });
      return brand;
    },
  },
  drift: (s, a) => void aivisFamily.actions!.move!(s, {}, a),
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/ai-visibility',
      scope: 'aivis:read',
      handler: (c) => {
        const s = aivis(c);
        const { prompt_limit, ...plan } = s.plan;
        const vis = s.brands.map((b) => b.visibility).filter((v): v is number => v !== null);
        return ok({ ...plan, prompts: { used: s.prompts.filter((p) => p.active).length, limit: prompt_limit }, brands: s.brands.length, visibility: vis.length ? round(vis.reduce((x, y) => x + y, 0) / vis.length, 1) : null, plans_url: PLANS_URL });
      },
    },
    {
      method: 'GET',
      path: '/ai-visibility/plans',
      scope: 'aivis:read',
      handler: () =>
        ok({
          plans: [
            { key: 'aivis-25', name: 'AI visibility 25', price_usd: '19.00', prompts: 25, cadence: 'weekly', summary: '25 prompts asked weekly' },
            { key: 'aivis-100', name: 'AI visibility 100', price_usd: '59.00', prompts: 100, cadence: 'daily', summary: '100 prompts asked daily' },
          ],
          pack: { key: 'aivis-pack-25', name: '25 more prompts', price_usd: '9.00', prompts: 25, max_per_account: 8 },
          engines: ENGINES,
          months_offered: [1, 12],
          can_buy: true,
          plans_url: PLANS_URL,
        }),
    },
    { method: 'GET', path: '/ai-visibility/brands', scope: 'aivis:read', handler: (c) => ok(aivis(c).brands.map((b) => ({ ...b, prompts: aivis(c).prompts.filter((p) => p.brand_id === b.id).length }))) },
    {
      method: 'GET',
      path: '/ai-visibility/brands/{brand_id}',
      scope: 'aivis:read',
      handler: (c) => {
        const s = aivis(c);
        const days = queryInt(c, 'days', 90, 1, 400);
        const b = find(s.brands, c.params.brand_id as number, 'brand');
        const prompts = s.prompts.filter((p) => p.brand_id === b.id);
        const since = dateOf(c.world.time(), -days);
        return ok({ ...b, prompts: prompts.length, prompt_list: prompts.map((p) => promptView(p, false)), competitors: s.competitors[b.id] ?? [], trend: (s.trend[b.id] ?? []).filter((t) => t.day >= since), suggested_prompts: [`Is ${b.brand_name} any good?`, `Alternatives to ${b.brand_name}`] });
      },
    },
    { method: 'GET', path: '/ai-visibility/prompts/{prompt_id}', scope: 'aivis:read', handler: (c) => ok(promptView(find(aivis(c).prompts, c.params.prompt_id as number, 'prompt'), true)) },
    {
      method: 'POST',
      path: '/ai-visibility/brands',
      scope: 'aivis:write',
      handler: (c) => {
        const s = aivis(c);
        const domain = reqStr(c, 'domain', { min: 3, max: 253 }).replace(/^https?:\/\//, '').replace(/^www\./, '').replace(/\/.*$/, '').toLowerCase();
        const market = marketOf(int(c, 'location_code') ?? 2840, str(c, 'language_code') ?? 'en');
        const existing = s.brands.find((b) => b.domain === domain);
        if (existing) return ok(existing, 201);
        if (!s.plan.active) fail('payment_required', 'AI visibility is not on this account', { plans_url: PLANS_URL });
        const id = c.res.nextId('aivis');
        const b: Brand = { id, domain, brand_name: str(c, 'brand_name', { max: 80 }) ?? domain, hosted_site_id: c.world.sites.find((x) => x.domain === domain)?.id ?? null, market, visibility: null, prev_visibility: null, share_of_voice: null, mentions: 0, answers: 0, last_checked_at: null, url: `https://panel.example.com/ai-visibility/brands/${id}` };
        s.brands.push(b);
        return ok(b, 201);
      },
    },
    {
      method: 'PATCH',
      path: '/ai-visibility/brands/{brand_id}',
      scope: 'aivis:write',
      handler: (c) => {
        const b = find(aivis(c).brands, c.params.brand_id as number, 'brand');
        const name = str(c, 'brand_name', { min: 1, max: 80 });
        const code = int(c, 'location_code');
        const lang = str(c, 'language_code');
        if (code !== undefined || lang !== undefined) b.market = marketOf(code ?? b.market.location_code, lang ?? b.market.language_code);
        if (name !== undefined) b.brand_name = name;
        return ok(b);
      },
    },
    {
      method: 'DELETE',
      path: '/ai-visibility/brands/{brand_id}',
      scope: 'aivis:write',
      handler: (c) => {
        const s = aivis(c);
        const b = find(s.brands, c.params.brand_id as number, 'brand');
        requireConfirm(c);
        s.brands = s.brands.filter((x) => x !== b);
        s.prompts = s.prompts.filter((p) => p.brand_id !== b.id);
        return ok({ removed: true, id: b.id });
      },
    },
    {
      method: 'POST',
      path: '/ai-visibility/brands/{brand_id}/prompts',
      scope: 'aivis:write',
      handler: (c) => {
        const s = aivis(c);
        const b = find(s.brands, c.params.brand_id as number, 'brand');
        const raw = c.body.prompts;
        const texts = typeof raw === 'string' ? raw.split('\n').map((t) => t.trim()).filter(Boolean) : (strings(c, 'prompts', { required: true, min: 1 }) as string[]);
        if (texts.length === 0) invalid('prompts', 'is required');
        const bad = texts.find((t) => t.length < 6 || t.length > 400);
        if (bad !== undefined) invalid('prompts', 'must be 6-400 characters each', bad);
        const engines = (strings(c, 'engines') ?? []).filter((e) => ENGINES.some((x) => x.key === e));
        const room = Math.max(0, s.plan.prompt_limit - s.prompts.filter((p) => p.active).length);
        const added: Prompt[] = texts.slice(0, room).map((text) => ({ id: c.res.nextId('aivis'), brand_id: b.id, text, active: true, engines: engines.length ? engines : [...DEFAULT_ENGINES], visibility: null, change: null, checks: 0, mentions: 0, last_checked_at: null, answers: [], history: [] }));
        s.prompts.push(...added);
        const rest = texts.slice(room);
        return ok({ added: added.map((p) => promptView(p, false)), not_added: { count: rest.length, prompts: rest, limit: s.plan.prompt_limit, plans_url: PLANS_URL } }, 201);
      },
    },
    {
      // S13: reply shape "not shown": the prompt as in brand detail.
      method: 'PATCH',
      path: '/ai-visibility/prompts/{prompt_id}',
      scope: 'aivis:write',
      handler: (c) => {
        const p = find(aivis(c).prompts, c.params.prompt_id as number, 'prompt');
        const engines = (strings(c, 'engines', { required: true }) as string[]).filter((e) => ENGINES.some((x) => x.key === e));
        p.engines = engines.length ? engines : [...DEFAULT_ENGINES];
        return ok(promptView(p, false));
      },
    },
  ],
};
