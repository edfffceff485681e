import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api/errors.js';
import { compileDiffOptions } from '../src/diff/index.js';
import { Followups } from '../src/scheduler/followups.js';
import { checkShape } from '../src/sources/fetch.js';
import { recordsAt, recordVolatile } from '../src/sources/records.js';
import { entityOf, isTopLevel, pathOf, sourceByName, SOURCES } from '../src/sources/registry.js';
import { enabledSources, scopesFor } from '../src/sources/select.js';
import type { SourceDef } from '../src/sources/types.js';
import { configFrom } from './harness.js';

/** Every scope named in the spec's scope table (document 1, "Authentication"). */
const SPEC_READ_SCOPES = [
  'account:read', 'sites:read', 'dns:read', 'backups:read', 'files:read', 'security:read', 'archive:read', 'rank:read',
  'aivis:read', 'research:read', 'footprint:read', 'local:read', 'reports:read', 'updates:read', 'extradb:read',
  'botcheck:read', 'cron:read', 'reputation:read', 'competitors:read',
];

const src = (name: string): SourceDef => {
  const s = sourceByName(name);
  if (!s) throw new Error(`no source ${name}`);
  return s;
};

describe('the source registry', () => {
  it('names every source once, with a read scope of the spec and a positive interval', () => {
    const names = SOURCES.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const s of SOURCES) {
      expect(SPEC_READ_SCOPES, s.name).toContain(s.scope);
      expect(s.defaultEveryMs, s.name).toBeGreaterThanOrEqual(10_000);
      expect(s.name, s.name).toMatch(/^[a-z][a-z0-9_]*$/);
    }
  });

  it('gives every detail source an existing parent with a key, and every view an existing origin with the same scope', () => {
    for (const s of SOURCES.filter((x) => x.per === 'record' && x.from === undefined)) {
      const parent = src(s.parent!);
      expect(parent.key, `${s.name}'s parent ${parent.name}`).toBeDefined();
      expect(s.path, s.name).toContain('{id}');
      expect(SOURCES.indexOf(parent), `${s.name} comes after its parent`).toBeLessThan(SOURCES.indexOf(s));
    }
    for (const s of SOURCES.filter((x) => x.from !== undefined)) {
      const origin = src(s.from!);
      expect(origin.scope, s.name).toBe(s.scope);
      expect(origin.per, s.name).toBe(s.per);
      expect(isTopLevel(s), s.name).toBe(false);
    }
  });

  it('compiles every volatile path and key, so no source can fail at its first poll', () => {
    for (const s of SOURCES) {
      expect(() => compileDiffOptions({ key: s.key ?? 'id', volatile: s.volatile }), s.name).not.toThrow();
      expect(() => compileDiffOptions({ key: 'id', volatile: recordVolatile(s) }), s.name).not.toThrow();
    }
  });

  it('covers every readable resource family the issue lists', () => {
    const paths = SOURCES.map((s) => s.path).filter(Boolean);
    for (const p of [
      '/sites/{site_id}/hourly-backups', '/sites/{site_id}/cron-jobs', '/sites/{site_id}/cron-jobs/{id}/runs', '/sites/{site_id}/dns',
      '/sites/{site_id}/nameservers', '/sites/{site_id}/security', '/sites/{site_id}/botcheck', '/sites/{site_id}/extra-databases',
      '/sites/{site_id}/mail-sending', '/sites/{site_id}/seo-metrics', '/sites/{site_id}/plugin-updates/held', '/sites/{site_id}/files/stat',
      '/extra-databases', '/plugin-updates/held', '/rank', '/rank/domains', '/rank/domains/{id}', '/local-rankings',
      '/local-rankings/businesses', '/local-rankings/businesses/{id}', '/local-rankings/keywords', '/client-reports',
      '/client-reports/reports', '/reputation', '/reputation/businesses', '/reputation/businesses/{id}', '/footprint',
      '/footprint/reports', '/footprint/reports/{id}', '/backlink-tracker', '/backlink-tracker/{id}', '/archive', '/competitors',
      '/competitors/domains', '/competitors/domains/{id}', '/ai-visibility', '/ai-visibility/brands', '/ai-visibility/brands/{id}', '/research',
    ]) {
      expect(paths, p).toContain(p);
    }
  });

  it('never names a path that changes state or spends credits', () => {
    for (const s of SOURCES) {
      expect(s.path, s.name).not.toMatch(/keyword-research$|domain-overview|\/check|download|integrity|refresh|try-again|\/order|rotate/);
    }
  });

  it('fills entity and path templates from the site and the parent record', () => {
    const runs = src('cron_runs');
    const ref = entityOf(runs, { id: 3, domain: 'a.example' }, '7');
    expect(ref).toMatchObject({ entity: 'sites/3/cron_jobs/7/runs', siteId: 3, recordKey: '7' });
    expect(pathOf(runs, 3, '7')).toBe('/sites/3/cron-jobs/7/runs');
    expect(entityOf(src('dns'), { id: 4, domain: 'b' }).entity).toBe('sites/4/dns');
    expect(entityOf(src('rank_keywords'), null, '12').entity).toBe('rank/domains/12/keywords');
    expect(entityOf(src('footprint_findings'), null, '99').entity).toBe('footprint/latest/findings');
    expect(entityOf(src('jobs'), null).entity).toBe('jobs');
  });
});

