/**
 * Site labels (config `site_labels`): given by a CEL match over the site or fed by client
 * reports, carried in `data.labels` of every event about the site, and read by routes,
 * silences, maintenance windows, inhibition targets and `group_by`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import { formatConfigErrors } from '../src/config/errors.js';
import { SiteLabeler } from '../src/labels.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { Dispatcher, type DispatchView } from '../src/notify/dispatch.js';
import { groupKey } from '../src/notify/grouping.js';
import { MaintenanceCalendar } from '../src/notify/maintenance.js';
import { SilenceMatcher } from '../src/notify/silences.js';
import { SiteDirectory } from '../src/pipeline/site-directory.js';
import { siteEvent } from './events-fixture.js';
import { configFrom, startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const MINIMAL = 'api: { base_url: https://panel.example.com, key: k }\n';

describe('site labels route events', () => {
  it('labels from a match and from client reports land in data.labels (the rule\'s win on a clash) and route each site to its client\'s channel', async () => {
    const [acme, rest] = await Promise.all([startReceiver(), startReceiver()]);
    const w: World = await startWorld();
    cleanups.push(() => w.close(), () => acme.close(), () => rest.close());
    const domain1 = w.sim.world.getSite(1)!.domain;
    const app = await w.app({
      site_labels: [
        { match: `glob(domain, '${domain1.replace(/^[^.]+/, '*')}') && id == 1`, labels: { client: 'acme', tier: 'gold', category: 'site-label-loses' } },
        { match: 'id == 2', labels: { client: 'globex' } },
        { from: 'client_reports', label: 'report_client' },
      ],
      channels: [
        { name: 'acme', type: 'webhook', url: acme.url, secret: TEST_SECRET },
        { name: 'rest', type: 'webhook', url: rest.url, secret: TEST_SECRET },
      ],
      routes: [{ match: "labels.client == 'acme'", channels: ['acme'] }, { channels: ['rest'] }],
    });
    await app.runOnce(); // baseline (client reports read, so their label is known from now on)
    w.sim.world.setHealth(1, { status: 'offline' });
    w.sim.world.setHealth(2, { status: 'offline' });
    await app.runOnce();

    const a = acme.accepted().map((r) => r.event!);
    const r = rest.accepted().map((x) => x.event!);
    expect(a.map((e) => [e.data.name, e.data.site_id])).toEqual([['site.offline', 1]]);
    expect(r.filter((e) => e.data.site_id !== null).map((e) => [e.data.name, e.data.site_id])).toEqual([['site.offline', 2]]);
    // The seeded client reports list one client per site domain: "<site name> Ltd".
    expect(a[0]!.data['labels']).toEqual({ client: 'acme', tier: 'gold', category: 'availability', report_client: `${w.sim.world.getSite(1)!.name} Ltd` });
    expect(r.find((e) => e.data.site_id === 2)!.data['labels']).toMatchObject({ client: 'globex', category: 'availability' });
  });
});

describe('site labels in the pure parts', () => {
  const labeler = new SiteLabeler([
    { match: "glob(domain, '*.acme.com')", labels: { client: 'acme', tier: 'silver' } },
    { match: "site.plan == 'gold'", labels: { tier: 'gold' } },
    { match: 'site.missing_field == true', labels: { never: 'x' } },
    { from: 'client_reports', label: 'client_name' },
  ]);

  it('later entries win, a failing match labels nothing, and client reports match domains without case or www.', () => {
    const dir = new SiteDirectory(labeler);
    dir.setClients([{ id: 1, name: 'Acme Inc', domains: ['WWW.Shop.Acme.com'] }, { id: 2, name: 'Agency', domains: ['shop.acme.com', 'other.example'] }]);
    dir.setSites([{ id: 1, domain: 'shop.acme.com', plan: 'gold' }, { id: 2, domain: 'b.example' }]);
    expect(dir.get(1)!.labels).toEqual({ client: 'acme', tier: 'gold', client_name: 'Acme Inc, Agency' });
    expect(dir.get(2)!.labels).toBeUndefined();
  });

  it('reads the site id as the whole number it is, so `id % 50 == 3` labels site 53 (a CEL double made it an error: no labels)', () => {
    const byId = new SiteLabeler([{ match: 'id % 50 == 3', labels: { client: 'c3' } }, { match: 'id in [7, 8]', labels: { tier: 'gold' } }]);
    const dir = new SiteDirectory(byId);
    dir.setSites([{ id: 53, domain: 'a.example' }, { id: 8, domain: 'b.example' }, { id: 9, domain: 'c.example' }]);
    expect(dir.get(53)!.labels).toEqual({ client: 'c3' });
    expect(dir.get(8)!.labels).toEqual({ tier: 'gold' });
    expect(dir.get(9)!.labels).toBeUndefined();
  });

  it('silences, maintenance windows, inhibition targets and group_by read labels', () => {
    const e = siteEvent('x', 1, { name: 'backup.failed' });
    e.data['labels'] = { client: 'acme', category: 'backups' };
    const other = siteEvent('y', 2, { name: 'backup.failed' });
    other.data['labels'] = { client: 'globex' };

    const silence = { id: 's1', match: "labels.client == 'acme'", starts_at: 0, ends_at: 10, comment: 'c', created_by: 'u', created_at: 0, expired_at: null };
    const matcher = new SilenceMatcher();
    expect(matcher.first(e, [silence])?.id).toBe('s1');
    expect(matcher.first(other, [silence])).toBeNull();

    const cal = new MaintenanceCalendar([{ name: 'acme-night', schedule: '* * * * *', duration_ms: 3_600_000, timezone: 'UTC', sites: [], match: "labels.client == 'acme'" }]);
    expect(cal.covering(e, Date.parse('2026-11-21T10:00:30Z'))).toBe('acme-night');
    expect(cal.covering(other, Date.parse('2026-11-21T10:00:30Z'))).toBeNull();
    cal.close();

    const config = configFrom(`${MINIMAL}channels: [{ name: log, type: console }]\ninhibit: [{ source: site.offline, target: "labels.client == 'acme'" }]\n`, {}, '/tmp');
    const d = new Dispatcher(config);
    const view = (site: number): DispatchView => ({
      now: 1,
      silences: [],
      inhibitions: (s) => (s === site ? ['site.offline:' + site] : []),
      group: () => ({ pendingDue: null, lastSent: null }),
      incidents: () => new Set(),
    });
    expect(d.decide(e, view(1))).toEqual({ action: 'inhibited', by: 'inhibited:site.offline:1' });
    expect(d.decide(other, view(2))).toMatchObject({ action: 'queue' });

    expect(groupKey(e, 0, ['labels.client', 'name'])).toBe('r0|labels.client="acme"|name="backup.failed"');
    expect(groupKey(siteEvent('z', 3), 0, ['labels.client'])).toBe('r0|labels.client=null');
  });
});

describe('site_labels config errors', () => {
  const errorsOf = (yaml: string): string[] => {
    const r = parseConfig(`${MINIMAL}${yaml}`, 'labels.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    return r.ok ? [] : formatConfigErrors(r.errors).split('\n');
  };

  it('name the entry, the line and what is allowed: an unknown variable, bad CEL, a bad label name, a bad source', () => {
    expect(
      errorsOf(`site_labels:
  - { match: "domian == 'a.example'", labels: { client: acme } }
  - { match: "id ==", labels: { client: acme } }
  - { match: "id == 1", labels: { Client-Name: acme, tier: 3 } }
  - { from: crm, label: client }
`),
    ).toEqual([
      'labels.yaml:3:14: site_labels[0].match: uses unknown variable "domian" (did you mean domain?); a site label match can use id, domain, site, clients (got "domian == \'a.example\'")',
      'labels.yaml:4:14: site_labels[1].match: is not a valid CEL expression: <input>:1:4: found = but expecting end of input (got "id ==")',
      // The name is what is wrong: it is shown, at its own column.
      'labels.yaml:5:35: site_labels[2].labels.Client-Name: must be a label name: lower-case letters, digits and underscores, like client or tier (got the name "Client-Name")',
      'labels.yaml:5:60: site_labels[2].labels.tier: must be a text value, like acme (got 3)',
      'labels.yaml:6:13: site_labels[3].from: must be client_reports (client reports tie sites to clients by domain) (got "crm")',
    ]);
  });
});
