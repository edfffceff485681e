/**
 * The simulated endpoints under /api/v1, as the spec and docs/api-assumptions.md describe
 * them. Synchronous and O(1) or O(page) per request: no scan over all sites.
 * Check order: key (401), path (404), method (405), scope (403), input (422), record (404).
 */
import { decodeCursor, pageOf, type Cursor } from './paging.js';
import { dataReply, errorReply, type Reply } from './reply.js';
import { BACKUP_STATES, type BackupRecord, type BackupState } from './types.js';
import type { World } from './world.js';

/** API key -> scopes; '*' is a full-access key. */
export type KeyTable = Record<string, string[] | '*'>;

const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;

type Handler = (params: number[], query: URLSearchParams) => Reply;
interface Route {
  pattern: RegExp;
  methods: Record<string, { scope: string; handler: Handler }>;
}

/** Answers one /api/v1 request from the world; knows nothing about sockets or faults. */
export class Api {
  private readonly keys = new Map<string, Set<string> | '*'>();
  private readonly routes: Route[];

  constructor(
    private readonly world: World,
    keys: KeyTable,
  ) {
    for (const [key, scopes] of Object.entries(keys)) this.keys.set(key, scopes === '*' ? '*' : new Set(scopes));
    this.routes = [
      { pattern: /^\/sites$/, methods: { GET: { scope: 'sites:read', handler: (_, q) => this.listSites(q) } } },
      { pattern: /^\/jobs$/, methods: { GET: { scope: 'account:read', handler: (_, q) => this.listJobs(q) } } },
      { pattern: /^\/sites\/(\d+)\/health$/, methods: { GET: { scope: 'sites:read', handler: ([id]) => this.health(id as number) } } },
      { pattern: /^\/sites\/(\d+)\/usage$/, methods: { GET: { scope: 'sites:read', handler: ([id]) => this.usage(id as number) } } },
      {
        pattern: /^\/sites\/(\d+)\/backups$/,
        methods: {
          GET: { scope: 'backups:read', handler: ([id], q) => this.listBackups(id as number, q) },
          POST: { scope: 'backups:write', handler: ([id]) => this.createBackup(id as number) },
        },
      },
      {
        pattern: /^\/sites\/(\d+)\/backups\/(\d+)$/,
        methods: { GET: { scope: 'backups:read', handler: ([id, bid]) => this.backup(id as number, bid as number) } },
      },
    ];
  }

  /** Answers `method path` (path after /api/v1, without the query). */
  handle(method: string, path: string, query: URLSearchParams, authorization: string | undefined): Reply {
    const scopes = this.keyScopes(authorization);
    if (!scopes) {
      const reply = errorReply('unauthorized', 'missing or unknown API key; send Authorization: Bearer <key>');
      reply.headers = { 'www-authenticate': 'Bearer' };
      return reply;
    }
    for (const route of this.routes) {
      const m = route.pattern.exec(path);
      if (!m) continue;
      const endpoint = route.methods[method];
      if (!endpoint) {
        const allowed = Object.keys(route.methods).join(', ');
        const reply = errorReply('method_not_allowed', `${method} is not allowed on ${path}; allowed: ${allowed}`, { allowed }, 405);
        reply.headers = { allow: allowed };
        return reply;
      }
      if (!hasScope(scopes, endpoint.scope)) {
        return errorReply('scope_missing', `this API key lacks the scope ${endpoint.scope}`, { required: endpoint.scope });
      }
      return endpoint.handler(m.slice(1).map(Number), query);
    }
    return errorReply('not_found', `no endpoint ${path}`);
  }

  private keyScopes(authorization: string | undefined): Set<string> | '*' | undefined {
    const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
    return m ? this.keys.get(m[1] as string) : undefined;
  }

  private listSites(query: URLSearchParams): Reply {
    const paging = readPaging(query);
    if ('status' in paging) return paging;
    return { status: 200, body: JSON.stringify(pageOf(this.world.sites, { ...paging, order: 'asc' })) };
  }

  private listJobs(query: URLSearchParams): Reply {
    const paging = readPaging(query);
    if ('status' in paging) return paging;
    // Newest first, so a poller reading only the first pages sees recent jobs.
    return { status: 200, body: JSON.stringify(pageOf(this.world.jobs, { ...paging, order: 'desc' })) };
  }

  private health(siteId: number): Reply {
    const health = this.world.getHealth(siteId);
    return health ? dataReply(health) : siteNotFound(siteId);
  }

  private usage(siteId: number): Reply {
    const usage = this.world.getUsage(siteId);
    return usage ? dataReply(usage) : siteNotFound(siteId);
  }

  private listBackups(siteId: number, query: URLSearchParams): Reply {
    const paging = readPaging(query);
    if ('status' in paging) return paging;
    const state = query.get('state');
    if (state !== null && !BACKUP_STATES.includes(state as BackupState)) {
      return errorReply('validation_failed', `state must be one of ${BACKUP_STATES.join(', ')}`, { field: 'state', value: state });
    }
    const backups = this.world.getBackups(siteId);
    if (!backups) return siteNotFound(siteId);
    const filter = state === null ? undefined : (b: BackupRecord) => b.state === state;
    return { status: 200, body: JSON.stringify(pageOf(backups, { ...paging, order: 'desc', filter })) };
  }

  private backup(siteId: number, backupId: number): Reply {
    if (!this.world.getSite(siteId)) return siteNotFound(siteId);
    const backup = this.world.getBackup(siteId, backupId);
    return backup ? dataReply(backup) : errorReply('not_found', `site ${siteId} has no backup ${backupId}`);
  }

  private createBackup(siteId: number): Reply {
    if (!this.world.getSite(siteId)) return siteNotFound(siteId);
    return dataReply(this.world.startBackup(siteId, 'Manual').backup, 202);
  }
}

/** A `:write` scope includes the `:read` scope of the same area (spec, Authentication 2). */
export function hasScope(scopes: Set<string> | '*', required: string): boolean {
  if (scopes === '*' || scopes.has(required)) return true;
  return required.endsWith(':read') && scopes.has(`${required.slice(0, -':read'.length)}:write`);
}

function readPaging(query: URLSearchParams): { limit: number; cursor: Cursor | undefined } | Reply {
  const rawLimit = query.get('limit');
  let limit = DEFAULT_LIMIT;
  if (rawLimit !== null) {
    limit = /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : NaN;
    if (!(limit >= 1 && limit <= MAX_LIMIT)) {
      return errorReply('validation_failed', `limit must be an integer from 1 to ${MAX_LIMIT}`, { field: 'limit', value: rawLimit });
    }
  }
  const rawCursor = query.get('cursor');
  if (rawCursor === null || rawCursor === '') return { limit, cursor: undefined };
  const cursor = decodeCursor(rawCursor);
  if (!cursor) return errorReply('validation_failed', 'cursor is not one this server issued', { field: 'cursor' });
  return { limit, cursor };
}

function siteNotFound(siteId: number): Reply {
  return errorReply('not_found', `no site ${siteId}`);
}
