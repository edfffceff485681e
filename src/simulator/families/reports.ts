/**
 * Client reports (spec 2 "Client reports"): the account-level `reports` family. Reports
 * are listed newest first and paged; drift makes a scheduled report now and then.
 */
import { PAGING } from '../assumptions.js';
import type { ActCtx, Family } from '../resources.js';
import { bool, fail, find, int, ok, omit, paged, queryId, type Ctx } from '../routes.js';
import { DAY_MS, dateOf, isoAgo, isoIn, requireRoom } from './common.js';

const PLANS_URL = 'https://panel.example.com/client-reports/plans';

export interface Client {
  id: number;
  name: string;
  domains: string[];
  cadence: string;
  next_report_on: string;
}

export interface Report {
  id: number;
  client_id: number;
  client: string;
  period_start: string;
  period_end: string;
  share_live: boolean;
  views: number;
  created_at: string;
  sections: string[];
  share_url: string;
  share_expires_at: string;
  summary: { good: boolean; text: string }[];
}

export interface ReportsState {
  plan: { plan: string; unlimited: boolean; paid_until: string; clients_included: number; reports_used: number; reports_included: number; share_link_days: number; own_sender: boolean };
  clients: Client[];
  reports: Report[];
}

const reports = (c: Ctx): ReportsState => c.res.account<ReportsState>('reports');

function summaryOf(r: Report): Record<string, unknown> {
  const { id, client, period_start, period_end, share_live, views, created_at } = r;
  return { id, client, period_start, period_end, share_live, views, created_at };
}

function make(s: ReportsState, client: Client, id: number, now: Date, shareDays: number, good: boolean): Report {
  return {
    id,
    client_id: client.id,
    client: client.name,
    period_start: dateOf(now, -30),
    period_end: dateOf(now, -1),
    share_live: true,
    views: 0,
    created_at: isoAgo(now, 0),
    sections: ['rank', 'local', 'index'],
    share_url: `https://reports.example.com/r/${id.toString(36)}`,
    share_expires_at: isoIn(now, shareDays * DAY_MS),
    summary: [
      { good, text: good ? 'Average position improved' : 'Average position fell' },
      { good: true, text: `${client.domains.length} domain(s) covered` },
    ],
  };
}

/** A report is made for a client (args.client_id, default random); counts against the plan. */
function create(s: ReportsState, a: ActCtx, clientId?: number): Report | undefined {
  const client = clientId === undefined ? (s.clients.length ? a.rng.pick(s.clients) : undefined) : s.clients.find((x) => x.id === clientId);
  if (!client) return undefined;
  const r = make(s, client, a.nextId(), a.now(), s.plan.share_link_days, a.rng.chance(0.6));
  s.reports.push(r);
  s.plan.reports_used++;
  client.next_report_on = dateOf(a.now(), 30);
  a.record('created', { id: r.id, client_id: client.id });
  return r;
}

export const reportsFamily: Family<ReportsState> = {
  name: 'reports',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: ReportsState = { plan: { plan: 'reports-10', unlimited: false, paid_until: dateOf(epoch, 42), clients_included: 10, reports_used: 0, reports_included: 20, share_link_days: 30, own_sender: false }, clients: [], reports: [] };
    for (const [i, site] of world.sites.slice(0, 2).entries()) {
      const client: Client = { id: i + 1, name: `${site.name} Ltd`, domains: [site.domain], cadence: 'monthly', next_report_on: dateOf(epoch, rng.int(3, 28)) };
      s.clients.push(client);
      for (let m = 2; m >= 1; m--) {
        const r = make(s, client, client.id * 100 + 3 - m, new Date(epoch.getTime() - m * 30 * DAY_MS), 30, rng.chance(0.6));
        r.views = rng.int(0, 12);
        s.reports.push(r);
      }
    }
    s.reports.sort((a, b) => a.id - b.id);
    return s;
  },
  actions: {
    create: (s, args, a) => create(s, a, typeof args.client_id === 'number' ? args.client_id : undefined),
  },
  drift: (s, a) => {
    if (a.rng.chance(0.3)) create(s, a);
  },
  driftWeight: 1,
  routes: [
    {
      method: 'GET',
      path: '/client-reports',
      scope: 'reports:read',
      handler: (c) => {
        const s = reports(c);
        return ok({ ...s.plan, clients: s.clients.length, price_from: '15.00' });
      },
    },
    { method: 'GET', path: '/client-reports/clients', scope: 'reports:read', handler: (c) => ok(reports(c).clients.map((cl) => ({ ...cl, reports: reports(c).reports.filter((r) => r.client_id === cl.id).length }))) },
    {
      method: 'GET',
      path: '/client-reports/reports',
      scope: 'reports:read',
      handler: (c) => {
        const clientId = queryId(c, 'client_id');
        return paged(c, reports(c).reports, { ...PAGING.reports, order: 'desc', filter: clientId === undefined ? undefined : (r) => r.client_id === clientId, map: summaryOf });
      },
    },
    {
      method: 'GET',
      path: '/client-reports/reports/{report_id}',
      scope: 'reports:read',
      handler: (c) => {
        return ok(omit(find(reports(c).reports, c.params.report_id as number, 'report'), 'client_id'));
      },
    },
    {
      method: 'POST',
      path: '/client-reports/reports',
      scope: 'reports:write',
      handler: (c) => {
        const s = reports(c);
        const clientId = int(c, 'client_id', { required: true }) as number;
        const send = bool(c, 'send') ?? false;
        if (!s.clients.some((x) => x.id === clientId)) fail('validation_failed', `client_id ${clientId} is not one of your clients`, { field: 'client_id', value: clientId });
        requireRoom(s.plan.reports_used, 1, s.plan.reports_included, s.plan.unlimited, PLANS_URL, 'reports this month');
        const r = create(s, c.res.actCtx('reports', null), clientId) as Report;
        return ok({ ...omit(r, 'client_id'), sent: send }, 201);
      },
    },
    {
      method: 'POST',
      path: '/client-reports/reports/{report_id}/revoke',
      scope: 'reports:write',
      handler: (c) => {
        const r = find(reports(c).reports, c.params.report_id as number, 'report');
        r.share_live = false;
        return ok({ revoked: true, id: r.id });
      },
    },
  ],
};
