/**
 * Cron jobs and their runs (spec 1 "Cron jobs"): the account-level `cron` family, since the
 * account holds at most 25 jobs. Runs appear through the `run` action (drift, run-now, or the
 * control interface); the newest 20 per job are kept; three timeouts in a row pause a job.
 */
import {
  CRON_PAUSED_REASON,
  CRON_PAUSED_STATE,
  CRON_PER_ACCOUNT,
  CRON_PER_SITE,
  CRON_RUNS_IN_DETAIL,
  CRON_RUNS_KEPT,
  CRON_TIMEOUTS_TO_PAUSE,
} from '../assumptions.js';
import type { ActCtx, Family } from '../resources.js';
import { bool, fail, findOnSite, int, invalid, ok, queryInt, reqStr, str, type Ctx } from '../routes.js';
import type { SiteTools } from './sites.js';
import { DAY_MS, MINUTE_MS, isoAgo, isoUtc } from './common.js';

export const CRON_KINDS = ['cmscron', 'php', 'url', 'command'] as const;
const MODES = ['minutes', 'hourly', 'daily', 'weekly', 'advanced'] as const;
const RUN_STATUSES = ['ok', 'failed', 'timeout', 'skipped', 'error'] as const;
const KIND_LABELS: Record<string, string> = { cmscron: 'CMS scheduled tasks', php: 'PHP script', url: 'Web address', command: 'Command' };
const STATUS_LABELS: Record<string, string> = { ok: 'OK', failed: 'Failed', timeout: 'Timed out', skipped: 'Skipped', error: 'Could not start' };

export interface CronJob {
  id: number;
  site_id: number;
  name: string;
  kind: string;
  kind_label: string;
  target: string;
  command: string;
  summary: string;
  schedule: string;
  schedule_text: string;
  schedule_spec: Record<string, unknown>;
  enabled: boolean;
  state: string;
  state_label: string;
  state_reason: string;
  paused_reason: string | null;
  cms_pseudo_cron_off: boolean;
  next_runs: string[];
  last_run_at: string | null;
  last_status: string | null;
  last_exit_code: number | null;
  last_duration_seconds: number | null;
  run_now_pending: boolean;
  created_at: string;
  updated_at: string;
}

export interface CronRun {
  id: number;
  status: string;
  status_label: string;
  trigger: 'schedule' | 'manual';
  started_at: string;
  finished_at: string;
  duration_seconds: number;
  exit_code: number | null;
  output: string;
  output_bytes: number;
  output_truncated: boolean;
  note: string;
}

export interface CronState {
  jobs: CronJob[];
  /** Runs per job id, oldest first, at most 20. */
  runs: Record<string, CronRun[]>;
  /** Timeouts in a row per job id. */
  timeouts: Record<string, number>;
}

const cron = (c: Ctx): CronState => c.res.account<CronState>('cron');

/** The kinds a site may run: cmscron only on CMS sites, php not on static HTML. */
function kindsFor(app: SiteTools['app']): string[] {
  return CRON_KINDS.filter((k) => (k !== 'cmscron' || app === 'cms') && (k !== 'php' || app !== 'static'));
}

/** Expands one cron field (`*`, `a`, `a-b`, with optional `/step`, comma lists) to its values; undefined when malformed. */
function expand(field: string, min: number, max: number): number[] | undefined {
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
    if (!m) return undefined;
    const lo = m[1] === '*' ? min : Number(m[2]);
    const hi = m[1] === '*' ? max : m[3] !== undefined ? Number(m[3]) : m[4] !== undefined ? max : lo;
    const step = m[4] !== undefined ? Number(m[4]) : 1;
    if (lo < min || hi > max || lo > hi || step < 1) return undefined;
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return [...out].sort((a, b) => a - b);
}

/** The smallest gap between runs in an hour, counting :55 → :00 across the hour. */
function minGap(minutes: number[]): number {
  if (minutes.length <= 1) return 60;
  let gap = 60 - (minutes[minutes.length - 1] as number) + (minutes[0] as number);
  for (let i = 1; i < minutes.length; i++) gap = Math.min(gap, (minutes[i] as number) - (minutes[i - 1] as number));
  return gap;
}

