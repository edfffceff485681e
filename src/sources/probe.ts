import type { ApiClient } from '../api/client.js';
import { ApiError } from '../api/errors.js';
import { isRecord } from '../is-record.js';
import { isTopLevel, pathOf, sitesSource } from './registry.js';
import type { SourceOptions } from './fetch.js';
import type { EnabledSource } from './select.js';
import type { SourceDef } from './types.js';

/** What `check --online` found for one enabled source. */
export interface ProbeLine {
  source: string;
  scope: string;
  /** `ok`: its scope reads; `scope_missing`: the key lacks it; `error`: the probe failed otherwise. */
  status: 'ok' | 'scope_missing' | 'error';
  detail: string;
}

/** The whole answer: the site list first; `fatal` when the key or the panel fails outright. */
export interface ProbeResult {
  sites: number | null;
  /** The ids of the sites GET /sites answered; null when it could not be read. */
  siteIds: number[] | null;
  fatal: string | null;
  lines: ProbeLine[];
}

/**
 * `hostwatch check --online`: does the key work, and which of the enabled sources can it
 * read? One GET of `/sites`, then one small GET per scope (of the first top-level source
 * needing it; the first site's for per-site ones), so a scope is judged by one request.
 * Only GETs, never an endpoint that spends credits, and nothing is written anywhere.
 */
export async function probeScopes(
  client: Pick<ApiClient, 'get' | 'list'>,
  sources: readonly EnabledSource[],
  optionsOf: (source: string, siteId: number | null) => SourceOptions,
): Promise<ProbeResult> {
  let siteIds: number[];
  let listed = true;
  try {
    const data = await client.list(sitesSource.path, sitesSource.query, sitesSource.pageSize);
    // The ids the poller takes (the site list's keyShape: a positive integer, as a number or digits; A4).
    siteIds = data.flatMap((r) => (isRecord(r) && (typeof r['id'] === 'number' || typeof r['id'] === 'string') && sitesSource.keyShape!.test(String(r['id'])) ? [Number(r['id'])] : []));
  } catch (e) {
    const err = asApiError(e);
    if (err.code !== 'scope_missing') return { sites: null, siteIds: null, fatal: fatalText(err), lines: [] };
    siteIds = [];
    listed = false;
  }
  const byScope = new Map<string, { by: string; status: ProbeLine['status']; detail: string }>();
  for (const { def } of sources) {
    if (byScope.has(def.scope) || !isTopLevel(def)) continue;
    if (def.per === 'site' && siteIds.length === 0) continue;
    byScope.set(def.scope, { by: def.name, ...(await probeOne(client, def, def.per === 'site' ? siteIds[0]! : null, optionsOf)) });
  }
  const lines = sources.map(({ def }): ProbeLine => {
    const probe = byScope.get(def.scope);
    if (!probe) return { source: def.name, scope: def.scope, status: 'error', detail: siteIds.length === 0 ? 'not probed: the site list is empty or unreadable' : 'not probed' };
    return { source: def.name, scope: def.scope, status: probe.status, detail: probe.by === def.name ? probe.detail : `${probe.detail} (same scope)` };
  });
  return { sites: siteIds.length, siteIds: listed ? siteIds : null, fatal: null, lines };
}

async function probeOne(
  client: Pick<ApiClient, 'get'>,
  def: SourceDef,
  siteId: number | null,
  optionsOf: (source: string, siteId: number | null) => SourceOptions,
): Promise<{ status: ProbeLine['status']; detail: string }> {
  const path = pathOf(def, siteId);
  const query: Record<string, string | number> = { ...def.query, ...(def.paged ? { limit: 1 } : {}) };
  if (def.each) query[def.each.param] = optionsOf(def.name, siteId)[def.each.option]?.[0] ?? '';
  try {
    await client.get(path, query);
    return { status: 'ok', detail: `GET ${path}: ok` };
  } catch (e) {
    const err = asApiError(e);
    if (err.code === 'scope_missing') return { status: 'scope_missing', detail: `GET ${path}: the key lacks ${err.requiredScope ?? def.scope}` };
    // The scope worked: the resource is just not there or not applicable (409 off the CDN).
    if (err.code === 'not_found' || def.notApplicable?.includes(err.code)) return { status: 'ok', detail: `GET ${path}: ${err.code} (the scope works)` };
    return { status: 'error', detail: `GET ${path}: ${err.message}` };
  }
}

function asApiError(e: unknown): ApiError {
  return e instanceof ApiError ? e : new ApiError({ code: 'network', endpoint: sitesSource.path, message: String(e) });
}

function fatalText(err: ApiError): string {
  if (err.code === 'unauthorized' || err.statusCode === 401) return `the API refuses the key (401 on GET ${err.endpoint}): check api.key`;
  if (err.code === 'network' || err.code === 'timeout') return `the API cannot be reached (${err.code} on GET ${err.endpoint}): check api.base_url and the network`;
  return `GET ${err.endpoint} failed: ${err.message}`;
}
