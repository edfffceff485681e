import { SOURCE_READ_BY, SOURCES } from '../../sources/registry.js';
import { deliveryJson, unknownChannel } from '../../notify/delivery-views.js';
import type { FiringAlert } from '../../store/alerts-repo.js';
import type { ServerContext } from '../context.js';
import { badRequest, intParam, json, onlyParams, shown, type Route } from '../http.js';


const DELIVERIES_DEFAULT = 100;
const DELIVERIES_MAX = 1000;

/**
 * What the daemon sees and sent, for the dashboard and for scripts: sources and their
 * health, alerts firing now, recent deliveries. Times are ISO 8601 strings (null when
 * unknown); stored errors were scrubbed of secrets before they were written.
 */
export function apiRoutes(ctx: ServerContext): Route[] {
  return [
    {
      method: 'GET',
      path: '/api/sources',
      handler: async (req, res) => {
        onlyParams(req.url.searchParams, '/api/sources', []);
        json(res, 200, { data: await sources(ctx), budget: budget(ctx) });
      },
    },
    {
      method: 'GET',
      path: '/api/alerts',
      handler: async (req, res) => {
        onlyParams(req.url.searchParams, '/api/alerts', []);
        json(res, 200, { data: (await ctx.alerts.firingWithEvents()).map(alertView) });
      },
    },
    {
      method: 'GET',
      path: '/api/deliveries',
      handler: async (req, res) => {
        const q = req.url.searchParams;
        onlyParams(q, '/api/deliveries', ['limit', 'failed', 'pending', 'channel']);
        const limit = intParam(q, 'limit', { min: 1, max: DELIVERIES_MAX, expected: `a whole number from 1 to ${DELIVERIES_MAX}` });
        const filter = { failed: boolParam(q, 'failed'), pending: boolParam(q, 'pending'), channel: q.get('channel') || null };
        const unknown = filter.channel === null ? null : await unknownChannel(ctx.config.channels, ctx.events, filter.channel);
        if (unknown !== null) throw badRequest(`channel: ${unknown}`);
        const rows = await ctx.events.deliveries(filter, limit ?? DELIVERIES_DEFAULT);
        // All the failed ones, not only those of this page: what the dashboard's heading counts.
        json(res, 200, { data: rows.map(deliveryJson), failed_total: await ctx.events.failedCount(filter.channel) });
      },
    },
  ];
}

/**
 * Every known source, enabled or not, with its last poll, failures and next run; `degraded`
 * says its source.degraded alert fires; `read_with` names the source whose cycle reads it
 * (a view re-reads its origin's reply, a detail follows its parent's records). For the
 * sources the scheduler runs: their priority, effective interval (stretched when the
 * request budget is short), the progress of the cycle handing out polls now, and the lag.
 */
async function sources(ctx: ServerContext): Promise<unknown[]> {
  const states = new Map((await ctx.snapshots.sourceStates()).map((r) => [r.source, r]));
  const failing = new Map((await ctx.snapshots.failingCounts()).map((r) => [r.source, r.failing]));
  // Only the source alerts, not every alert firing (thousands in an outage), each refresh.
  const degraded = new Set((await ctx.alerts.firingOfRule('source-degraded')).map((a) => a.subject.replace(/^sources\//, '')));
  const scheduled = new Map(ctx.sources.map((s) => [s.def.name, s]));
  const progress = new Map(ctx.scheduler.progress().map((p) => [p.name, p]));
  return SOURCES.map((def) => {
    const state = states.get(def.name);
    const p = progress.get(def.name);
    return {
      name: def.name,
      per: def.per,
      scope: def.scope,
      enabled: scheduled.has(def.name),
      every_ms: scheduled.get(def.name)?.everyMs ?? ctx.config.sources[def.name]?.every_ms ?? def.defaultEveryMs,
      last_attempt_at: iso(state?.last_attempt_at),
      last_success_at: iso(state?.last_success_at),
      consecutive_failures: state?.consecutive_failures ?? 0,
      last_error_code: state?.last_error_code ?? null,
      last_error: state?.last_error ?? null,
      failing_entities: failing.get(def.name) ?? 0,
      degraded: degraded.has(def.name),
      // The scheduled source whose cycles read it, through details of details (registry).
      read_with: SOURCE_READ_BY[def.name] ?? null,
      next_run_at: iso(ctx.scheduler.nextRunOf(def.name)),
      ...(p
        ? {
            priority: p.priority,
            effective_every_ms: p.effectiveEveryMs,
            stretch: Math.round(p.stretch * 100) / 100,
            caught_up: p.caughtUp,
            progress: p.cycle ? { done: p.cycle.done, total: p.cycle.total, started_at: iso(p.cycle.startedAt) } : null,
            lag_ms: p.lagMs,
          }
        : {}),
    };
  });
}

/** The request budget as planned for the current sites, and the pace the client keeps now. */
function budget(ctx: ServerContext): unknown {
  const plan = ctx.scheduler.budgetPlan();
  const pace = ctx.pace?.();
  return {
    sites: plan?.sites ?? null,
    needed_per_hour: plan ? Math.round(plan.neededPerHour) : null,
    allowed_per_hour: plan?.allowedPerHour ?? null,
    planned_per_hour: plan ? Math.round(plan.plannedPerHour) : null,
    short: plan?.short ?? false,
    stretched: plan ? plan.sources.filter((s) => s.stretch > 1).length : 0,
    pace_per_second: pace ? Math.round(pace.rate * 100) / 100 : null,
    max_per_second: pace?.maxRate ?? null,
    paused_until: iso(pace?.pausedUntil ?? null),
  };
}

function alertView(a: FiringAlert): unknown {
  return {
    rule: a.rule,
    subject: a.subject,
    site_id: a.site_id,
    since: iso(a.since),
    seq: a.seq,
    event: a.body === null ? null : (JSON.parse(a.body) as unknown),
  };
}

function boolParam(q: URLSearchParams, name: string): boolean {
  const text = q.get(name);
  if (text === null || text === '' || text === 'false') return false;
  if (text === 'true') return true;
  throw badRequest(`${name}: expected true or false (got ${shown(text)})`);
}

function iso(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}