/** The next `count` times matching a 5-field expression after `from` (minute resolution, at most 8 days ahead). */
export function nextRuns(expression: string, from: Date, count = 3): string[] {
  const [mi, ho, dom, mo, dow] = expression.split(/\s+/);
  const sets = [expand(mi ?? '', 0, 59), expand(ho ?? '', 0, 23), expand(dom ?? '', 1, 31), expand(mo ?? '', 1, 12), expand(dow ?? '', 0, 6)];
  if (sets.some((s) => !s)) return [];
  const [M, H, D, MO, W] = sets.map((s) => new Set(s)) as Set<number>[];
  const out: string[] = [];
  let t = Math.floor(from.getTime() / MINUTE_MS + 1) * MINUTE_MS;
  for (let i = 0; i < 8 * 24 * 60 && out.length < count; i++, t += MINUTE_MS) {
    const d = new Date(t);
    if (M!.has(d.getUTCMinutes()) && H!.has(d.getUTCHours()) && D!.has(d.getUTCDate()) && MO!.has(d.getUTCMonth() + 1) && W!.has(d.getUTCDay())) out.push(isoUtc(d));
  }
  return out;
}

/** Builds the schedule of a create/patch body: expression, words and spec; 422 for anything more often than every 5 minutes. */
function scheduleOf(c: Ctx, offset: number): Pick<CronJob, 'schedule' | 'schedule_text' | 'schedule_spec'> {
  const mode = reqStr(c, 'schedule_mode', { oneOf: MODES });
  const minute = int(c, 'minute', { min: 0, max: 59 }) ?? offset % 60;
  const hour = int(c, 'hour', { min: 0, max: 23 }) ?? 3;
  const pad = (n: number): string => String(n).padStart(2, '0');
  switch (mode) {
    case 'minutes': {
      const every = int(c, 'every', { oneOf: [5, 10, 15, 20, 30] }) ?? 15;
      const start = offset % every;
      const list = Array.from({ length: 60 / every }, (_, i) => start + i * every);
      return { schedule: `${list.join(',')} * * * *`, schedule_text: `every ${every} minutes`, schedule_spec: { mode, every } };
    }
    case 'hourly':
      return { schedule: `${minute} * * * *`, schedule_text: `every hour at minute ${minute}`, schedule_spec: { mode, minute } };
    case 'daily':
      return { schedule: `${minute} ${hour} * * *`, schedule_text: `every day at ${pad(hour)}:${pad(minute)} UTC`, schedule_spec: { mode, minute, hour } };
    case 'weekly': {
      const weekday = int(c, 'weekday', { min: 0, max: 6 }) ?? 1;
      const day = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'][weekday];
      return { schedule: `${minute} ${hour} * * ${weekday}`, schedule_text: `every ${day} at ${pad(hour)}:${pad(minute)} UTC`, schedule_spec: { mode, minute, hour, weekday } };
    }
    default: {
      const expression = reqStr(c, 'expression', { max: 200 }).trim();
      const fields = expression.split(/\s+/);
      if (fields.length !== 5) invalid('expression', 'must have five fields (minute hour day-of-month month day-of-week)', expression);
      // A */N minute field is moved to a fixed offset inside each window (spec).
      const stepped = /^\*\/(\d+)$/.exec(fields[0] as string);
      if (stepped) {
        const n = Number(stepped[1]);
        if (n < 5 || 60 % n !== 0) invalid('expression', 'must not run more often than every 5 minutes', expression);
        fields[0] = Array.from({ length: 60 / n }, (_, i) => (offset % n) + i * n).join(',');
      }
      const bounds: [number, number][] = [[0, 59], [0, 23], [1, 31], [1, 12], [0, 6]];
      const sets = fields.map((f, i) => expand(f, ...(bounds[i] as [number, number])));
      if (sets.some((x) => !x)) invalid('expression', 'is not a valid cron expression', expression);
      const minutes = sets[0] as number[];
      // Across the whole hour including :55 -> :00 when every hour runs; within the hour otherwise.
      const gap = fields[1] === '*' ? minGap(minutes) : minutes.slice(1).reduce((g, m, i) => Math.min(g, m - (minutes[i] as number)), 60);
      if (gap < 5) invalid('expression', 'must not run more often than every 5 minutes, checked across the whole hour including :55 to :00', expression);
      return { schedule: fields.join(' '), schedule_text: `cron ${fields.join(' ')}`, schedule_spec: { mode, expression: fields.join(' ') } };
    }
  }
}

