/**
 * Footprint checker (spec 2 "Footprint checker"): the account-level `footprint` family.
 * A new report (drift, Check now, or the `report` action) starts from the previous one's
 * findings; drift sometimes adds a customer-owned finding and lowers the score.
 */
import { PAGING } from '../assumptions.js';
import type { ActCtx, Family } from '../resources.js';
import { fail, find, int, invalid, ok, paged, reqStr, str, strings, type Ctx } from '../routes.js';
import { DAY_MS, dateOf, isoAgo } from './common.js';

const PLANS_URL = 'https://panel.example.com/footprint/plans';
const EXTRA_PACK = 'footprint-external-10';

export interface Finding {
  code: string;
  severity: string;
  owner: 'customer' | 'platform';
  title: string;
  what_it_means: string;
  how_to_fix: string;
  domains: string[];
  count: number;
  is_platform: boolean;
  is_good: boolean;
}

export interface FootprintReport {
  id: number;
  name: string;
  scope: string;
  state: string;
  score: number;
  grade: string;
  findings: Finding[];
  sites: number;
  external_sites: number;
  finished_at: string | null;
  source: string;
}

export interface FootprintState {
  plan: { active: boolean; plan: string; cadence: string; paid_until: string; external_limit: number; manual_runs_used: number; manual_runs_limit: number };
  reports: FootprintReport[];
  external: { id: number; domain: string; group: string | null; added: string }[];
}

const CATALOG: Omit<Finding, 'domains' | 'count'>[] = [
  { code: 'shared_ip', severity: 'critical', owner: 'customer', title: 'Sites share one IP address', what_it_means: 'Search engines can link these sites together.', how_to_fix: 'Move sites to separate addresses.', is_platform: false, is_good: false },
  { code: 'same_analytics_id', severity: 'critical', owner: 'customer', title: 'Same analytics id on several sites', what_it_means: 'One tracking id ties the sites together.', how_to_fix: 'Use a separate id per site.', is_platform: false, is_good: false },
  { code: 'same_whois', severity: 'warning', owner: 'customer', title: 'Same registrant details', what_it_means: 'Public registration data links the domains.', how_to_fix: 'Turn on privacy at the registrar.', is_platform: false, is_good: false },
  { code: 'shared_nameservers', severity: 'info', owner: 'platform', title: 'Shared name servers', what_it_means: 'Handled for you by the platform.', how_to_fix: 'Nothing to do.', is_platform: true, is_good: true },
];

const fp = (c: Ctx): FootprintState => c.res.account<FootprintState>('footprint');

function gradeOf(score: number): string {
  return score >= 90 ? 'A' : score >= 75 ? 'B' : score >= 60 ? 'C' : score >= 40 ? 'D' : 'F';
}

/** 100 minus 20 per critical and 8 per other customer-owned finding. */
function scoreOf(findings: Finding[]): number {
  return Math.max(0, 100 - findings.filter((f) => f.owner === 'customer').reduce((n, f) => n + (f.severity === 'critical' ? 20 : 8), 0));
}

/** A finding from a catalog code or a (partial) Finding object. */
function findingOf(f: unknown, domains: string[]): Finding {
  const given = typeof f === 'string' ? { code: f } : (f as Partial<Finding>);
  const base = CATALOG.find((x) => x.code === given.code) ?? { ...(CATALOG[0] as Finding), title: String(given.code) };
  return { ...base, domains: domains.slice(0, 2), count: Math.min(2, domains.length), ...given } as Finding;
}

function summaryOf(r: FootprintReport): Record<string, unknown> {
  return { ...r, findings: r.findings.length };
}

