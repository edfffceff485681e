/**
 * Routing (docs/routing.md): first match wins unless it continues, send_resolved, labels,
 * group keys and due times (pure), and maintenance windows that keep events out of the
 * outbox but in the event log.
 */
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChannelConfig, RouteConfig } from '../src/config/types.js';
import { groupDueAt, groupKey, nextDigestAt } from '../src/notify/grouping.js';
import { MaintenanceCalendar } from '../src/notify/maintenance.js';
import { compileRoutes, compileRouter, RouteError, unroutedBecause } from '../src/notify/routing.js';
import { testClock } from './clock.js';
import { siteEvent } from './events-fixture.js';
import { startWorld, type World } from './harness.js';

const channels: ChannelConfig[] = ['ops', 'oncall', 'hooks', 'quiet'].map((name) => ({ name, type: 'console' }));
const route = (r: Partial<RouteConfig> & { channels: string[] }): RouteConfig => ({
  match: null,
  continue: false,
  group_by: [],
  group_wait_ms: 30_000,
  group_interval_ms: 300_000,
  send_resolved: true,
  ...r,
});

describe('routes', () => {
  it('without routes, every event goes to every channel', () => {
    expect(compileRouter([], channels)(siteEvent('a', 1))).toEqual(['ops', 'oncall', 'hooks', 'quiet']);
  });

  it('the first matching route decides; a route with continue lets the next ones match too', () => {
    const router = compileRouter(
      [
        route({ match: "severity == 'critical'", channels: ['oncall'], continue: true }),
        route({ match: 'site_id == 7', channels: ['quiet'] }),
        route({ channels: ['ops', 'hooks'] }),
      ],
      channels,
    );
    expect(router(siteEvent('c', 1, { severity: 'critical' }))).toEqual(['oncall', 'ops', 'hooks']);
    expect(router(siteEvent('c7', 7, { severity: 'critical' }))).toEqual(['oncall', 'quiet']);
    expect(router(siteEvent('w7', 7))).toEqual(['quiet']);
    expect(router(siteEvent('w', 1))).toEqual(['ops', 'hooks']);
  });

  it('reads site_id as the whole number it is: `site_id % 2 == 0` and `site_id in [3, 4]` match (a CEL double made both errors: no match)', () => {
    const router = compileRouter([route({ match: 'site_id % 2 == 0', channels: ['quiet'] }), route({ match: 'site_id in [3, 5]', channels: ['oncall'] }), route({ channels: ['ops'] })], channels);
    expect(router(siteEvent('even', 4))).toEqual(['quiet']);
    expect(router(siteEvent('odd', 3))).toEqual(['oncall']);
    expect(router(siteEvent('other', 7))).toEqual(['ops']);
  });

  it('a route with send_resolved: false does not take resolutions; they fall through to later routes', () => {
    const router = compileRouter(
      [route({ match: "name == 'site.offline'", channels: ['oncall'], send_resolved: false }), route({ channels: ['hooks'] })],
      channels,
    );
    expect(router(siteEvent('f', 1, { name: 'site.offline', status: 'firing' }))).toEqual(['oncall']);
    expect(router(siteEvent('r', 1, { name: 'site.offline', status: 'resolved' }))).toEqual(['hooks']);
  });

  it('matches on labels the rule gave the event (data.labels), and an expression that errors is no match', () => {
    const router = compileRouter([route({ match: "labels.team == 'web'", channels: ['ops'] }), route({ channels: ['hooks'] })], channels);
    const labelled = siteEvent('l', 1);
    labelled.data['labels'] = { team: 'web' };
    expect(router(labelled)).toEqual(['ops']);
    expect(router(siteEvent('nl', 1))).toEqual(['hooks']);
  });

  it('a channel reached by two routes gets the event once, with the first route\'s grouping', () => {
    const targets = compileRoutes(
      [route({ channels: ['ops'], continue: true, group_by: ['site_id'] }), route({ channels: ['ops', 'hooks'], group_by: ['name'] })],
      channels,
    )(siteEvent('d', 3));
    expect(targets.map((t) => [t.channel, t.route, t.group_by])).toEqual([
      ['ops', 0, ['site_id']],
      ['hooks', 1, ['name']],
    ]);
  });

  it('an invalid match is a RouteError naming the route', () => {
    expect(() => compileRouter([route({ match: 'severity ==', channels: ['ops'] })], channels)).toThrow(RouteError);
    expect(() => compileRouter([route({ match: 'severity ==', channels: ['ops'] })], channels)).toThrow(/^routes\[0\]\.match: CEL error: /);
  });

  it('say why they send an event nowhere (for explain): send_resolved: false, a route with no channel, no match, no channel at all', () => {
    const resolved = siteEvent('r', 3, { name: 'site.offline', severity: 'critical', status: 'resolved' });
    const critical = route({ match: "severity == 'critical'", channels: ['oncall'], send_resolved: false });
    expect(unroutedBecause([critical], channels, resolved)).toBe('routes[0] matched it but has send_resolved: false, and no route after took this resolution');
    // The firing one is sent, and a later route that takes resolutions takes this one.
    expect(unroutedBecause([critical], channels, siteEvent('f', 3, { name: 'site.offline', severity: 'critical', status: 'firing' }))).toBeNull();
    expect(unroutedBecause([critical, route({ channels: ['ops'] })], channels, resolved)).toBeNull();
    expect(unroutedBecause([route({ match: 'site_id == 3', channels: [] })], channels, resolved)).toBe('routes[0] matched it, and names no channel');
    expect(unroutedBecause([route({ match: 'site_id == 9', channels: ['ops'] }), route({ match: 'site_id == 8', channels: ['ops'] })], channels, resolved)).toBe('no route matched it (2 routes)');
    expect(unroutedBecause([], [], resolved)).toBe('the config has no channels');
    expect(unroutedBecause([], channels, resolved)).toBeNull();
  });
});