describe('records inside a reply', () => {
  it('flatten a list of lists (`groups[].keywords`) and concatenate several paths', () => {
    const detail = { id: 1, groups: [{ id: 10, keywords: [{ id: 100 }, { id: 101 }] }, { id: 11, keywords: [{ id: 102 }] }, { id: 12 }] };
    expect(recordsAt(src('rank_keywords'), detail)).toEqual([{ id: 100 }, { id: 101 }, { id: 102 }]);
    const security = { rules: { http_request_firewall_custom: [{ id: 'a' }], http_ratelimit: [{ id: 'b' }] } };
    expect(recordsAt(src('security_rules'), security)).toEqual([{ id: 'a' }, { id: 'b' }]);
  });

  it('make volatile paths relative to a record, whichever list path they sit under', () => {
    expect(recordVolatile(src('rank_keywords'))).toEqual(['last_checked_at', 'checks']);
    expect(recordVolatile(src('cron_jobs'))).toContain('last_run_at');
    expect(recordVolatile(src('jobs'))).toEqual(['updated_at', 'progress']);
  });

  it('refuse a reply without the list, a record without its key, or a key seen twice, naming the endpoint', () => {
    const err = (source: string, data: unknown): string => {
      try {
        checkShape(entityOf(src(source), { id: 1, domain: 'x' }, '5'), '/the/path', data);
      } catch (e) {
        expect(e).toBeInstanceOf(ApiError);
        return (e as ApiError).message;
      }
      return 'accepted';
    };
    expect(err('dns', [])).toBe('/the/path: expected an object with "records", got a list');
    expect(err('dns', { records: 'x' })).toBe('/the/path: "records" is string, not a list');
    expect(err('dns', { records: [{ type: 'A' }] })).toBe('/the/path: item 0 has no "id"');
    expect(err('reputation_reviews', { platforms: [{ reviews: [{ url: 'u' }] }, { reviews: [{ url: 'u' }] }] })).toBe('/the/path: "url" u appears twice');
    expect(err('nameservers', [])).toBe('/the/path: expected an object, got a list');
    expect(err('dns', { records: [{ id: 1 }], publishing: {} })).toBe('accepted');
  });
});