function commandOf(kind: string, target: string): string {
  switch (kind) {
    case 'cmscron':
      return 'php cms-cron.php';
    case 'php':
      return `php ${target}`;
    case 'url':
      return `curl -fsS ${target}`;
    default:
      return target;
  }
}

/** Checks the target for its kind (422 for a script outside the site folder, a multi-line command, a bad URL). */
function checkTarget(kind: string, target: string): void {
  if (kind === 'php' && (!target.endsWith('.php') || target.startsWith('/') || target.split('/').includes('..'))) invalid('target', 'must be a path inside the site folder ending in .php', target);
  if (kind === 'url' && !/^https?:\/\/\S+$/.test(target)) invalid('target', 'must be an http(s) address', target);
  if (kind === 'command' && (target === '' || /[\r\n]/.test(target) || target.length > 1000)) invalid('target', 'must be one line of up to 1,000 characters', target);
}

function setState(job: CronJob, enabled: boolean, paused: string | null): void {
  job.enabled = enabled;
  job.paused_reason = paused;
  job.state = paused ? CRON_PAUSED_STATE : enabled ? 'active' : 'disabled';
  job.state_label = paused ? 'Paused' : enabled ? 'Active' : 'Switched off';
  job.state_reason = paused ?? '';
}

function siteCount(s: CronState, siteId: number): number {
  return s.jobs.filter((j) => j.site_id === siteId).length;
}

function render(c: Ctx, job: CronJob, withDomain: boolean): Record<string, unknown> {
  return withDomain ? { ...job, domain: c.world.getSite(job.site_id)?.domain ?? null } : { ...job };
}

/** Runs newest first. */
function runsOf(s: CronState, jobId: number): CronRun[] {
  return [...(s.runs[jobId] ?? [])].reverse();
}

/** One run of a job with the given (or a drawn) status: kept 20, three timeouts in a row pause the job. */
function addRun(s: CronState, job: CronJob, a: ActCtx, status: string, trigger: 'schedule' | 'manual', seconds?: number): CronRun {
  const drawn = status === 'timeout' ? 900 : status === 'ok' ? a.rng.int(1, 40) : status === 'failed' ? a.rng.int(1, 120) : 0;
  const duration = seconds ?? drawn;
  const output = status === 'ok' ? 'done\n' : status === 'failed' ? 'PHP Fatal error: Allowed memory size exhausted\n' : status === 'timeout' ? 'stopped after 15 minutes\n' : '';
  const now = a.now();
  const run: CronRun = {
    id: a.nextId(),
    status,
    status_label: STATUS_LABELS[status] ?? status,
    trigger,
    started_at: isoAgo(now, duration * 1000),
    finished_at: isoUtc(now),
    duration_seconds: duration,
    exit_code: status === 'ok' ? 0 : status === 'failed' ? 255 : null,
    output,
    output_bytes: Buffer.byteLength(output),
    output_truncated: false,
    note: status === 'skipped' ? 'previous run still going' : status === 'error' ? 'could not start: the site is switched off' : '',
  };
  const list = (s.runs[job.id] ??= []);
  list.push(run);
  while (list.length > CRON_RUNS_KEPT) list.shift();
  Object.assign(job, { last_run_at: run.finished_at, last_status: status, last_exit_code: run.exit_code, last_duration_seconds: duration, run_now_pending: false, next_runs: nextRuns(job.schedule, now) });
  s.timeouts[job.id] = status === 'timeout' ? (s.timeouts[job.id] ?? 0) + 1 : 0;
  a.record('run', { job_id: job.id, site_id: job.site_id, run_id: run.id, status });
  if ((s.timeouts[job.id] ?? 0) >= CRON_TIMEOUTS_TO_PAUSE && !job.paused_reason) {
    setState(job, false, CRON_PAUSED_REASON);
    job.updated_at = isoUtc(now);
    a.record('paused', { job_id: job.id, site_id: job.site_id, reason: CRON_PAUSED_REASON });
  }
  return run;
}

