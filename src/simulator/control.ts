/**
 * The /_sim control interface: the same levers as `sim.world` and `sim.faults`, over HTTP,
 * for the CLI and tools outside the process. No auth (loopback test tool), and these
 * requests are not recorded in `requests`, so tests can drive the world freely.
 */
import type { Api } from './api.js';
import type { Faults, FaultSpec } from './faults.js';
import { patchOpsOf } from './resources.js';
import { ApiFail } from './routes.js';
import { dataReply, errorReply, type Reply } from './reply.js';
import type { BackupState, JobRecord, JobState, SiteRecord } from './types.js';
import { SimulatorError, type UsageChange, type World } from './world.js';

/** A request the simulator received under /api/v1 (or outside /_sim). */
export interface RequestRecord {
  method: string;
  /** Path without the query string, e.g. '/api/v1/sites/3/health'. */
  path: string;
  query: Record<string, string>;
  at: string;
  /** Whether the request carried If-None-Match (a conditional GET). */
  conditional: boolean;
  /** The HTTP status answered (0 until answered; a reset connection stays 0). */
  status: number;
}

/** What the control interface can reach. */
export interface ControlContext {
  world: World;
  faults: Faults;
  requests: RequestRecord[];
  api: Api;
  tick(): void;
}

type Body = Record<string, unknown>;

/** Answers one /_sim request (path after /_sim); world errors become API-style error replies. */
export function handleControl(ctx: ControlContext, method: string, path: string, body: Body): Reply {
  try {
    return route(ctx, method, path, body);
  } catch (err) {
    if (err instanceof SimulatorError) return errorReply(err.code, err.message);
    // A family action refusing its arguments (`status must be one of …`), or Node refusing
    // a bad number on its behalf: the caller's body is at fault, not the simulator.
    if (err instanceof ApiFail) return errorReply(err.code, err.message, err.details, err.status);
    if (err instanceof RangeError) return errorReply('validation_failed', err.message);
    throw err;
  }
}

function route(ctx: ControlContext, method: string, path: string, body: Body): Reply {
  const family = familyRoute(ctx, method, path, body);
  if (family) return family;
  const { world, faults } = ctx;
  const key = `${method} ${path.replace(/\/\d+/g, '/:id').replace(/\/faults\/f\d+$/, '/faults/:fid')}`;
  const ids = (path.match(/\d+/g) ?? []).map(Number);
  switch (key) {
    case 'GET /keys':
      return dataReply(ctx.api.listKeys());
    case 'POST /drift': {
      if (typeof body.enabled !== 'boolean') throw new SimulatorError('validation_failed', 'enabled must be true or false');
      world.resources.driftEnabled = body.enabled;
      return dataReply({ enabled: body.enabled });
    }
    case 'GET /history':
      return dataReply(world.history);
    case 'GET /requests':
      return dataReply(ctx.requests);
    case 'DELETE /requests': {
      const cleared = ctx.requests.length;
      ctx.requests.length = 0;
      return dataReply({ cleared });
    }
    case 'GET /world':
      return dataReply(world.snapshot());
    case 'POST /tick': {
      const count = body.count === undefined ? 1 : body.count;
      if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 10_000) {
        throw new SimulatorError('validation_failed', 'count must be an integer from 1 to 10000');
      }
      for (let i = 0; i < count; i++) ctx.tick();
      return dataReply({ tick: world.ticks });
    }
    case 'GET /faults':
      return dataReply(faults.list());
    case 'POST /faults':
      return dataReply({ id: faults.add(body as unknown as FaultSpec) }, 201);
    case 'DELETE /faults':
      faults.clear();
      return dataReply({ cleared: true });
    case 'DELETE /faults/:fid': {
      const id = path.slice('/faults/'.length);
      return faults.remove(id) ? dataReply({ removed: id }) : errorReply('not_found', `no fault ${id}`);
    }
    case 'POST /sites':
      return dataReply(world.addSite(pick(body, ['domain', 'name', 'state', 'created_at']) as Partial<SiteRecord>), 201);
    case 'DELETE /sites/:id':
      world.removeSite(ids[0] as number);
      return dataReply({ removed: ids[0] });
    case 'POST /sites/:id/health':
      return dataReply(world.setHealth(ids[0] as number, pick(body, ['status', 'problems'])));
    case 'POST /sites/:id/state':
      if (typeof body.state !== 'string' || body.state === '') throw new SimulatorError('validation_failed', 'state must be a non-empty string, like suspended');
      return dataReply(world.setSiteState(ids[0] as number, body.state));
    case 'POST /sites/:id/usage':
      return dataReply(world.setUsage(ids[0] as number, usageChange(body)));
    case 'POST /sites/:id/backups':
      if (body.start === true) return dataReply(world.startBackup(ids[0] as number, str(body.type) ?? 'Manual'), 201);
      return dataReply(world.addBackup(ids[0] as number, { state: body.state as BackupState, type: str(body.type) }), 201);
    case 'POST /sites/:id/backups/:id':
      return dataReply(world.setBackupState(ids[0] as number, ids[1] as number, body.state as BackupState));
    case 'POST /jobs':
      return dataReply(world.addJob(pick(body, ['type', 'state', 'site_id', 'error']) as Partial<JobRecord>), 201);
    case 'POST /jobs/:id':
      return dataReply(world.setJobState(ids[0] as number, body.state as JobState, str(body.error)));
    default:
      return errorReply('not_found', `no control endpoint ${method} /_sim${path}`);
  }
}