describe('detail follow-ups', () => {
  const domains = src('rank_domains');
  const keywords = src('rank_keywords');
  const parent = entityOf(domains, null);
  const DAY = 86_400_000;

  it('read a detail the first time, then only when its list record moved or its slow schedule is due', () => {
    const f = new Followups([domains, keywords]);
    f.observe(parent, [{ id: 1, avg_position: 5 }, { id: 2, avg_position: 9 }]);
    const first = f.due(keywords, parent, 0, DAY);
    expect(first.map((t) => t.key)).toEqual(['1', '2']);
    for (const t of first) f.done(keywords, parent, t.key, t.sig, 0);
    expect(f.due(keywords, parent, 1000, DAY)).toEqual([]);
    f.observe(parent, [{ id: 1, avg_position: 6 }, { id: 2, avg_position: 9 }]);
    expect(f.due(keywords, parent, 2000, DAY).map((t) => t.key)).toEqual(['1']);
    expect(f.due(keywords, parent, DAY + 1, DAY).map((t) => t.key)).toEqual(['1', '2']);
  });

  it('marks a record listed after the first look as new, so its detail is compared with nothing rather than made a baseline', () => {
    const f = new Followups([domains, keywords]);
    f.observe(parent, [{ id: 1 }]);
    expect(f.due(keywords, parent, 0, DAY)).toEqual([expect.objectContaining({ key: '1', isNew: false })]);
    f.observe(parent, [{ id: 1 }, { id: 2 }]);
    const due = f.due(keywords, parent, 0, DAY);
    expect(due.find((t) => t.key === '2')?.isNew).toBe(true);
    f.done(keywords, parent, '2', due.find((t) => t.key === '2')!.sig, 0);
    f.observe(parent, [{ id: 1 }, { id: 2 }]);
    expect(f.due(keywords, parent, 0, DAY).find((t) => t.key === '2')).toBeUndefined();
  });

  it('watches only the named fields when a source says which (cron runs: last_run_at, last_status)', () => {
    const list = src('cron_list');
    const runs = src('cron_runs');
    const f = new Followups([list, runs]);
    const account = entityOf(list, null);
    f.observe(account, { jobs: [{ id: 7, site_id: 3, last_run_at: 'a', next_runs: ['1'] }] });
    const [t] = f.due(runs, account, 0, DAY);
    // A run detail of the account list belongs to the job's own site.
    expect(t).toMatchObject({ key: '7', siteId: 3 });
    f.done(runs, account, t!.key, t!.sig, 0);
    f.observe(account, { jobs: [{ id: 7, site_id: 3, last_run_at: 'a', next_runs: ['2'] }] });
    expect(f.due(runs, account, 1, DAY)).toEqual([]);
    f.observe(account, { jobs: [{ id: 7, site_id: 3, last_run_at: 'b', next_runs: ['2'] }] });
    expect(f.due(runs, account, 2, DAY).map((x) => x.key)).toEqual(['7']);
  });

  it('reads a site\'s own cron list only when that site\'s jobs in the account list changed, and once more when its last job went', () => {
    const list = src('cron_list');
    const jobs = src('cron_jobs');
    const f = new Followups([list, jobs]);
    const account = entityOf(list, null);
    const job = (id: number, site: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ id, site_id: site, name: `j${id}`, paused_reason: null, last_run_at: 'a', ...extra });
    f.observe(account, { jobs: [job(1, 3), job(2, 3), job(3, 4)] });
    const first = f.due(jobs, account, 0, DAY);
    expect(first.map((t) => [t.key, t.siteId])).toEqual([['3', 3], ['4', 4]]);
    for (const t of first) f.done(jobs, account, t.key, t.sig, 0);
    // A run (volatile fields) changes nothing for the site lists.
    f.observe(account, { jobs: [job(1, 3, { last_run_at: 'b' }), job(2, 3), job(3, 4)] });
    expect(f.due(jobs, account, 1, DAY)).toEqual([]);
    // A job of site 4 paused: only site 4 is read.
    f.observe(account, { jobs: [job(1, 3), job(2, 3), job(3, 4, { paused_reason: 'timed out 3 times in a row' })] });
    const paused = f.due(jobs, account, 2, DAY);
    expect(paused.map((t) => t.key)).toEqual(['4']);
    f.done(jobs, account, '4', paused[0]!.sig, 2);
    // Site 4's only job deleted: its list is read once more (to see it go), then no more.
    f.observe(account, { jobs: [job(1, 3), job(2, 3)] });
    const gone = f.due(jobs, account, 3, DAY);
    expect(gone.map((t) => t.key)).toEqual(['4']);
    f.done(jobs, account, '4', gone[0]!.sig, 3);
    f.observe(account, { jobs: [job(1, 3), job(2, 3)] });
    expect(f.due(jobs, account, 4, DAY)).toEqual([]);
  });

  it('reads only the newest record for `pick: first` (the newest footprint report)', () => {
    const reports = src('footprint_reports');
    const findings = src('footprint_findings');
    const f = new Followups([reports, findings]);
    const ref = entityOf(reports, null);
    f.observe(ref, [{ id: 9, state: 'done' }, { id: 8, state: 'done' }]);
    expect(f.due(findings, ref, 0, DAY).map((t) => t.key)).toEqual(['9']);
  });

  it('forgets the details of a site that left the site list', () => {
    const dns = src('dns');
    const sites = src('sites');
    const domains = src('rank_domains');
    const keywords = src('rank_keywords');
    // A per-site parent with a detail: the rank keywords stand in (their parent is account-wide,
    // so a made-up per-site parent is used).
    const perSite: SourceDef = { ...dns, name: 'site_parent', key: 'id', listField: 'records' };
    const child: SourceDef = { ...keywords, name: 'site_child', parent: 'site_parent', path: '/sites/{site_id}/x/{id}', entity: 'sites/{site_id}/x/{id}' };
    const f = new Followups([sites, perSite, child, domains]);
    const site = entityOf(perSite, { id: 3, domain: 'x' });
    f.observe(site, { records: [{ id: 7, v: 'a' }] });
    const [t] = f.due(child, site, 0, 1000);
    f.done(child, site, t!.key, t!.sig, 0);
    f.observe(entityOf(sites, null), [{ id: 3 }]);
    expect(f.due(child, site, 1, 1000)).toEqual([]);
    f.observe(entityOf(sites, null), [{ id: 4 }]);
    expect(f.due(child, site, 1, 1000)).toEqual([]); // nothing listed for a site that is gone
    f.observe(site, { records: [{ id: 7, v: 'a' }] });
    expect(f.due(child, site, 1, 1000).map((x) => x.key)).toEqual(['7']); // read afresh if it comes back
  });

  it('says a source with `fast` is busy while a record is in a busy state', () => {
    const jobs = src('jobs');
    const f = new Followups([jobs]);
    f.observe(entityOf(jobs, null), [{ id: 1, state: 'done' }]);
    expect(f.isBusy(jobs)).toBe(false);
    f.observe(entityOf(jobs, null), [{ id: 1, state: 'done' }, { id: 2, state: 'running' }]);
    expect(f.isBusy(jobs)).toBe(true);
  });
});

