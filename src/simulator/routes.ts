/**
 * The shared mechanism every simulated endpoint goes through: a route is data (method,
 * spec path, scope, handler); handlers read validated input with the helpers below and
 * either return a Reply or throw ApiFail, which becomes the spec's error body.
 */
import { decodeCursor, pageOf, type Cursor } from './paging.js';
import { dataReply, errorReply, type Reply } from './reply.js';
import type { Resources } from './resources.js';
import type { World } from './world.js';

/** A request body: parsed JSON, or `{ raw }` for octet-stream/multipart uploads. */
export type Body = Record<string, unknown> & { raw?: Buffer; contentType?: string };

/** What a handler gets: the world, the matched path parameters, the query and the body. */
export interface Ctx {
  world: World;
  res: Resources;
  /** Path parameters by name; `*_id` parameters (except STRING_PARAMS) are integers. */
  params: Record<string, string | number>;
  query: URLSearchParams;
  body: Body;
  /** The `{site_id}` parameter, when the path has one (the site is known to exist). */
  siteId: number;
}

/** One endpoint. `scope: null` means any valid key (spec: GET /limits). */
export interface RouteDef {
  method: string;
  path: string;
  scope: string | null;
  handler: (c: Ctx) => Reply;
}

/** A compiled route: the spec path as a regex plus the parameter names in order. */
export interface CompiledRoute extends RouteDef {
  regex: RegExp;
  names: string[];
}

/** Path parameters that are strings although they end in `_id` (the spec says so for rule_id). */
const STRING_PARAMS = new Set(['rule_id', 'action', 'domain']);

/** Turns `/sites/{site_id}/dns/{record_id}` into a regex; integer params only match digits. */
export function compileRoute(def: RouteDef): CompiledRoute {
  const names: string[] = [];
  const source = def.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    names.push(name);
    return isIntParam(name) ? '(\\d+)' : '([^/]+)';
  });
  return { ...def, regex: new RegExp(`^${source}$`), names };
}

/** Whether a path parameter is an integer id. */
export function isIntParam(name: string): boolean {
  return name.endsWith('_id') && !STRING_PARAMS.has(name);
}

/** An API error a handler throws; `code` decides the status (A2). */
export class ApiFail extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ApiFail';
  }

  /** The error reply this failure answers with. */
  reply(): Reply {
    return errorReply(this.code, this.message, this.details, this.status);
  }
}

/** Shorthand for `throw new ApiFail(...)` inside expressions. */
export function fail(code: string, message: string, details?: Record<string, unknown>, status?: number): never {
  throw new ApiFail(code, message, details, status);
}

/** 200 (or `status`) `{data}`. */
export const ok = dataReply;

/** `validation_failed` naming the field, its value and what is allowed. */
export function invalid(field: string, message: string, value?: unknown): never {
  return fail('validation_failed', `${field} ${message}`, value === undefined ? { field } : { field, value });
}

/** A required (or optional, with `fallback`) string body field, trimmed length checked. */
export function str(c: Ctx, field: string, opts: { required?: boolean; max?: number; min?: number; pattern?: RegExp; oneOf?: readonly string[] } = {}): string | undefined {
  const v = c.body[field];
  if (v === undefined || v === null) {
    if (opts.required) invalid(field, 'is required');
    return undefined;
  }
  if (typeof v !== 'string') invalid(field, 'must be a string', v);
  if (opts.min !== undefined && v.length < opts.min) invalid(field, `must be at least ${opts.min} characters`, v);
  if (opts.max !== undefined && v.length > opts.max) invalid(field, `must be at most ${opts.max} characters`, v);
  if (opts.pattern && !opts.pattern.test(v)) invalid(field, `must match ${opts.pattern.source}`, v);
  if (opts.oneOf && !opts.oneOf.includes(v)) invalid(field, `must be one of ${opts.oneOf.join(', ')}`, v);
  return v;
}

/** A required string body field. */
export function reqStr(c: Ctx, field: string, opts: { max?: number; min?: number; pattern?: RegExp; oneOf?: readonly string[] } = {}): string {
  return str(c, field, { ...opts, required: true }) as string;
}

/** An integer body field within bounds. */
export function int(c: Ctx, field: string, opts: { required?: boolean; min?: number; max?: number; oneOf?: readonly number[] } = {}): number | undefined {
  const v = c.body[field];
  if (v === undefined || v === null) {
    if (opts.required) invalid(field, 'is required');
    return undefined;
  }
  if (typeof v !== 'number' || !Number.isInteger(v)) invalid(field, 'must be an integer', v);
  if ((opts.min !== undefined && v < opts.min) || (opts.max !== undefined && v > opts.max)) {
    invalid(field, `must be from ${opts.min ?? '-∞'} to ${opts.max ?? '∞'}`, v);
  }
  if (opts.oneOf && !opts.oneOf.includes(v)) invalid(field, `must be one of ${opts.oneOf.join(', ')}`, v);
  return v;
}

