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
];

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const examples = new Map<string, HostwatchEvent>();

describe('the built-in rules', () => {
  it('cover every event of the PRODUCT.md catalog', () => {
    const product = readFileSync(join(packageRoot(), '..', 'shared', 'PRODUCT.md'), 'utf8');
    const catalog = [...product.matchAll(/^\| `([a-z_]+\.[a-z_]+)`(?:, `([a-z_]+\.[a-z_]+)`)? \|/gm)].flatMap((m) => [m[1]!, ...(m[2] ? [m[2]] : [])]);
    expect(catalog.length).toBeGreaterThan(30);
    const config = configFrom('api: { base_url: https://x.example, key: k }\n', {}, '/tmp');
    const events = new Set(rulesFor(config).map((r) => r.event));
    // The two operator events are raised by the poller itself, not by rules.
    const missing = catalog.filter((name) => !events.has(name) && !name.startsWith('source.'));
    expect(missing).toEqual([]);
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
      const app = world.app(t.config ?? {});
      await app.runOnce();
      const baseline = world.events.length;
      Object.assign(ctx, (await t.change(c, ctx)) ?? {});
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
