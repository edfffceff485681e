import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../src/simulator/index.js';

/**
 * Every endpoint of both API documents (shared/spec), as the spec's tables list them:
 * method, path and scope. The simulator must route each one with exactly that scope.
 */
const SPEC_ENDPOINTS: [string, string, string][] = [
  ['GET', '/sites/{site_id}/files', 'files:read'],
  ['GET', '/sites/{site_id}/files/stat', 'files:read'],
  ['GET', '/sites/{site_id}/files/content', 'files:read'],
  ['PUT', '/sites/{site_id}/files/content', 'files:write'],
  ['POST', '/sites/{site_id}/files/folders', 'files:write'],
  ['POST', '/sites/{site_id}/files/move', 'files:write'],
  ['DELETE', '/sites/{site_id}/files', 'files:write'],
  ['PUT', '/sites/{site_id}/php-version', 'sites:write'],
  ['GET', '/sites/{site_id}/usage', 'sites:read'],
  ['POST', '/sites/{site_id}/usage/refresh', 'sites:write'],
  ['POST', '/sites/{site_id}/purge-cache', 'sites:write'],
  ['POST', '/sites/{site_id}/reinstall', 'sites:write'],
  ['POST', '/sites/{site_id}/admin-login', 'sites:login'],
  ['GET', '/sites/{site_id}/health', 'sites:read'],
  ['POST', '/sites/{site_id}/health/recheck', 'sites:write'],
  ['POST', '/sites/{site_id}/health/integrity-check', 'sites:write'],
  ['POST', '/sites/{site_id}/health/repair', 'sites:write'],
  ['POST', '/sites/{site_id}/temporary-unfreeze', 'sites:write'],
  ['GET', '/sites/{site_id}/cron-jobs', 'cron:read'],
  ['GET', '/cron-jobs', 'cron:read'],
  ['GET', '/sites/{site_id}/cron-jobs/{cron_id}', 'cron:read'],
  ['GET', '/sites/{site_id}/cron-jobs/{cron_id}/runs', 'cron:read'],
  ['POST', '/sites/{site_id}/cron-jobs', 'cron:write'],
  ['PATCH', '/sites/{site_id}/cron-jobs/{cron_id}', 'cron:write'],
  ['GET', '/sites/{site_id}/backups', 'backups:read'],
  ['POST', '/sites/{site_id}/backups', 'backups:write'],
  ['GET', '/sites/{site_id}/backups/{backup_id}', 'backups:read'],
  ['POST', '/sites/{site_id}/backups/{backup_id}/download-link', 'backups:read'],
  ['POST', '/sites/{site_id}/backups/{backup_id}/restore', 'backups:write'],
  ['DELETE', '/sites/{site_id}/backups/{backup_id}', 'backups:write'],
  ['GET', '/sites/{site_id}/hourly-backups', 'backups:read'],
  ['POST', '/sites/{site_id}/hourly-backups/now', 'backups:write'],
  ['POST', '/sites/{site_id}/hourly-backups/{backup_id}/restore', 'backups:write'],
  ['POST', '/sites/{site_id}/hourly-backups/{backup_id}/download', 'backups:read'],
  ['GET', '/sites/{site_id}/hourly-backups/downloads/{download_id}', 'backups:read'],
  ['GET', '/sites/{site_id}/nameservers', 'dns:read'],
  ['GET', '/sites/{site_id}/dns', 'dns:read'],
  ['POST', '/sites/{site_id}/dns', 'dns:write'],
  ['PATCH', '/sites/{site_id}/dns/{record_id}', 'dns:write'],
  ['DELETE', '/sites/{site_id}/dns/{record_id}', 'dns:write'],
  ['GET', '/sites/{site_id}/security', 'security:read'],
  ['PUT', '/sites/{site_id}/security/under-attack', 'security:write'],
  ['PUT', '/sites/{site_id}/security/bots', 'security:write'],
  ['POST', '/sites/{site_id}/security/rules', 'security:write'],
  ['PUT', '/sites/{site_id}/security/rules/{rule_id}', 'security:write'],
  ['POST', '/sites/{site_id}/security/rules/{rule_id}/{action}', 'security:write'],
  ['DELETE', '/sites/{site_id}/security/rules/{rule_id}', 'security:write'],
  ['GET', '/sites/{site_id}/botcheck', 'botcheck:read'],
  ['POST', '/sites/{site_id}/botcheck', 'botcheck:write'],
  ['POST', '/sites/{site_id}/botcheck/rotate', 'botcheck:write'],
  ['POST', '/sites/{site_id}/botcheck/disable', 'botcheck:write'],
  ['GET', '/extra-databases', 'extradb:read'],
  ['GET', '/sites/{site_id}/extra-databases', 'extradb:read'],
  ['GET', '/sites/{site_id}/extra-databases/{db_id}', 'extradb:read'],
  ['POST', '/sites/{site_id}/extra-databases', 'extradb:write'],
  ['POST', '/sites/{site_id}/extra-databases/{db_id}/cancel', 'extradb:write'],
  ['DELETE', '/sites/{site_id}/extra-databases/{db_id}', 'extradb:write'],
  ['POST', '/sites/{site_id}/extra-databases/{db_id}/restore', 'extradb:write'],
  ['GET', '/mail-sending/providers', 'sites:read'],
  ['GET', '/sites/{site_id}/mail-sending', 'sites:read'],
  ['PUT', '/sites/{site_id}/mail-sending', 'sites:write'],
  ['DELETE', '/sites/{site_id}/mail-sending', 'sites:write'],
  ['POST', '/sites/{site_id}/mail-sending/test', 'sites:write'],
  ['GET', '/plugin-updates/held', 'updates:read'],
  ['GET', '/sites/{site_id}/plugin-updates/held', 'updates:read'],
  ['POST', '/plugin-updates/held/{hold_id}/try-again', 'updates:write'],
  ['GET', '/research', 'research:read'],
  ['GET', '/research/markets', 'research:read'],
  ['POST', '/keyword-research', 'research:run'],
  ['POST', '/keyword-research/local-volumes', 'research:run'],
  ['POST', '/domain-overview', 'research:run'],
  ['POST', '/domain-overview/gap', 'research:run'],
  ['GET', '/keyword-research/lists', 'research:read'],
  ['GET', '/keyword-research/lists/{list_id}', 'research:read'],
  ['GET', '/rank', 'rank:read'],
  ['GET', '/rank/plans', 'rank:read'],
  ['GET', '/rank/domains', 'rank:read'],
  ['GET', '/rank/domains/{domain_id}', 'rank:read'],
  ['GET', '/rank/keywords/{keyword_id}', 'rank:read'],
  ['GET', '/rank/locations', 'rank:read'],
  ['GET', '/rank/languages', 'rank:read'],
  ['POST', '/rank/domains', 'rank:write'],
  ['DELETE', '/rank/domains/{domain_id}', 'rank:write'],
  ['POST', '/rank/domains/{domain_id}/groups', 'rank:write'],
  ['POST', '/rank/groups/{group_id}/keywords', 'rank:write'],
  ['GET', '/local-rankings', 'local:read'],
  ['GET', '/local-rankings/businesses', 'local:read'],
  ['GET', '/local-rankings/businesses/{business_id}', 'local:read'],
  ['GET', '/local-rankings/keywords', 'local:read'],
  ['GET', '/local-rankings/keywords/{keyword_id}/history', 'local:read'],
  ['POST', '/local-rankings/keywords', 'local:write'],
  ['POST', '/local-rankings/check', 'local:write'],
  ['GET', '/client-reports', 'reports:read'],
  ['GET', '/client-reports/clients', 'reports:read'],
  ['GET', '/client-reports/reports', 'reports:read'],
  ['GET', '/client-reports/reports/{report_id}', 'reports:read'],
  ['POST', '/client-reports/reports', 'reports:write'],
  ['POST', '/client-reports/reports/{report_id}/revoke', 'reports:write'],
  ['GET', '/reputation', 'reputation:read'],
  ['GET', '/reputation/countries', 'reputation:read'],
  ['GET', '/reputation/businesses', 'reputation:read'],
  ['GET', '/reputation/businesses/{business_id}', 'reputation:read'],
  ['POST', '/reputation/businesses', 'reputation:write'],
  ['DELETE', '/reputation/businesses/{business_id}', 'reputation:write'],
  ['POST', '/reputation/businesses/{business_id}/search', 'reputation:write'],
  ['POST', '/reputation/businesses/{business_id}/profiles', 'reputation:write'],
  ['GET', '/footprint', 'footprint:read'],
  ['GET', '/footprint/reports', 'footprint:read'],
  ['GET', '/footprint/reports/{run_id}', 'footprint:read'],
  ['POST', '/footprint/check', 'footprint:write'],
  ['GET', '/footprint/external-sites', 'footprint:read'],
  ['POST', '/footprint/external-sites', 'footprint:write'],
  ['DELETE', '/footprint/external-sites/{site_id}', 'footprint:write'],
  ['GET', '/sites/{site_id}/seo-metrics', 'sites:read'],
  ['GET', '/backlink-tracker', 'sites:read'],
  ['GET', '/backlink-tracker/{domain_id}', 'sites:read'],
  ['PATCH', '/backlink-tracker/links/{anchor_id}', 'content:write'],
  ['DELETE', '/backlink-tracker/links/{anchor_id}', 'content:write'],
  ['GET', '/archive', 'archive:read'],
  ['GET', '/archive/archive/{domain}', 'archive:read'],
  ['GET', '/archive/restores/{restore_id}', 'archive:read'],
  ['POST', '/archive/restores', 'archive:write'],
  ['POST', '/archive/restores/{restore_id}/order', 'archive:write'],
  ['GET', '/competitors', 'competitors:read'],
  ['GET', '/competitors/domains', 'competitors:read'],
  ['GET', '/competitors/domains/{watch_id}', 'competitors:read'],
  ['POST', '/competitors/domains', 'competitors:write'],
  ['DELETE', '/competitors/domains/{watch_id}', 'competitors:write'],
  ['GET', '/ai-visibility', 'aivis:read'],
  ['GET', '/ai-visibility/plans', 'aivis:read'],
  ['GET', '/ai-visibility/brands', 'aivis:read'],
  ['GET', '/ai-visibility/brands/{brand_id}', 'aivis:read'],
  ['GET', '/ai-visibility/prompts/{prompt_id}', 'aivis:read'],
  ['POST', '/ai-visibility/brands', 'aivis:write'],
  ['PATCH', '/ai-visibility/brands/{brand_id}', 'aivis:write'],
  ['DELETE', '/ai-visibility/brands/{brand_id}', 'aivis:write'],
  ['POST', '/ai-visibility/brands/{brand_id}/prompts', 'aivis:write'],
  ['PATCH', '/ai-visibility/prompts/{prompt_id}', 'aivis:write'],
];