describe('enabled sources and scopes', () => {
  const base = 'api: { base_url: https://panel.example.com, key: k }\n';

  it('turns every source on by default except the opt-in ones', () => {
    const names = enabledSources(configFrom(base, {}, '/tmp')).map((s) => s.def.name);
    expect(names).toContain('cron_runs');
    expect(names).toContain('reputation_reviews');
    expect(names).not.toContain('files');
    expect(names).not.toContain('site_plugin_updates');
  });

  it('turns `files` on with paths, and a detail source or view off with its parent', () => {
    // (`sites: { enabled: false }` is a config error: every per-site source needs the site list.)
    const config = configFrom(`${base}sources:\n  files: { paths: [.htaccess] }\n  dns: { enabled: false }\n  rank_domains: { enabled: false }\n`, {}, '/tmp');
    const names = enabledSources(config).map((s) => s.def.name);
    expect(names).toContain('files');
    expect(names).toContain('sites');
    expect(names).not.toContain('dns_publishing');
    expect(names).not.toContain('rank_keywords');
    expect(config.sources['files']!.paths).toEqual(['.htaccess']);
  });

  it('lists each needed scope once, sorted, with the sources that need it', () => {
    const config = configFrom(`${base}sources:\n  rank: { enabled: false }\n  rank_domains: { enabled: false }\n`, {}, '/tmp');
    const scopes = scopesFor(enabledSources(config));
    expect(scopes.map((s) => s.scope)).toEqual([...scopes.map((s) => s.scope)].sort());
    expect(scopes.map((s) => s.scope)).not.toContain('rank:read');
    expect(scopes.find((s) => s.scope === 'cron:read')?.sources).toEqual(['cron_list', 'cron_jobs', 'cron_runs']);
    expect(scopes.map((s) => s.scope)).not.toContain('files:read');
    for (const s of scopes) expect(s.scope).toMatch(/:read$/);
  });
});

