/**
 * Every catalog event of PRODUCT.md, end to end against the simulator: put the world in
 * the before state through /_sim, poll (baseline), make the change, poll: exactly that
 * event with the right subject and data; poll again: nothing.
 *
 * `HOSTWATCH_WRITE_EXAMPLES=1 npx vitest run test/catalog.test.ts` also writes each
 * emitted event into docs/events.md (the examples there are these, never hand-written).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { SOURCE_NAMES, rulesFor } from '../src/main.js';
import { CATALOG } from '../src/events/catalog.js';
import { packageRoot } from '../src/paths.js';
import { Control } from './catalog-world.js';
import { configFrom, names, startWorld, type World } from './harness.js';

type Json = Record<string, unknown>;

interface Case {
  /** The catalog name. */
  event: string;
  /** Extra config (e.g. the files source's paths). */
  config?: Json;
  /** Put the world in the before state; may return values the other steps use. */
  before?: (c: Control) => Promise<Json | void>;
  /** The change the next poll must report. */
  change: (c: Control, ctx: Json) => Promise<Json | void>;
  /** The expected subject. */
  subject: (ctx: Json) => string;
  /** Alerts carry status `firing`. */
  alert?: boolean;
  /** Expected site id of the event (null for account-wide records that name no site). */
  site?: number | null;
  /** Further checks of `data`. */
  check?: (e: HostwatchEvent, ctx: Json) => void;
  /** Move the daemon's clock this far before the change poll (a detail's slow schedule). */
  skewMs?: number;
  /** Rule overrides for this case (YAML text of a rule file). */
  rules?: string;
}

const SITE = 1;
const first = <T>(list: T[], what: string): T => {
  if (list.length === 0) throw new Error(`the seeded world has no ${what}`);
  return list[0]!;
};

/** A cron job on a watched site (sites 1-3), from the account-wide cron state. */
async function cronJob(c: Control): Promise<Json> {
  const s = await c.state<{ jobs: { id: number; site_id: number; enabled: boolean }[] }>('cron');
  const job = first(s.jobs.filter((j) => j.site_id <= 3 && j.enabled), 'enabled cron job on sites 1-3');
  await c.set('cron', { [`jobs.${job.id}.paused_reason`]: null });
  return { job: job.id, site: job.site_id };
}

/** A watched business with a confirmed profile, and that profile's platform. */
async function reputationProfile(c: Control): Promise<Json> {
  const s = await c.state<{ businesses: { id: number }[]; profiles: Record<string, Record<string, unknown>> }>('reputation');
  const b = first(s.businesses.filter((x) => Object.keys(s.profiles[x.id] ?? {}).length > 0), 'business with a profile');
  return { business: b.id, platform: Object.keys(s.profiles[b.id]!)[0] };
}

