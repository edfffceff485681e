/**
 * Reputation monitoring (spec 2 "Reputation monitoring"): the account-level `reputation`
 * family. Reviews arrive through the `review` action (drift or control); a profile's
 * `rating` follows its reviews and keeps `previous_rating`; `poor_unanswered` is derived.
 */
import type { ActCtx, Family } from '../resources.js';
import { fail, find, int, invalid, ok, reqStr, str, type Ctx } from '../routes.js';
import { DAY_MS, HOUR_MS, byIdOrRandom, dateOf, isoAgo, msBetween, round } from './common.js';

const PLATFORMS = { platform_a: 'Review platform A', platform_b: 'Review platform B', platform_c: 'Search platform C' } as const;
type Platform = keyof typeof PLATFORMS;
const PLANS_URL = 'https://panel.example.com/reputation/plans';
/** The per-business daily limit of searches (spec: "given by the service"). */
const SEARCHES_PER_DAY = 3;
const COUNTRIES = [
  { location_code: 2840, name: 'United States', country: 'US' },
  { location_code: 2826, name: 'United Kingdom', country: 'GB' },
  { location_code: 2276, name: 'Germany', country: 'DE' },
  { location_code: 2528, name: 'Netherlands', country: 'NL' },
];

export interface Review {
  rating: number;
  title: string;
  text: string;
  author: string;
  url: string;
  published_at: string;
  replied: boolean;
  poor: boolean;
}

export interface Profile {
  platform: Platform;
  platform_name: string;
  state: string;
  name: string;
  address: string;
  url: string;
  rating: number | null;
  reviews_count: number;
  previous_rating: number | null;
  last_read_at: string | null;
  error: string;
}

export interface Candidate {
  id: string;
  name: string;
  address: string;
  url: string;
}

export interface WatchedBusiness {
  id: number;
  name: string;
  website: string | null;
  country: string;
  location_code: number;
  covered: boolean;
  waiting_for_confirmation: boolean;
  created_at: string;
  searching: boolean;
  reading: boolean;
}

export interface ReputationState {
  plan: { active: boolean; plan: string; unlimited: boolean; paid_until: string; businesses_included: number; brand_terms_included: number; brand_page_one: boolean };
  businesses: WatchedBusiness[];
  /** Per business id, per platform. */
  profiles: Record<string, Partial<Record<Platform, Profile>>>;
  candidates: Record<string, Partial<Record<Platform, Candidate[]>>>;
  reviews: Record<string, Partial<Record<Platform, Review[]>>>;
  history: Record<string, Partial<Record<Platform, { read_at: string; rating: number | null; reviews_count: number; poor_unanswered: number }[]>>>;
  brand_terms: Record<string, { id: number; term: string; last_checked_at: string; page_one: Record<string, unknown>[]; lost: number }[]>;
  searches: Record<string, string[]>;
}

const rep = (c: Ctx): ReputationState => c.res.account<ReputationState>('reputation');

function poorUnanswered(s: ReputationState, bizId: number, platform?: Platform): number {
  const byPlatform = s.reviews[bizId] ?? {};
  return (Object.keys(byPlatform) as Platform[]).filter((p) => platform === undefined || p === platform).reduce((n, p) => n + (byPlatform[p] ?? []).filter((r) => r.poor && !r.replied).length, 0);
}

function profileView(s: ReputationState, bizId: number, p: Profile): Record<string, unknown> {
  return { ...p, poor_unanswered: poorUnanswered(s, bizId, p.platform) };
}