const fixedNow = (): Date => new Date('2026-01-15T12:00:00Z');
const running: Simulator[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.close()));
});

async function start(): Promise<Simulator> {
  const sim = await startSimulator({ now: fixedNow, keys: { full: '*', none: [] } });
  running.push(sim);
  return sim;
}

async function call(sim: Simulator, method: string, path: string, key = 'full', body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${sim.url}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : JSON.parse(text) };
}

/** Fills path parameters with plausible values (ids 1, rule ids and domains as strings). */
function fill(path: string): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'domain' ? 'example.com' : name === 'rule_id' ? 'r1a' : name === 'action' ? 'enable' : '1'));
}

describe('every endpoint of both documents', () => {
  it('lists 138 endpoints from the two spec documents', () => {
    expect(SPEC_ENDPOINTS).toHaveLength(138);
  });

  it('routes every endpoint with the scope the spec names (a key without scopes gets 403 scope_missing naming it)', async () => {
    const sim = await start();
    const wrong: string[] = [];
    for (const [method, path, scope] of SPEC_ENDPOINTS) {
      const res = await call(sim, method, fill(path), 'none', method === 'GET' ? undefined : {});
      if (res.status !== 403 || res.body?.error?.code !== 'scope_missing' || res.body.error.details?.required !== scope) {
        wrong.push(`${method} ${path}: ${res.status} ${JSON.stringify(res.body?.error)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('answers 200 with a data envelope on every read endpoint that needs no record id', async () => {
    const sim = await start();
    const failures: string[] = [];
    for (const [method, path] of SPEC_ENDPOINTS) {
      if (method !== 'GET' || /\{(?!site_id\})\w+\}/.test(path)) continue;
      const query = path.endsWith('/files/stat') || path.endsWith('/files/content') ? '?path=.htaccess' : '';
      const res = await call(sim, 'GET', fill(path) + query);
      if (res.status !== 200 || !res.body || !('data' in res.body)) failures.push(`${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
    }
    expect(failures).toEqual([]);
  });
});