/** A finished report: previous findings, plus `add` codes, minus `drop` codes; score from the findings unless given. */
function addReport(s: FootprintState, a: ActCtx, opts: { add?: string[]; drop?: string[]; score?: number; source?: string; scope?: string; id?: number; domains: string[] }): FootprintReport {
  const prev = [...s.reports].reverse().find((r) => r.state === 'done');
  let findings = (prev?.findings ?? []).filter((f) => !(opts.drop ?? []).includes(f.code)).map((f) => ({ ...f }));
  for (const code of opts.add ?? []) {
    const base = CATALOG.find((f) => f.code === code) ?? { ...(CATALOG[0] as Finding), code, title: code };
    findings = findings.filter((f) => f.code !== code);
    findings.push({ ...base, domains: opts.domains.slice(0, 2), count: Math.min(2, opts.domains.length) });
  }
  const score = opts.score ?? scoreOf(findings);
  const r: FootprintReport = { id: opts.id ?? a.nextId(), name: `Footprint ${a.iso().slice(0, 10)}`, scope: opts.scope ?? 'account', state: 'done', score, grade: gradeOf(score), findings, sites: opts.domains.length, external_sites: s.external.length, finished_at: a.iso(), source: opts.source ?? 'auto' };
  if (opts.id === undefined) s.reports.push(r);
  a.record('report', { id: r.id, score, findings: findings.map((f) => f.code) });
  return r;
}