const CASES: Case[] = [
  {
    event: 'hourly_backup.failed',
    change: (c) => c.act('hourly', 'run', { error: 'disk quota exceeded while copying' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/hourly_backups`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'last_error', before: expect.anything(), after: 'disk quota exceeded while copying' }),
  },
  {
    event: 'cron.run_failed',
    before: cronJob,
    change: async (c, ctx) => {
      const r = await c.act<{ runs: { id: number }[] }>('cron', 'run', { job_id: ctx['job'], status: 'failed' });
      return { run: r.runs[0]!.id };
    },
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}/runs/${ctx['run']}`,
    check: (e, ctx) => {
      expect(e.data.site_id).toBe(ctx['site']);
      expect(e.data.changes).toEqual([{ path: `[id=${ctx['run']}]`, before: null, after: expect.objectContaining({ status: 'failed' }) }]);
    },
  },
  {
    event: 'cron.job_paused',
    alert: true,
    before: cronJob,
    change: (c, ctx) => c.set('cron', { [`jobs.${ctx['job']}.paused_reason`]: 'timed out 3 times in a row' }).then(() => undefined),
    subject: (ctx) => `sites/${ctx['site']}/cron_jobs/${ctx['job']}`,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'paused_reason', before: null, after: 'timed out 3 times in a row' }),
  },
  {
    event: 'dns.record_changed',
    before: async (c) => ({ record: first((await c.state<{ records: { id: number; type: string }[] }>('dns', SITE)).records.filter((r) => r.type === 'A'), 'A record').id }),
    change: (c, ctx) => c.set('dns', { [`records.${ctx['record']}.value`]: '192.0.2.200' }, SITE).then(() => undefined),
    subject: (ctx) => `sites/${SITE}/dns/${ctx['record']}`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'value', before: expect.any(String), after: '192.0.2.200' }),
  },
  {
    event: 'dns.publishing_failed',
    alert: true,
    before: (c) => c.act('dns', 'publish', {}, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'refuse', { error: 'record conflicts with an existing CNAME' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/dns_publishing`,
    site: SITE,
    check: (e) => expect(JSON.stringify(e.data.changes)).toContain('record conflicts with an existing CNAME'),
  },
  {
    event: 'nameservers.unpointed',
    alert: true,
    before: (c) => c.act('dns', 'point', {}, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'unpoint', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/nameservers`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'pointed', before: true, after: false }),
  },
  {
    event: 'dns.zone_expired',
    alert: true,
    before: (c) => c.act('dns', 'expire_zone', { expired: false }, SITE).then(() => undefined),
    change: (c) => c.act('dns', 'expire_zone', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/nameservers`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'zone_expired', before: false, after: true }),
  },
  {
    event: 'security.under_attack',
    alert: true,
    before: async (c) => {
      await c.cdnCms(SITE);
      await c.act('security', 'under_attack', { on: false }, SITE);
    },
    change: (c) => c.act('security', 'under_attack', { on: true }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/security`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'under_attack.on', before: false, after: true }),
  },
  {
    event: 'security.rules_changed',
    before: (c) => c.cdnCms(SITE),
    change: async (c) => ({ rule: (await c.act<{ id: string }>('security', 'external_rule', { name: 'Block a range' }, SITE)).id }),
    subject: (ctx) => `sites/${SITE}/security_rules/${ctx['rule']}`,
    site: SITE,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['rule']}]`, before: null, after: expect.objectContaining({ name: 'Block a range' }) }]),
  },
  {
    event: 'botcheck.revoked',
    alert: true,
    before: async (c) => {
      await c.cdnCms(SITE);
      await c.act('botcheck', 'revoke', { revoked: false }, SITE);
    },
    change: (c) => c.act('botcheck', 'revoke', {}, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/botcheck`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'revoked', before: false, after: true }),
  },
  {
    event: 'extradb.in_grace',
    alert: true,
    before: async (c) => {
      const s = await c.state<{ databases: { id: number; site_id: number }[] }>('extradb');
      const db = first(s.databases.filter((d) => d.site_id <= 3), 'extra database on sites 1-3');
      await c.act('extradb', 'grace', { db_id: db.id, in_grace: false });
      return { db: db.id, site: db.site_id };
    },
    change: (c, ctx) => c.act('extradb', 'grace', { db_id: ctx['db'] }).then(() => undefined),
    subject: (ctx) => `extra-databases/${ctx['db']}`,
    check: (e, ctx) => {
      expect(e.data.site_id).toBe(ctx['site']);
      expect(e.data.changes).toContainEqual({ path: 'in_grace', before: false, after: true });
    },
  },
  {
    event: 'mail_sending.failed',
    alert: true,
    before: (c) => c.set('mail', { state: 'active', last_test: null }, SITE).then(() => undefined),
    change: (c) => c.act('mail', 'fail', { note: 'the provider refused the key' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/mail_sending`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'state', before: 'active', after: 'error' }),
  },
  {
    event: 'plugin_update.held',
    change: async (c) => ({ hold: (await c.act<{ id: number }>('updates', 'hold', { site_id: SITE })).id }),
    subject: (ctx) => `plugin-updates/${ctx['hold']}`,
    site: SITE,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['hold']}]`, before: null, after: expect.objectContaining({ state: 'holding', site_id: SITE }) }]),
  },
  {
    event: 'file.changed',
    config: { sources: { files: { paths: ['.htaccess'] } } },
    change: (c) => c.act('files', 'touch', { path: '.htaccess', content: 'Deny from all\n', mode: '600' }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/files/.htaccess`,
    site: SITE,
    check: (e) => {
      expect(e.data.changes).toContainEqual({ path: 'mode', before: '644', after: '600' });
      expect(e.data.changes.map((x) => x.path)).toEqual(expect.arrayContaining(['size', 'modified']));
    },
  },
  {
    event: 'rank.position_changed',
    before: async (c) => {
      const s = await c.state<{ keywords: { id: number; domain_id: number; active: boolean }[] }>('rank');
      const k = first(s.keywords.filter((x) => x.active), 'active rank keyword');
      await c.act('rank', 'move', { keyword_id: k.id, position: 14 });
      return { keyword: k.id, domain: k.domain_id };
    },
    change: (c, ctx) => c.act('rank', 'move', { keyword_id: ctx['keyword'], position: 8 }).then(() => undefined),
    subject: (ctx) => `rank/domains/${ctx['domain']}/keywords/${ctx['keyword']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'position', before: 14, after: 8 }),
  },
  {
    event: 'local.map_pack_lost',
    before: async (c) => {
      const s = await c.state<{ keywords: { id: number }[] }>('local');
      const k = first(s.keywords, 'local keyword');
      await c.act('local', 'move', { keyword_id: k.id, map_position: 2 });
      return { keyword: k.id };
    },
    change: (c, ctx) => c.act('local', 'move', { keyword_id: ctx['keyword'], map_position: 6 }).then(() => undefined),
    subject: (ctx) => `local/keywords/${ctx['keyword']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'map_position', before: 2, after: 6 }),
  },
  {
    event: 'reputation.poor_review',
    // A new 1-star review also lowers the profile's average: that event has its own case.
    rules: 'rules:\n  - { name: reputation-rating-dropped, enabled: false }\n',
    before: reputationProfile,
    change: async (c, ctx) => {
      const r = await c.act<{ url: string }>('reputation', 'review', { business_id: ctx['business'], platform: ctx['platform'], rating: 1 });
      return { url: r.url };
    },
    // The review's url is its key, as it is (a subject is a name, not an address).
    subject: (ctx) => `reputation/businesses/${ctx['business']}/reviews/${ctx['url']}`,
    site: null,
    check: (e, ctx) =>
      expect(e.data.changes).toEqual([{ path: `[url=${ctx['url']}]`, before: null, after: expect.objectContaining({ rating: 1, poor: true, replied: false }) }]),
  },
  {
    event: 'reputation.rating_dropped',
    before: reputationProfile,
    // A replied 1-star review: the average drops, the business list does not move, so the
    // slow schedule of the detail (2 h) is what reads it.
    change: (c, ctx) => c.act('reputation', 'review', { business_id: ctx['business'], platform: ctx['platform'], rating: 1, replied: true }).then(() => undefined),
    skewMs: 3 * 3_600_000,
    subject: (ctx) => `reputation/businesses/${ctx['business']}/profiles/${ctx['platform']}`,
    site: null,
    check: (e) => {
      const rating = e.data.changes.find((x) => x.path === 'profile.rating')!;
      expect(rating.after as number).toBeLessThan(rating.before as number);
    },
  },
  {
    event: 'competitor.changed',
    before: async (c) => {
      const s = await c.state<{ domains: { id: number; keywords: number }[] }>('competitors');
      const d = first(s.domains, 'watched competitor');
      return { watch: d.id, keywords: d.keywords };
    },
    change: (c, ctx) => c.act('competitors', 'move', { watch_id: ctx['watch'], keywords: Number(ctx['keywords']) * 2 + 10 }).then(() => undefined),
    subject: (ctx) => `competitors/domains/${ctx['watch']}`,
    site: null,
    check: (e, ctx) => expect(e.data.changes).toContainEqual({ path: 'keywords', before: ctx['keywords'], after: Number(ctx['keywords']) * 2 + 10 }),
  },
  {
    event: 'footprint.finding_new',
    before: (c) => c.act('footprint', 'report', { drop: ['shared_ip'], score: 80 }).then(() => undefined),
    change: (c) => c.act('footprint', 'report', { add: ['shared_ip'], score: 80 }).then(() => undefined),
    subject: () => 'footprint/latest/findings/shared_ip',
    site: null,
    check: (e) => expect(e.data.changes).toEqual([{ path: '[code=shared_ip]', before: null, after: expect.objectContaining({ owner: 'customer', code: 'shared_ip' }) }]),
  },
  {
    event: 'footprint.score_dropped',
    before: (c) => c.act('footprint', 'report', { score: 90 }).then(() => undefined),
    change: (c) => c.act('footprint', 'report', { score: 70 }).then(() => undefined),
    subject: () => 'footprint',
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'latest.score', before: 90, after: 70 }),
  },
  {
    event: 'seo.metrics_changed',
    before: (c) => c.act('seo', 'reading', { trust_flow: 20, citation_flow: 25, backlinks: 1000, referring_domains: 100 }, SITE).then(() => undefined),
    change: (c) => c.act('seo', 'reading', { trust_flow: 30, citation_flow: 25, backlinks: 1000, referring_domains: 100 }, SITE).then(() => undefined),
    subject: () => `sites/${SITE}/seo_metrics`,
    site: SITE,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'latest.trust_flow', before: 20, after: 30 }),
  },
  {
    event: 'aivis.visibility_changed',
    before: async (c) => {
      const s = await c.state<{ brands: { id: number }[] }>('aivis');
      const b = first(s.brands, 'AI visibility brand');
      await c.act('aivis', 'move', { brand_id: b.id, visibility: 20 });
      return { brand: b.id };
    },
    change: (c, ctx) => c.act('aivis', 'move', { brand_id: ctx['brand'], visibility: 40 }).then(() => undefined),
    subject: (ctx) => `ai-visibility/brands/${ctx['brand']}`,
    site: null,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'visibility', before: 20, after: 40 }),
  },
  {
    event: 'archive.restore_finished',
    before: async (c) => {
      const s = await c.state<{ restores: { id: number }[] }>('archive');
      const r = first(s.restores, 'archive restore');
      await c.set('archive', { [`restores.${r.id}.state`]: 'running', [`restores.${r.id}.state_label`]: 'Running', [`restores.${r.id}.running`]: true, [`restores.${r.id}.done`]: false, [`restores.${r.id}.progress_pct`]: 50 });
      return { restore: r.id };
    },
    change: (c, ctx) => c.act('archive', 'finish', { restore_id: ctx['restore'], state: 'done' }).then(() => undefined),
    subject: (ctx) => `archive/restores/${ctx['restore']}`,
    check: (e) => expect(e.data.changes).toContainEqual({ path: 'done', before: false, after: true }),
  },
  {
    event: 'report.created',
    change: async (c) => {
      const s = await c.state<{ clients: { id: number }[] }>('reports');
      const r = await c.act<{ id: number }>('reports', 'create', { client_id: first(s.clients, 'report client').id });
      return { report: r.id };
    },
    subject: (ctx) => `client-reports/reports/${ctx['report']}`,
    site: null,
    check: (e, ctx) => expect(e.data.changes).toEqual([{ path: `[id=${ctx['report']}]`, before: null, after: expect.objectContaining({ id: ctx['report'] }) }]),
  },
  {
    event: 'research.credits_low',
    alert: true,
    before: async (c) => {
      const s = await c.state<{ keyword_research: { credits: { used: number; limit: number } }; domain_overview: { credits: { used: number; limit: number } } }>('research');
      await c.set('research', { 'keyword_research.credits.used': 0, 'domain_overview.credits.used': 0 });
      return { limit: s.keyword_research.credits.limit };
    },
    change: (c, ctx) => c.act('research', 'use', { tool: 'keyword_research', credits: Math.ceil(Number(ctx['limit']) * 0.95) }).then(() => undefined),
    subject: () => 'research',
    site: null,
    check: (e) => expect(e.data.changes.map((x) => x.path)).toContain('keyword_research.credits.used'),
  },
];

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const examples = new Map<string, HostwatchEvent>();

describe('the built-in rules', () => {
  it('cover every event of the PRODUCT.md catalog, and docs/events.md documents each', () => {
    expect(CATALOG.length).toBeGreaterThan(30);
    const config = configFrom('api: { base_url: https://x.example, key: k }\n', {}, '/tmp');
    const events = new Set(rulesFor(config).map((r) => r.event));
    // The two operator events are raised by the poller itself, not by rules.
    const missing = CATALOG.filter((name) => !events.has(name) && !name.startsWith('source.'));
    expect(missing).toEqual([]);
    const documented = readFileSync(join(packageRoot(), 'docs', 'events.md'), 'utf8');
    expect(CATALOG.filter((name) => !documented.includes(`| \`${name}\` |`))).toEqual([]);
    expect(SOURCE_NAMES.length).toBeGreaterThan(40);
  });
});