function businessView(s: ReputationState, b: WatchedBusiness, detail: boolean): Record<string, unknown> {
  const { searching, reading, ...base } = b;
  const profiles = Object.values(s.profiles[b.id] ?? {}).filter(Boolean) as Profile[];
  const out: Record<string, unknown> = { ...base, poor_unanswered: poorUnanswered(s, b.id), profiles: profiles.length };
  if (!detail) return out;
  const platforms = (Object.keys(PLATFORMS) as Platform[]).map((platform) => {
    const reviews = [...((s.reviews[b.id] ?? {})[platform] ?? [])].reverse();
    // Poor unanswered first (spec), then newest first.
    reviews.sort((x, y) => Number(y.poor && !y.replied) - Number(x.poor && !x.replied));
    const profile = (s.profiles[b.id] ?? {})[platform];
    return { platform, platform_name: PLATFORMS[platform], profile: profile ? profileView(s, b.id, profile) : null, candidates: (s.candidates[b.id] ?? {})[platform] ?? [], reviews, history: (s.history[b.id] ?? {})[platform] ?? [] };
  });
  return { ...out, searching, reading, platforms, brand_terms: s.brand_terms[b.id] ?? [] };
}

function readProfile(s: ReputationState, bizId: number, p: Profile, at: string): void {
  const reviews = (s.reviews[bizId] ?? {})[p.platform] ?? [];
  const rating = reviews.length ? round(reviews.reduce((n, r) => n + r.rating, 0) / reviews.length, 1) : p.rating;
  if (rating !== p.rating) p.previous_rating = p.rating;
  p.rating = rating;
  p.reviews_count = reviews.length;
  p.last_read_at = at;
  const h = (((s.history[bizId] ??= {})[p.platform]) ??= []);
  h.push({ read_at: at, rating: p.rating, reviews_count: p.reviews_count, poor_unanswered: poorUnanswered(s, bizId, p.platform) });
  if (h.length > 200) h.shift();
}

/** A review; its url is unique within the account (business, platform and a sequence number), since reviews have no id. */
function makeReview(rating: number, at: string, n: number, pick: <T>(xs: readonly T[]) => T, bizId: number, platform: Platform): Review {
  const poor = rating <= 2;
  return { rating, title: poor ? pick(['Disappointed', 'Not again', 'Rude staff']) : pick(['Great', 'Lovely place', 'Recommended']), text: poor ? 'Waited an hour and nobody answered the phone.' : 'Friendly and quick, will come back.', author: `${pick(['Alex', 'Sam', 'Kim', 'Jo', 'Lee'])} ${String.fromCharCode(65 + (n % 26))}.`, url: `https://${platform}.example.com/biz/${bizId}/reviews/${n}`, published_at: at, replied: false, poor };
}

/** A new review on a confirmed profile (args.business_id, args.platform, args.rating 1-5, args.replied). */
function addReview(s: ReputationState, args: Record<string, unknown>, a: ActCtx): Review | undefined {
  const b = byIdOrRandom(s.businesses, args.business_id, a.rng);
  if (!b) return undefined;
  const confirmed = (Object.keys(s.profiles[b.id] ?? {}) as Platform[]).filter((p) => s.profiles[b.id]?.[p]);
  const platform = (typeof args.platform === 'string' ? args.platform : confirmed.length ? a.rng.pick(confirmed) : undefined) as Platform | undefined;
  const profile = platform ? s.profiles[b.id]?.[platform] : undefined;
  if (!platform || !profile) return undefined;
  const rating = typeof args.rating === 'number' ? args.rating : a.rng.chance(0.25) ? a.rng.int(1, 2) : a.rng.int(3, 5);
  if (!Number.isInteger(rating) || rating < 1 || rating > 5) fail('validation_failed', 'rating must be an integer from 1 to 5');
  const review = makeReview(rating, a.iso(), a.nextId(), (xs) => a.rng.pick(xs), b.id, platform);
  if (args.replied === true) review.replied = true;
  (((s.reviews[b.id] ??= {})[platform]) ??= []).push(review);
  readProfile(s, b.id, profile, a.iso());
  a.record('review', { business_id: b.id, platform, rating, poor: review.poor });
  return review;
}