describe('grouping decisions', () => {
  it('the group key is the route and the group_by values', () => {
    const e = siteEvent('k', 12, { name: 'site.offline' });
    expect(groupKey(e, 0, [])).toBe('r0');
    expect(groupKey(e, 2, ['site_id', 'name'])).toBe('r2|site_id=12|name="site.offline"');
  });

  it('a new group waits group_wait; a group that sent recently waits for group_interval; a waiting group is joined', () => {
    expect(groupDueAt(1_000, { pendingDue: null, lastSent: null }, 30_000, 300_000)).toBe(31_000);
    expect(groupDueAt(100_000, { pendingDue: null, lastSent: 50_000 }, 30_000, 300_000)).toBe(350_000);
    expect(groupDueAt(900_000, { pendingDue: null, lastSent: 50_000 }, 30_000, 300_000)).toBe(930_000);
    expect(groupDueAt(5_000, { pendingDue: 31_000, lastSent: null }, 30_000, 300_000)).toBe(31_000);
  });

  it('the digest goes at the next local time in its zone, across a daylight-saving change', () => {
    const paris = { hour: 8, minute: 0, timezone: 'Europe/Paris' };
    expect(new Date(nextDigestAt(Date.parse('2026-11-21T05:00:00Z'), paris)).toISOString()).toBe('2026-11-21T07:00:00.000Z');
    expect(new Date(nextDigestAt(Date.parse('2026-11-21T07:00:00Z'), paris)).toISOString()).toBe('2026-11-22T07:00:00.000Z');
    // Summer time: 08:00 in Paris is 06:00Z; the night of the change (29 March 2026).
    expect(new Date(nextDigestAt(Date.parse('2026-03-28T12:00:00Z'), paris)).toISOString()).toBe('2026-03-29T06:00:00.000Z');
    expect(new Date(nextDigestAt(Date.parse('2026-11-21T23:30:00Z'), { hour: 8, minute: 30, timezone: 'UTC' })).toISOString()).toBe('2026-11-22T08:30:00.000Z');
  });
});

const worlds: World[] = [];
afterEach(async () => {
  await Promise.allSettled(worlds.splice(0).map((w) => w.close()));
});

describe('maintenance windows', () => {
  it('suppress delivery, not storage: during the window matching events are stored and marked, outside it they are queued', async () => {
    const w = await startWorld();
    worlds.push(w);
    const clock = testClock('2026-11-22T01:30:00Z'); // Sunday 02:30 in Paris
    const app = await w.app(
      {
        channels: [{ name: 'log', type: 'console' }],
        maintenance: [
          { name: 'sunday-backup', schedule: '0 2 * * 0', duration: '2h', timezone: 'Europe/Paris', sites: [2, 3] },
          { name: 'never-now', schedule: '0 12 * * *', duration: '1h', match: 'true' },
        ],
      },
      { now: clock.now, consoleWrite: () => undefined },
    );
    const inside = siteEvent('m2', 2);
    const otherSite = siteEvent('m1', 1);
    await app.notifier.publish(inside);
    await app.notifier.publish(otherSite);
    clock.advance(2 * 3_600_000); // 04:30 Paris: the window (02:00–04:00) is over
    const after = siteEvent('m2-after', 2);
    await app.notifier.publish(after);

    const db = new BetterSqlite3(w.dbPath, { readonly: true });
    try {
      const events = db.prepare('SELECT id, held_by, held_outcome FROM events ORDER BY seq').all();
      expect(events).toEqual([
        { id: inside.id, held_by: 'maintenance:sunday-backup', held_outcome: 'suppressed' },
        { id: otherSite.id, held_by: null, held_outcome: null },
        { id: after.id, held_by: null, held_outcome: null },
      ]);
      expect(db.prepare('SELECT event_id FROM outbox ORDER BY id').all()).toEqual([{ event_id: otherSite.id }, { event_id: after.id }]);
    } finally {
      db.close();
    }
  });
});

