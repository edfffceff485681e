/**
 * The simulated endpoints under /api/v1: every route of every resource family (see
 * families/), dispatched through one table. Synchronous and O(1) or O(page) per request
 * for the site-level endpoints: no scan over all sites.
 * Check order: key (401), path (404), method (405), scope (403), site (404), input (422), record (404).
 */
import { errorReply, type Reply } from './reply.js';
import { ApiFail, isIntParam, type Body, type CompiledRoute, type Ctx } from './routes.js';
import { SimulatorError, type World } from './world.js';

/** API key -> scopes; '*' is a full-access key. */
export type KeyTable = Record<string, string[] | '*'>;

/** Answers one /api/v1 request from the world; knows nothing about sockets or faults. */
export class Api {
  private readonly keys = new Map<string, Set<string> | '*'>();
  private readonly routes: readonly CompiledRoute[];

  constructor(
    private readonly world: World,
    keys: KeyTable,
  ) {
    for (const [key, scopes] of Object.entries(keys)) this.setKey(key, scopes);
    this.routes = world.resources.routes;
  }

  /** Adds or replaces a key (control interface: scopes are configurable at run time). */
  setKey(key: string, scopes: string[] | '*'): void {
    if (scopes !== '*' && !(Array.isArray(scopes) && scopes.every((s) => typeof s === 'string'))) {
      throw new SimulatorError('validation_failed', 'scopes must be "*" or an array of scope names');
    }
    this.keys.set(key, scopes === '*' ? '*' : new Set(scopes));
  }

  /** Removes a key; false when it was not known. */
  deleteKey(key: string): boolean {
    return this.keys.delete(key);
  }

  /** Every key with its scopes. */
  listKeys(): KeyTable {
    const out: KeyTable = {};
    for (const [k, v] of this.keys) out[k] = v === '*' ? '*' : [...v];
    return out;
  }

  /** Answers `method path` (path after /api/v1, without the query). */
  handle(method: string, path: string, query: URLSearchParams, authorization: string | undefined, body: Body = {}): Reply {
    const scopes = this.keyScopes(authorization);
    if (!scopes) {
      const reply = errorReply('unauthorized', 'missing or unknown API key; send Authorization: Bearer <key>');
      reply.headers = { 'www-authenticate': 'Bearer' };
      return reply;
    }
    let allowed: string[] | undefined;
    for (const route of this.routes) {
      const m = route.regex.exec(path);
      if (!m) continue;
      if (route.method !== method) {
        (allowed ??= []).push(route.method);
        continue;
      }
      if (route.scope !== null && !hasScope(scopes, route.scope)) {
        return errorReply('scope_missing', `this API key lacks the scope ${route.scope}`, { required: route.scope });
      }
      const params: Record<string, string | number> = {};
      route.names.forEach((name, i) => {
        const raw = decodeURIComponent(m[i + 1] as string);
        params[name] = isIntParam(name) ? Number(raw) : raw;
      });
      const siteId = typeof params.site_id === 'number' && route.path.startsWith('/sites/{site_id}') ? params.site_id : 0;
      if (route.path.startsWith('/sites/{site_id}') && !this.world.getSite(siteId)) return errorReply('not_found', `no site ${siteId}`);
      const ctx: Ctx = { world: this.world, res: this.world.resources, params, query, body, siteId };
      try {
        return route.handler(ctx);
      } catch (err) {
        if (err instanceof ApiFail) return err.reply();
        if (err instanceof SimulatorError) return errorReply(err.code, err.message);
        throw err;
      }
    }
    if (allowed) {
      const list = [...new Set(allowed)].join(', ');
      const reply = errorReply('method_not_allowed', `${method} is not allowed on ${path}; allowed: ${list}`, { allowed: list }, 405);
      reply.headers = { allow: list };
      return reply;
    }
    return errorReply('not_found', `no endpoint ${path}`);
  }

  private keyScopes(authorization: string | undefined): Set<string> | '*' | undefined {
    const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
    return m ? this.keys.get(m[1] as string) : undefined;
  }
}

/** A `:write` scope includes the `:read` scope of the same area (spec, Authentication 2). */
export function hasScope(scopes: Set<string> | '*', required: string): boolean {
  if (scopes === '*' || scopes.has(required)) return true;
  return required.endsWith(':read') && scopes.has(`${required.slice(0, -':read'.length)}:write`);
}