export const reputationFamily: Family<ReputationState> = {
  name: 'reputation',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: ReputationState = { plan: { active: true, plan: 'reputation-3', unlimited: false, paid_until: dateOf(epoch, 52), businesses_included: 3, brand_terms_included: 5, brand_page_one: true }, businesses: [], profiles: {}, candidates: {}, reviews: {}, history: {}, brand_terms: {}, searches: {} };
    const site = world.sites[0];
    if (!site) return s;
    const b: WatchedBusiness = { id: 1, name: site.name, website: `https://${site.domain}`, country: 'United States', location_code: 2840, covered: true, waiting_for_confirmation: false, created_at: isoAgo(epoch, 90 * DAY_MS), searching: false, reading: false };
    s.businesses.push(b);
    s.profiles[1] = {};
    s.reviews[1] = {};
    for (const platform of ['platform_a', 'platform_b'] as Platform[]) {
      const p: Profile = { platform, platform_name: PLATFORMS[platform], state: 'ok', name: site.name, address: '1 Main Street, Springfield', url: `https://${platform}.example.com/biz/1`, rating: null, reviews_count: 0, previous_rating: null, last_read_at: null, error: '' };
      s.profiles[1][platform] = p;
      const reviews: Review[] = [];
      for (let i = 0; i < rng.int(4, 9); i++) {
        const r = makeReview(rng.chance(0.15) ? 2 : rng.int(4, 5), isoAgo(epoch, rng.int(2, 80) * DAY_MS), i + 1, (xs) => rng.pick(xs), 1, platform);
        r.replied = true;
        reviews.push(r);
      }
      reviews.sort((x, y) => x.published_at.localeCompare(y.published_at));
      s.reviews[1][platform] = reviews;
      readProfile(s, 1, p, isoAgo(epoch, HOUR_MS));
    }
    s.brand_terms[1] = [{ id: 11, term: site.name, last_checked_at: isoAgo(epoch, DAY_MS), page_one: [{ position: 1, url: `https://${site.domain}/`, domain: site.domain, title: site.name, yours: true, new: false }], lost: 0 }];
    return s;
  },
  actions: {
    review: (s, args, a) => addReview(s, args, a),
    /** Timer after POST businesses or search: candidates arrive. */
    candidates: (s, args, a) => {
      const b = s.businesses.find((x) => x.id === args.business_id);
      if (!b) return;
      b.searching = false;
      b.waiting_for_confirmation = true;
      s.candidates[b.id] = Object.fromEntries((Object.keys(PLATFORMS) as Platform[]).map((p, i) => [p, [{ id: `c${b.id}-${p}-${a.tick}`, name: b.name, address: `${10 + i} High Street`, url: `https://${p}.example.com/biz/${b.id}` }]]));
    },
    /** Timer after confirming a profile: its first reading. */
    read: (s, args, a) => {
      const p = s.profiles[args.business_id as number]?.[args.platform as Platform];
      const b = s.businesses.find((x) => x.id === args.business_id);
      if (b) b.reading = false;
      if (p) readProfile(s, args.business_id as number, p, a.iso());
    },
  },
  drift: (s, a) => void addReview(s, {}, a),
  driftWeight: 2,
  routes: [
    {
      method: 'GET',
      path: '/reputation',
      scope: 'reputation:read',
      handler: (c) => {
        const s = rep(c);
        const profiles = s.businesses.reduce((n, b) => n + Object.values(s.profiles[b.id] ?? {}).filter(Boolean).length, 0);
        return ok({ ...s.plan, businesses: s.businesses.length, profiles, brand_terms: Object.values(s.brand_terms).reduce((n, t) => n + t.length, 0), poor_unanswered: s.businesses.reduce((n, b) => n + poorUnanswered(s, b.id), 0), price_from: '9.00', plans_url: PLANS_URL });
      },
    },
    { method: 'GET', path: '/reputation/countries', scope: 'reputation:read', handler: () => ok(COUNTRIES) },
    { method: 'GET', path: '/reputation/businesses', scope: 'reputation:read', handler: (c) => ok(rep(c).businesses.map((b) => businessView(rep(c), b, false))) },
    { method: 'GET', path: '/reputation/businesses/{business_id}', scope: 'reputation:read', handler: (c) => ok(businessView(rep(c), find(rep(c).businesses, c.params.business_id as number, 'business'), true)) },
    {
      method: 'POST',
      path: '/reputation/businesses',
      scope: 'reputation:write',
      handler: (c) => {
        const s = rep(c);
        const name = reqStr(c, 'name', { min: 1, max: 120 });
        const code = int(c, 'country', { required: true }) as number;
        const country = COUNTRIES.find((x) => x.location_code === code) ?? invalid('country', 'must be a location_code from GET /reputation/countries', code);
        const website = str(c, 'website', { max: 300 }) ?? null;
        if (!s.plan.unlimited && s.businesses.length >= s.plan.businesses_included) fail('payment_required', 'the plan has no room for another business', { plans_url: PLANS_URL });
        const b: WatchedBusiness = { id: c.res.nextId('reputation'), name, website, country: country.name, location_code: code, covered: true, waiting_for_confirmation: false, created_at: c.res.actCtx('reputation', null).iso(), searching: true, reading: false };
        s.businesses.push(b);
        s.profiles[b.id] = {};
        c.res.actCtx('reputation', null).later(1, 'candidates', { business_id: b.id });
        return ok(businessView(s, b, false), 201);
      },
    },
    {
      method: 'DELETE',
      path: '/reputation/businesses/{business_id}',
      scope: 'reputation:write',
      handler: (c) => {
        const s = rep(c);
        const b = find(s.businesses, c.params.business_id as number, 'business');
        s.businesses = s.businesses.filter((x) => x !== b);
        for (const key of ['profiles', 'candidates', 'reviews', 'history', 'brand_terms', 'searches'] as const) delete s[key][b.id];
        return ok({ deleted: true });
      },
    },
    {
      method: 'POST',
      path: '/reputation/businesses/{business_id}/search',
      scope: 'reputation:write',
      handler: (c) => {
        const s = rep(c);
        const b = find(s.businesses, c.params.business_id as number, 'business');
        if (!b.covered) fail('payment_required', 'the plan no longer covers this business', { plans_url: PLANS_URL });
        const now = c.world.time();
        const done = (s.searches[b.id] ?? []).filter((t) => msBetween(t, now) < DAY_MS);
        if (done.length >= SEARCHES_PER_DAY) fail('rate_limited', `at most ${SEARCHES_PER_DAY} searches per business per day`);
        s.searches[b.id] = [...done, now.toISOString()];
        b.searching = true;
        c.res.actCtx('reputation', null).later(1, 'candidates', { business_id: b.id });
        return ok({ queued: true, id: b.id }, 202);
      },
    },
    {
      // S14: reply shape "not shown": the platform block of the business detail.
      method: 'POST',
      path: '/reputation/businesses/{business_id}/profiles',
      scope: 'reputation:write',
      handler: (c) => {
        const s = rep(c);
        const b = find(s.businesses, c.params.business_id as number, 'business');
        const platform = reqStr(c, 'platform', { oneOf: Object.keys(PLATFORMS) }) as Platform;
        const candidate = reqStr(c, 'candidate');
        const list = (s.candidates[b.id] ?? {})[platform] ?? [];
        const profiles = (s.profiles[b.id] ??= {});
        if (candidate === 'none') delete profiles[platform];
        else {
          const cand = list.find((x) => x.id === candidate) ?? invalid('candidate', `must be a candidate id of ${platform} or none`, candidate);
          profiles[platform] = { platform, platform_name: PLATFORMS[platform], state: 'ok', name: cand.name, address: cand.address, url: cand.url, rating: null, reviews_count: 0, previous_rating: null, last_read_at: null, error: '' };
          b.reading = true;
          c.res.actCtx('reputation', null).later(1, 'read', { business_id: b.id, platform });
        }
        delete (s.candidates[b.id] ?? {})[platform];
        b.waiting_for_confirmation = Object.values(s.candidates[b.id] ?? {}).some((x) => (x ?? []).length > 0);
        const block = (businessView(s, b, true).platforms as { platform: string }[]).find((p) => p.platform === platform);
        return ok(block);
      },
    },
  ],
};