describe('every catalog event, end to end against the simulator', () => {
  for (const t of CASES) {
    it(`${t.event}: a baseline poll, the change, then exactly one ${t.event} with its subject and data, then nothing`, async () => {
      world = await startWorld({ config: t.config ?? {} });
      const c = new Control(world.sim);
      await c.still();
      const ctx: Json = { ...((await t.before?.(c)) ?? {}) };
      let rules: string[] = [];
      if (t.rules) {
        writeFileSync(join(world.dir, 'case-rules.yaml'), t.rules);
        rules = [join(world.dir, 'case-rules.yaml')];
      }
      let skew = 0;
      const app = await world.app({ ...(t.config ?? {}), rules }, { now: () => Date.now() + skew });
      await app.runOnce();
      const baseline = world.events.length;
      Object.assign(ctx, (await t.change(c, ctx)) ?? {});
      skew += t.skewMs ?? 0;
      await app.runOnce();
      const got = world.events.slice(baseline);
      expect(names(got)).toEqual([t.alert ? `${t.event}:firing` : t.event]);
      const e = got[0]!;
      expect(e.type).toBe(`hostwatch.${t.event}`);
      expect(e.subject).toBe(t.subject(ctx));
      expect(e.data.name).toBe(t.event);
      if (t.site !== undefined) expect(e.data.site_id).toBe(t.site);
      if (e.data.site_id !== null) expect(e.data.domain).toBe(world.sim.world.getSite(e.data.site_id)!.domain);
      expect(e.data.summary).not.toContain(' on sites/'); // the template rendered, not the fallback
      t.check?.(e, ctx);
      examples.set(t.event, e);
      const after = world.events.length;
      await app.runOnce();
      expect(names(world.events.slice(after))).toEqual([]);
    });
  }
});