/**
 * The generic hooks over resource families and keys:
 *   GET|PATCH /state/{family}, GET|PATCH /sites/{id}/state/{family}   raw state; patch ops
 *   POST /do/{family}/{action}, POST /sites/{id}/do/{family}/{action}  a family action (body = args)
 *   PUT|DELETE /keys/{key}                                              body {scopes}
 */
function familyRoute(ctx: ControlContext, method: string, path: string, body: Body): Reply | undefined {
  const res = ctx.world.resources;
  const state = /^(?:\/sites\/(\d+))?\/state\/([\w-]+)$/.exec(path);
  if (state) {
    const siteId = state[1] === undefined ? null : Number(state[1]);
    const name = state[2] as string;
    if (method === 'GET') return dataReply(res.stateOf(name, siteId));
    if (method === 'PATCH' || method === 'POST') return dataReply(res.patch(name, siteId, patchOpsOf(body)));
    return errorReply('method_not_allowed', `${method} is not allowed on /_sim${path}; allowed: GET, PATCH`, undefined, 405);
  }
  const act = /^(?:\/sites\/(\d+))?\/do\/([\w-]+)\/([\w-]+)$/.exec(path);
  if (act && method === 'POST') {
    const siteId = act[1] === undefined ? null : Number(act[1]);
    const result = res.act(act[2] as string, siteId, act[3] as string, body);
    return dataReply(result ?? { done: true });
  }
  const key = /^\/keys\/([^/]+)$/.exec(path);
  if (key) {
    const name = decodeURIComponent(key[1] as string);
    if (method === 'PUT' || method === 'POST') {
      ctx.api.setKey(name, body.scopes as string[] | '*');
      return dataReply({ key: name, scopes: body.scopes });
    }
    if (method === 'DELETE') return ctx.api.deleteKey(name) ? dataReply({ removed: name }) : errorReply('not_found', `no key ${name}`);
  }
  return undefined;
}

/** Accepts the API's snake_case and the world method's camelCase for disk use. */
function usageChange(body: Body): UsageChange {
  const change: UsageChange = {};
  if (body.frozen !== undefined) change.frozen = body.frozen as boolean;
  const disk = body.disk_used_mib ?? body.diskUsedMib;
  if (disk !== undefined) change.diskUsedMib = disk as number;
  if (body.over !== undefined) change.over = body.over as string[];
  const db = body.db_used_mib ?? body.dbUsedMib;
  if (db !== undefined) change.dbUsedMib = db as number;
  const inodes = body.inodes_used ?? body.inodesUsed;
  if (inodes !== undefined) change.inodesUsed = inodes as number;
  return change;
}

function pick(body: Body, keys: string[]): Body {
  const out: Body = {};
  for (const k of keys) if (body[k] !== undefined) out[k] = body[k];
  return out;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