export const footprintFamily: Family<FootprintState> = {
  name: 'footprint',
  per: 'account',
  seed: ({ world, epoch }) => {
    const domains = world.sites.slice(0, 5).map((x) => x.domain);
    const reports: FootprintReport[] = [1, 2].map((i) => {
      const findings: Finding[] = [{ ...(CATALOG[3] as Finding), domains, count: domains.length }];
      if (i === 2) findings.push({ ...(CATALOG[2] as Finding), domains: domains.slice(0, 2), count: Math.min(2, domains.length) });
      const score = i === 2 ? 92 : 100;
      return { id: i, name: `Footprint ${dateOf(epoch, (i - 3) * 30)}`, scope: 'account', state: 'done', score, grade: gradeOf(score), findings, sites: domains.length, external_sites: 0, finished_at: isoAgo(epoch, (3 - i) * 30 * DAY_MS), source: 'auto' };
    });
    return { plan: { active: true, plan: 'footprint-basic', cadence: 'monthly', paid_until: dateOf(epoch, 44), external_limit: 5, manual_runs_used: 0, manual_runs_limit: 2 }, reports, external: [] };
  },
  actions: {
    /**
     * A new finished report. args.findings: the exact set (codes or Finding objects; codes from
     * the catalog, others become customer findings); or args.add / args.drop: codes changed from
     * the previous report; args.score (default from the findings).
     */
    report: (s, args, a) => {
      const domains = a.world.sites.slice(0, 5).map((x) => x.domain);
      if (!Array.isArray(args.findings)) return addReport(s, a, { add: args.add as string[] | undefined, drop: args.drop as string[] | undefined, score: args.score as number | undefined, domains });
      const r = addReport(s, a, { drop: (s.reports.at(-1)?.findings ?? []).map((f) => f.code), score: args.score as number | undefined, domains });
      r.findings = (args.findings as unknown[]).map((f) => findingOf(f, domains));
      if (typeof args.score !== 'number') r.score = scoreOf(r.findings);
      r.grade = gradeOf(r.score);
      return r;
    },
    /** Timer after Check now: the queued report finishes. */
    finish: (s, args, a) => {
      const r = s.reports.find((x) => x.id === args.id);
      if (!r || r.state !== 'queued') return;
      const done = addReport({ ...s, reports: s.reports.filter((x) => x !== r) }, a, { id: r.id, scope: r.scope, source: 'manual', domains: a.world.sites.slice(0, 5).map((x) => x.domain) });
      Object.assign(r, done);
    },
  },
  drift: (s, a) => {
    if (!a.rng.chance(0.3)) return;
    const missing = CATALOG.filter((f) => f.owner === 'customer' && !s.reports.at(-1)?.findings.some((x) => x.code === f.code));
    addReport(s, a, { add: missing.length && a.rng.chance(0.5) ? [a.rng.pick(missing).code] : [], domains: a.world.sites.slice(0, 5).map((x) => x.domain) });
  },
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/footprint',
      scope: 'footprint:read',
      handler: (c) => {
        const s = fp(c);
        const { external_limit, manual_runs_used, manual_runs_limit, ...plan } = s.plan;
        const latest = [...s.reports].reverse().find((r) => r.state === 'done');
        return ok({ ...plan, external_sites: { used: s.external.length, limit: external_limit }, manual_runs_this_month: { used: manual_runs_used, limit: manual_runs_limit }, hosted_sites: c.world.sites.length, latest: latest ? summaryOf(latest) : null });
      },
    },
    { method: 'GET', path: '/footprint/reports', scope: 'footprint:read', handler: (c) => paged(c, fp(c).reports, { ...PAGING.footprintReports, order: 'desc', map: summaryOf }) },
    { method: 'GET', path: '/footprint/reports/{run_id}', scope: 'footprint:read', handler: (c) => ok(find(fp(c).reports, c.params.run_id as number, 'footprint report')) },
    {
      method: 'POST',
      path: '/footprint/check',
      scope: 'footprint:write',
      handler: (c) => {
        const s = fp(c);
        const scope = str(c, 'scope', { oneOf: ['site', 'group', 'account', 'custom'] }) ?? 'account';
        const scopeId = int(c, 'scope_id', { min: 1 });
        const domains = strings(c, 'domains');
        if ((scope === 'site' || scope === 'group') && scopeId === undefined) invalid('scope_id', `is required for scope ${scope}`);
        if (scope === 'site' && scopeId !== undefined && !c.world.getSite(scopeId)) invalid('scope_id', 'is not a site of the account', scopeId);
        if (scope === 'custom') {
          if (!domains || domains.length === 0) invalid('domains', 'is required for scope custom');
          const own = new Set(c.world.sites.map((x) => x.domain).concat(s.external.map((x) => x.domain)));
          const bad = domains.find((d) => !own.has(d));
          if (bad) invalid('domains', 'must be domains on the account', bad);
        }
        if (s.plan.manual_runs_used >= s.plan.manual_runs_limit) fail('payment_required', 'no Check now run left this month', { plans_url: PLANS_URL, used: s.plan.manual_runs_used, limit: s.plan.manual_runs_limit });
        s.plan.manual_runs_used++;
        const id = c.res.nextId('footprint');
        s.reports.push({ id, name: `Check now ${dateOf(c.world.time())}`, scope, state: 'queued', score: 0, grade: '', findings: [], sites: 0, external_sites: s.external.length, finished_at: null, source: 'manual' });
        c.res.actCtx('footprint', null).later(1, 'finish', { id });
        return ok({ queued: true, report_id: id }, 202);
      },
    },
    { method: 'GET', path: '/footprint/external-sites', scope: 'footprint:read', handler: (c) => ok({ items: fp(c).external, used: fp(c).external.length, limit: fp(c).plan.external_limit }) },
    {
      method: 'POST',
      path: '/footprint/external-sites',
      scope: 'footprint:write',
      handler: (c) => {
        const s = fp(c);
        const domain = reqStr(c, 'domain', { pattern: /^[a-z0-9-]+(\.[a-z0-9-]+)+$/i }).toLowerCase();
        const group = str(c, 'group', { max: 80 }) ?? null;
        if (s.external.some((x) => x.domain === domain)) invalid('domain', 'is already listed', domain);
        // S15: the spec's "422 naming the pack": code payment_required, HTTP 422, details.pack.
        if (s.external.length >= s.plan.external_limit) fail('payment_required', `no free external-site slot; the pack ${EXTRA_PACK} would cover it`, { pack: EXTRA_PACK, plans_url: PLANS_URL }, 422);
        const site = { id: c.res.nextId('footprint'), domain, group, added: dateOf(c.world.time()) };
        s.external.push(site);
        return ok({ id: site.id, domain }, 201);
      },
    },
    {
      method: 'DELETE',
      path: '/footprint/external-sites/{site_id}',
      scope: 'footprint:write',
      handler: (c) => {
        const s = fp(c);
        const site = find(s.external, c.params.site_id as number, 'external site');
        s.external = s.external.filter((x) => x !== site);
        return ok({ removed: true, id: site.id });
      },
    },
  ],
};