afterAll(() => {
  if (!process.env['HOSTWATCH_WRITE_EXAMPLES'] || examples.size === 0) return;
  const file = join(packageRoot(), 'docs', 'events.md');
  const text = readFileSync(file, 'utf8');
  const start = '<!-- examples:start (written by test/catalog.test.ts; do not edit) -->';
  const end = '<!-- examples:end -->';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < 0) throw new Error('docs/events.md has no examples markers');
  const body = [...examples.keys()]
    .sort()
    .map((name) => `### \`${name}\`\n\n\`\`\`json\n${JSON.stringify(examples.get(name), null, 2)}\n\`\`\`\n`)
    .join('\n');
  writeFileSync(file, `${text.slice(0, i + start.length)}\n\n${body}\n${text.slice(j)}`);
});

describe('thresholds', () => {
  it('are rule params a user file overrides by name (rank min_move 10: a move of 6 places is quiet, 12 is not)', async () => {
    world = await startWorld();
    const c = new Control(world.sim);
    await c.still();
    const s = await c.state<{ keywords: { id: number; active: boolean }[] }>('rank');
    const k = first(s.keywords.filter((x) => x.active), 'active rank keyword');
    await c.act('rank', 'move', { keyword_id: k.id, position: 40 });
    writeFileSync(join(world.dir, 'mine.yaml'), 'rules:\n  - { name: rank-position-changed, params: { min_move: 10 } }\n');
    const app = await world.app({ rules: [join(world.dir, 'mine.yaml')] });
    await app.runOnce();
    const base = world.events.length;
    await c.act('rank', 'move', { keyword_id: k.id, position: 34 });
    await app.runOnce();
    expect(names(world.events.slice(base))).toEqual([]);
    await c.act('rank', 'move', { keyword_id: k.id, position: 22 });
    await app.runOnce();
    expect(names(world.events.slice(base))).toEqual(['rank.position_changed']);
  });
});