/** A boolean body field. */
export function bool(c: Ctx, field: string, opts: { required?: boolean } = {}): boolean | undefined {
  const v = c.body[field];
  if (v === undefined || v === null) {
    if (opts.required) invalid(field, 'is required');
    return undefined;
  }
  if (typeof v !== 'boolean') invalid(field, 'must be true or false', v);
  return v;
}

/** An array-of-strings body field, with an optional length bound. */
export function strings(c: Ctx, field: string, opts: { required?: boolean; max?: number; min?: number } = {}): string[] | undefined {
  const v = c.body[field];
  if (v === undefined || v === null) {
    if (opts.required) invalid(field, 'is required');
    return undefined;
  }
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) invalid(field, 'must be an array of strings', v);
  if (opts.min !== undefined && v.length < opts.min) invalid(field, `must hold at least ${opts.min} item(s)`);
  if (opts.max !== undefined && v.length > opts.max) invalid(field, `must hold at most ${opts.max} items`);
  return v as string[];
}

/** Destructive calls (spec convention 6): `confirm` must be exactly true. */
export function requireConfirm(c: Ctx): void {
  if (c.body.confirm !== true) invalid('confirm', 'must be true on a destructive call', c.body.confirm);
}

/** An integer query parameter with bounds and a default. */
export function queryInt(c: Ctx, name: string, fallback: number, min: number, max: number): number {
  const raw = c.query.get(name);
  if (raw === null || raw === '') return fallback;
  const n = /^\d{1,6}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= min && n <= max)) invalid(name, `must be an integer from ${min} to ${max}`, raw);
  return n;
}

/** An optional integer id query parameter (a filter): undefined when absent, validation_failed unless all digits. */
export function queryId(c: Ctx, name: string): number | undefined {
  const raw = c.query.get(name);
  if (raw === null) return undefined;
  if (!/^\d+$/.test(raw)) invalid(name, 'must be an integer', raw);
  return Number(raw);
}

/** A boolean query parameter (`true`/`false`/`1`/`0`). */
export function queryBool(c: Ctx, name: string, fallback: boolean): boolean {
  const raw = c.query.get(name);
  if (raw === null || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  return invalid(name, 'must be true or false', raw);
}

/** `limit` (min 1, given default and maximum) and `cursor` of a paged list. */
export function readPaging(c: Ctx, defaultLimit: number, maxLimit: number): { limit: number; cursor: Cursor | undefined } {
  const limit = queryInt(c, 'limit', defaultLimit, 1, maxLimit);
  const raw = c.query.get('cursor');
  if (raw === null || raw === '') return { limit, cursor: undefined };
  const cursor = decodeCursor(raw);
  if (!cursor) invalid('cursor', 'is not one this server issued');
  return { limit, cursor };
}

/** A paged reply (`data`, `next_cursor`, `has_more`) over records kept ascending by id. */
export function paged<T extends { id: number }>(
  c: Ctx,
  items: readonly T[],
  opts: { defaultLimit: number; maxLimit: number; order: 'asc' | 'desc'; filter?: (item: T) => boolean; map?: (item: T) => unknown },
): Reply {
  const paging = readPaging(c, opts.defaultLimit, opts.maxLimit);
  const page = pageOf(items, { ...paging, order: opts.order, filter: opts.filter });
  const data = opts.map ? page.data.map(opts.map) : page.data;
  return { status: 200, body: JSON.stringify({ ...page, data }) };
}

/** The record with this id, or 404 naming what was looked for. */
export function find<T extends { id: number | string }>(items: readonly T[], id: number | string, what: string): T {
  const item = items.find((x) => x.id === id);
  if (!item) fail('not_found', `no ${what} ${id}`);
  return item;
}

/** The record with this id in an account-level list keyed by site, or 404 when it is missing or belongs to another site. */
export function findOnSite<T extends { id: number; site_id: number }>(items: readonly T[], id: number, siteId: number, what: string): T {
  const item = find(items, id, what);
  if (item.site_id !== siteId) fail('not_found', `site ${siteId} has no ${what} ${item.id}`);
  return item;
}

/** Copies an object without the given keys (internal bookkeeping the API does not show). */
export function omit<T extends object, K extends keyof T>(obj: T, ...keys: K[]): Omit<T, K> {
  const out = { ...obj };
  for (const k of keys) delete out[k];
  return out;
}