describe('the documentation', () => {
  it('lists every source in docs/configuration.md and every built-in event in docs/events.md', async () => {
    const { readFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { packageRoot } = await import('../src/paths.js');
    const { rulesFor } = await import('../src/rules/parse.js');
    const conf = readFileSync(join(packageRoot(), 'docs/configuration.md'), 'utf8');
    for (const s of SOURCES) expect(conf, s.name).toContain(`| \`${s.name}\` |`);
    const events = readFileSync(join(packageRoot(), 'docs/events.md'), 'utf8');
    for (const r of rulesFor(configFrom('api: { base_url: https://x.example, key: k }\n', {}, '/tmp'))) {
      expect(events, r.event).toContain(`| \`${r.event}\` |`);
    }
  });
});

describe('source options in config', () => {
  const parse = async (yaml: string): Promise<string[]> => {
    const { parseConfig } = await import('../src/config/parse.js');
    const { SOURCE_NAMES } = await import('../src/sources/registry.js');
    const r = parseConfig(`api: { base_url: https://panel.example.com, key: k }\n${yaml}`, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    return r.ok ? [] : r.errors.map((e) => `${e.file}:${e.line}: ${e.path}: ${e.message}`);
  };

  it('refuse an empty files.paths and paths on another source, naming the line and key', async () => {
    expect(await parse('sources:\n  files: { paths: [] }\n')).toEqual([
      'c.yaml:3: sources.files.paths: must be a non-empty list of paths inside the site folder, like [.htaccess, wp-config.php] (got an empty list)',
    ]);
    expect(await parse('sources:\n  dns:\n    paths: [x]\n')).toEqual(['c.yaml:4: sources.dns.paths: is only for the files source (got a list)']);
  });

  it('take per-site paths by site id, added to the paths of every site', async () => {
    expect(await parse('sources:\n  files:\n    site_paths: { x: [a] }\n')).toEqual([
      'c.yaml:4: sources.files.site_paths.x: the key must be a positive integer site id, like 12: [wp-config.php] (got a list)',
    ]);
    const { pathsFor } = await import('../src/sources/select.js');
    const config = configFrom('api: { base_url: https://x.example, key: k }\nsources:\n  files:\n    paths: [.htaccess]\n    site_paths: { 12: [wp-config.php, .htaccess] }\n', {}, '/tmp');
    expect(pathsFor(config, 'files', 12)).toEqual(['.htaccess', 'wp-config.php']);
    expect(pathsFor(config, 'files', 13)).toEqual(['.htaccess']);
    const only = configFrom('api: { base_url: https://x.example, key: k }\nsources:\n  files:\n    site_paths: { 12: [wp-config.php] }\n', {}, '/tmp');
    expect(enabledSources(only).map((x) => x.def.name)).toContain('files');
    expect(pathsFor(only, 'files', 13)).toEqual([]);
  });
});