describe('maintenance windows across a change of the clocks (Europe/Berlin)', () => {
  /** The minutes (UTC, HH:MM) at which the windows are open, in steps of 30 minutes from `from`. */
  function openAt(from: string, hours: number): string[] {
    const calendar = new MaintenanceCalendar([
      { name: 'sunday', schedule: '0 2 * * 0', duration_ms: 2 * 3_600_000, timezone: 'Europe/Berlin', sites: [], match: null },
      { name: 'nightly', schedule: '30 2 * * *', duration_ms: 3_600_000, timezone: 'Europe/Berlin', sites: [], match: null },
    ]);
    try {
      const out: string[] = [];
      for (let t = Date.parse(from); t < Date.parse(from) + hours * 3_600_000; t += 30 * 60_000) {
        out.push(`${new Date(t).toISOString().slice(11, 16)} ${calendar.open(t).join(',') || '-'}`);
      }
      return out;
    } finally {
      calendar.close();
    }
  }

  it('open at the first minute after the clocks go forward when their start was skipped, for their whole duration', () => {
    // 29 March 2026: 02:00 CET becomes 03:00 CEST at 01:00Z. Both starts fall in the skipped hour.
    expect(openAt('2026-03-29T00:00:00Z', 4)).toEqual([
      '00:00 -',
      '00:30 -',
      '01:00 sunday,nightly',
      '01:30 sunday,nightly',
      '02:00 sunday',
      '02:30 sunday',
      '03:00 -',
      '03:30 -',
    ]);
  });

  it('open once, not twice, when the clocks go back and their start is shown a second time', () => {
    // 25 October 2026: 03:00 CEST becomes 02:00 CET at 01:00Z; 02:00–02:59 is shown twice.
    expect(openAt('2026-10-24T23:30:00Z', 5)).toEqual([
      '23:30 -',
      '00:00 sunday',
      '00:30 sunday,nightly',
      '01:00 sunday,nightly',
      '01:30 sunday',
      '02:00 -',
      '02:30 -',
      '03:00 -',
      '03:30 -',
      '04:00 -',
    ]);
  });

  it('open at their local time on an ordinary Sunday', () => {
    expect(openAt('2026-11-01T00:30:00Z', 3)).toEqual(['00:30 -', '01:00 sunday', '01:30 sunday,nightly', '02:00 sunday,nightly', '02:30 sunday', '03:00 -']);
  });
});

describe('config of routes, channels, maintenance and inhibition', () => {
  it('reports every bad key at once, each with its line, key path and what is allowed', async () => {
    const { readFileSync } = await import('node:fs');
    const { parseConfig } = await import('../src/config/parse.js');
    const { formatConfigErrors } = await import('../src/config/errors.js');
    const { SOURCE_NAMES } = await import('../src/sources/registry.js');
    const text = readFileSync('test/fixtures/config/bad-delivery-keys.yaml', 'utf8');
    const r = parseConfig(text, 'bad-delivery-keys.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(formatConfigErrors(r.errors).split('\n')).toEqual([
      'bad-delivery-keys.yaml:5:86: channels[0].digest: must be like "daily at 08:00" or "daily at 08:00 Europe/Paris" (24-hour time, IANA time zone) (got "every morning")',
      // One bad secret of a rotation list is named by its index; its value is never shown.
      'bad-delivery-keys.yaml:6:86: channels[1].secret[1]: must be a Standard Webhooks secret: "whsec_" followed by base64, like whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw (got "[redacted]")',
      'bad-delivery-keys.yaml:6:99: channels[1].mode: must be structured (the whole CloudEvent as JSON, the default) or binary (ce-* headers, data as the body) (got "batch")',
      'bad-delivery-keys.yaml:8:35: routes[0].group_by[0]: must be a list of event fields to group by, like [site_id] or [labels.client, name]; allowed: site_id, domain, name, type, severity, rule, subject, status, labels.<name> (got "site")',
      'bad-delivery-keys.yaml:8:52: routes[0].continue: must be true or false (got "maybe")',
      'bad-delivery-keys.yaml:10:32: maintenance[0].schedule: must be a cron expression of 5 fields, like "0 2 * * 0" (Sundays at 02:00) (got "0 25 * * *")',
      'bad-delivery-keys.yaml:10:56: maintenance[0].duration: must be a duration of at least 1m, like 1m or 6m (got "30s")',
      'bad-delivery-keys.yaml:10:71: maintenance[0].timezone: must be an IANA time zone like Europe/Paris or UTC (got "Mars/Olympus")',
      'bad-delivery-keys.yaml:11:65: maintenance[1].match: is not a valid CEL expression: <input>:1:9: found = but expecting end of input (got "site_id = 3")',
      'bad-delivery-keys.yaml:13:15: inhibit[0].source: must be an event name like site.offline (got "offline")',
    ]);
  });
});