function drawStatus(a: ActCtx): string {
  return a.rng.weighted({ ok: 80, failed: 8, timeout: 6, skipped: 4, error: 2 });
}

export const cronFamily: Family<CronState> = {
  name: 'cron',
  per: 'account',
  seed: ({ rng, world, epoch }) => {
    const s: CronState = { jobs: [], runs: {}, timeouts: {} };
    for (const site of world.sites.slice(0, 6)) {
      if (!rng.chance(0.6)) continue;
      const app = world.resources.site<SiteTools>('site', site.id).app;
      const kinds = kindsFor(app);
      for (let k = 1; k <= rng.int(1, 2); k++) {
        const kind = rng.pick(kinds);
        const target = kind === 'php' ? 'scripts/cleanup.php' : kind === 'url' ? `https://${site.domain}/tasks/run` : kind === 'command' ? 'php bin/console app:sync' : '';
        const every = rng.pick([5, 10, 15, 30]);
        const offset = rng.int(0, every - 1);
        const schedule = `${Array.from({ length: 60 / every }, (_, i) => offset + i * every).join(',')} * * * *`;
        const created = isoAgo(epoch, rng.int(10, 400) * DAY_MS);
        const job: CronJob = {
          id: site.id * 100 + k,
          site_id: site.id,
          name: kind === 'cmscron' ? 'CMS scheduled tasks' : `Task ${k}`,
          kind,
          kind_label: KIND_LABELS[kind] as string,
          target,
          command: commandOf(kind, target),
          summary: `${KIND_LABELS[kind]} every ${every} minutes`,
          schedule,
          schedule_text: `every ${every} minutes`,
          schedule_spec: { mode: 'minutes', every },
          enabled: true,
          state: 'active',
          state_label: 'Active',
          state_reason: '',
          paused_reason: null,
          cms_pseudo_cron_off: kind === 'cmscron',
          next_runs: nextRuns(schedule, epoch),
          last_run_at: null,
          last_status: null,
          last_exit_code: null,
          last_duration_seconds: null,
          run_now_pending: false,
          created_at: created,
          updated_at: created,
        };
        s.jobs.push(job);
        const runs: CronRun[] = [];
        for (let r = rng.int(3, 12); r >= 1; r--) {
          const at = new Date(epoch.getTime() - r * every * MINUTE_MS);
          const duration = rng.int(1, 30);
          runs.push({ id: job.id * 100 + (13 - r), status: 'ok', status_label: 'OK', trigger: 'schedule', started_at: isoAgo(at, duration * 1000), finished_at: isoUtc(at), duration_seconds: duration, exit_code: 0, output: 'done\n', output_bytes: 5, output_truncated: false, note: '' });
        }
        s.runs[job.id] = runs;
        const last = runs[runs.length - 1] as CronRun;
        Object.assign(job, { last_run_at: last.finished_at, last_status: 'ok', last_exit_code: 0, last_duration_seconds: last.duration_seconds });
      }
    }
    return s;
  },
  onSiteRemoved: (s, siteId) => {
    for (const j of s.jobs.filter((x) => x.site_id === siteId)) delete s.runs[j.id];
    s.jobs = s.jobs.filter((j) => j.site_id !== siteId);
  },
  actions: {
    /** A run of a job (args.job_id, default a random enabled one; args.status, default drawn; args.count, default 1; args.duration_seconds, default drawn). */
    run: (s, args, a) => {
      const enabled = s.jobs.filter((j) => j.enabled);
      const job = typeof args.job_id === 'number' ? s.jobs.find((j) => j.id === args.job_id) : enabled.length > 0 ? a.rng.pick(enabled) : undefined;
      if (!job) return undefined;
      if (args.status !== undefined && !RUN_STATUSES.includes(args.status as (typeof RUN_STATUSES)[number])) {
        fail('validation_failed', `status must be one of ${RUN_STATUSES.join(', ')}`);
      }
      const count = typeof args.count === 'number' ? args.count : 1;
      // args.duration_seconds: how long the run took (a run near the 15-minute stop).
      const seconds = typeof args.duration_seconds === 'number' ? args.duration_seconds : undefined;
      const runs: CronRun[] = [];
      for (let i = 0; i < count; i++) runs.push(addRun(s, job, a, (args.status as string | undefined) ?? drawStatus(a), args.trigger === 'manual' ? 'manual' : 'schedule', seconds));
      return { job, runs };
    },
  },
  drift: (s, a) => {
    // Each enabled job runs about every other tick; a run can time out, three in a row pause it.
    for (const job of s.jobs) if (job.enabled && a.rng.chance(0.5)) addRun(s, job, a, drawStatus(a), 'schedule');
  },
  driftWeight: 3,
  routes: [
    {
      method: 'GET',
      path: '/sites/{site_id}/cron-jobs',
      scope: 'cron:read',
      handler: (c) => {
        const s = cron(c);
        const app = c.res.site<SiteTools>('site', c.siteId).app;
        const frozen = c.world.getUsage(c.siteId)?.frozen ?? false;
        return ok({
          jobs: s.jobs.filter((j) => j.site_id === c.siteId).map((j) => render(c, j, false)),
          limits: { per_site: CRON_PER_SITE, per_account: CRON_PER_ACCOUNT, site_count: siteCount(s, c.siteId), account_count: s.jobs.length, min_interval_minutes: 5, max_run_minutes: 15, timezone: 'UTC' },
          kinds: kindsFor(app),
          available: !frozen,
          paused_reason: frozen ? 'site frozen or suspended' : null,
        });
      },
    },
    {
      method: 'GET',
      path: '/cron-jobs',
      scope: 'cron:read',
      handler: (c) => {
        const s = cron(c);
        return ok({ jobs: s.jobs.map((j) => render(c, j, true)), count: s.jobs.length, per_account: CRON_PER_ACCOUNT });
      },
    },
    {
      method: 'GET',
      path: '/sites/{site_id}/cron-jobs/{cron_id}',
      scope: 'cron:read',
      handler: (c) => {
        const s = cron(c);
        const job = jobOf(c, s);
        return ok({ ...render(c, job, false), runs: runsOf(s, job.id).slice(0, CRON_RUNS_IN_DETAIL) });
      },
    },
    {
      method: 'GET',
      path: '/sites/{site_id}/cron-jobs/{cron_id}/runs',
      scope: 'cron:read',
      handler: (c) => {
        const s = cron(c);
        const limit = queryInt(c, 'limit', CRON_RUNS_KEPT, 1, CRON_RUNS_KEPT);
        return ok({ runs: runsOf(s, jobOf(c, s).id).slice(0, limit) });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/cron-jobs',
      scope: 'cron:write',
      handler: (c) => {
        const s = cron(c);
        const app = c.res.site<SiteTools>('site', c.siteId).app;
        const name = str(c, 'name', { max: 80 });
        const kind = reqStr(c, 'kind', { oneOf: CRON_KINDS });
        if (!kindsFor(app).includes(kind)) invalid('kind', `is not available on this site; allowed: ${kindsFor(app).join(', ')}`, kind);
        const target = kind === 'cmscron' ? '' : reqStr(c, 'target', { max: 1000 });
        checkTarget(kind, target);
        const id = c.res.nextId('cron');
        const schedule = scheduleOf(c, id % 60);
        const enabled = bool(c, 'enabled') ?? true;
        const pseudo = bool(c, 'cms_pseudo_cron_off');
        if (pseudo !== undefined && kind !== 'cmscron') invalid('cms_pseudo_cron_off', 'applies to cmscron jobs only', pseudo);
        if (c.world.getUsage(c.siteId)?.frozen) fail('conflict', 'the site is frozen or suspended');
        if (siteCount(s, c.siteId) >= CRON_PER_SITE) fail('limit_reached', `at most ${CRON_PER_SITE} cron jobs per site`, { limit: CRON_PER_SITE });
        if (s.jobs.length >= CRON_PER_ACCOUNT) fail('limit_reached', `at most ${CRON_PER_ACCOUNT} cron jobs per account`, { limit: CRON_PER_ACCOUNT });
        const now = c.world.time();
        const job: CronJob = {
          id,
          site_id: c.siteId,
          name: name ?? KIND_LABELS[kind] ?? kind,
          kind,
          kind_label: KIND_LABELS[kind] as string,
          target,
          command: commandOf(kind, target),
          summary: `${KIND_LABELS[kind]} ${schedule.schedule_text}`,
          ...schedule,
          enabled,
          state: '',
          state_label: '',
          state_reason: '',
          paused_reason: null,
          cms_pseudo_cron_off: kind === 'cmscron' ? (pseudo ?? true) : false,
          next_runs: nextRuns(schedule.schedule, now),
          last_run_at: null,
          last_status: null,
          last_exit_code: null,
          last_duration_seconds: null,
          run_now_pending: false,
          created_at: isoUtc(now),
          updated_at: isoUtc(now),
        };
        setState(job, enabled, null);
        s.jobs.push(job);
        s.runs[id] = [];
        c.world.note('cron.created', c.siteId, { job_id: id });
        return ok(job, 201);
      },
    },
    {
      method: 'PATCH',
      path: '/sites/{site_id}/cron-jobs/{cron_id}',
      scope: 'cron:write',
      handler: (c) => {
        const s = cron(c);
        const job = jobOf(c, s);
        const name = str(c, 'name', { max: 80 });
        const kind = str(c, 'kind', { oneOf: CRON_KINDS }) ?? job.kind;
        const target = kind === 'cmscron' ? '' : (str(c, 'target', { max: 1000 }) ?? job.target);
        checkTarget(kind, target);
        const schedule = c.body.schedule_mode !== undefined ? scheduleOf(c, job.id % 60) : undefined;
        const enabled = bool(c, 'enabled');
        Object.assign(job, { kind, kind_label: KIND_LABELS[kind], target, command: commandOf(kind, target) }, schedule ?? {});
        if (name !== undefined) job.name = name;
        const pseudo = bool(c, 'cms_pseudo_cron_off');
        if (pseudo !== undefined) job.cms_pseudo_cron_off = kind === 'cmscron' && pseudo;
        // `enabled: true` also clears a pause after repeated timeouts (spec, States).
        if (enabled === true) {
          setState(job, true, null);
          s.timeouts[job.id] = 0;
        } else if (enabled === false) setState(job, false, job.paused_reason);
        job.updated_at = isoUtc(c.world.time());
        job.next_runs = nextRuns(job.schedule, c.world.time());
        c.world.note('cron.changed', c.siteId, { job_id: job.id, enabled: job.enabled });
        return ok(job);
      },
    },
    // S11: delete and run-now paths are "not shown"; these are the simulator's guesses.
    {
      method: 'DELETE',
      path: '/sites/{site_id}/cron-jobs/{cron_id}',
      scope: 'cron:write',
      handler: (c) => {
        const s = cron(c);
        const job = jobOf(c, s);
        s.jobs = s.jobs.filter((j) => j !== job);
        delete s.runs[job.id];
        delete s.timeouts[job.id];
        c.world.note('cron.deleted', c.siteId, { job_id: job.id });
        return ok({ deleted: true, id: job.id });
      },
    },
    {
      method: 'POST',
      path: '/sites/{site_id}/cron-jobs/{cron_id}/run',
      scope: 'cron:write',
      handler: (c) => {
        const s = cron(c);
        const job = jobOf(c, s);
        if (job.run_now_pending) fail('conflict', 'a run is already pending');
        job.run_now_pending = true;
        c.res.actCtx('cron', null).later(1, 'run', { job_id: job.id, trigger: 'manual' });
        return ok({ ...job }, 202);
      },
    },
  ],
};

function jobOf(c: Ctx, s: CronState): CronJob {
  return findOnSite(s.jobs, c.params.cron_id as number, c.siteId, 'cron job');
}

