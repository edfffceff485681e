/**
 * Platform incidents: when many sites fire the same alert at once, people get one
 * `platform.incident` (Slack through a loopback endpoint, e-mail through a real SMTP
 * server) while programs still get every per-site alert (a Standard Webhooks receiver that
 * verifies signatures and validates CloudEvents). The incident resolves when fewer than N
 * sites remain, and the per-site alerts still firing then reach people.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Dispatcher, isHumanChannel, MACHINE_CHANNEL_TYPES, type DispatchView } from '../src/notify/dispatch.js';
import { incidentThreshold, stepIncident } from '../src/notify/incidents.js';
import { configFrom, names, startWorld, type World } from './harness.js';
import type { App } from '../src/main.js';
import { fakeSlack, type FakeSlack } from './fakes/slack.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';
import { startSmtp, type SmtpReceiver } from './smtp.js';
import { siteEvent } from './events-fixture.js';
import { explainEvent, explainWhyNot } from '../src/rules/explain.js';
import { repos } from '../src/store/repos.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

interface Outage {
  w: World;
  slack: FakeSlack;
  smtp: SmtpReceiver;
  hook: Receiver;
  channels: Array<Record<string, unknown>>;
}

async function outageWorld(sites: number): Promise<Outage> {
  const [slack, smtp, hook] = await Promise.all([fakeSlack(), startSmtp(), startReceiver()]);
  const w = await startWorld({ sim: { sites } });
  cleanups.push(() => w.close(), () => slack.close(), () => smtp.close(), () => hook.close());
  const channels = [
    { name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET },
    { name: 'ops', type: 'slack', url: slack.url },
    { name: 'oncall', type: 'email', to: ['ops@example.net'], from: 'hostwatch@example.net', smtp: { host: '127.0.0.1', port: smtp.port } },
  ];
  return { w, slack, smtp, hook, channels };
}

/** What the webhook receiver accepted, as `name:status` lines (signature and CloudEvent checked). */
function hooked(hook: Receiver): string[] {
  for (const r of hook.requests) {
    expect(r.signatureError).toBeNull();
    expect(r.cloudEventError).toBeNull();
  }
  return names(hook.accepted().map((r) => r.event!));
}

/** Event ids an e-mail carries (the X-Hostwatch-Event-Ids header). */
function mailIds(smtp: SmtpReceiver): string[][] {
  return smtp.messages.map((m) => String(m.headers.get('x-hostwatch-event-ids')).split(/[,\s]+/).filter(Boolean));
}

const count = (list: string[], name: string): number => list.filter((n) => n === name).length;

/** A baseline cycle, then sites 1..n go offline and a second cycle sees it. */
async function outage(w: World, app: App, n: number): Promise<void> {
  await app.runOnce(); // baseline
  for (let id = 1; id <= n; id++) w.sim.world.setHealth(id, { status: 'offline' });
  await app.runOnce();
}

describe('a platform incident', () => {
  it('a 25-site outage gives one platform.incident on Slack and e-mail, and 25 site.offline on the webhook', async () => {
    const { w, slack, smtp, hook, channels } = await outageWorld(25);
    const app = await w.app({ channels });
    await outage(w, app, 25);

    const got = hooked(hook);
    expect(count(got, 'site.offline:firing')).toBe(25);
    expect(count(got, 'platform.incident:firing')).toBe(1);
    const incident = hook.accepted().map((r) => r.event!).find((e) => e.data.name === 'platform.incident')!;
    expect(incident.subject).toBe('incidents/site.offline');
    expect(incident.data).toMatchObject({ status: 'firing', severity: 'critical', alert: 'site.offline', count: 25, threshold: 5, site_id: null });
    // Opened once: the polls committed after it in the same batch saw it open (their batch's
    // remembered incident rows were read again once it was written).
    expect(w.logs.lines.filter((l) => l.includes('platform incident opened'))).toHaveLength(1);
    expect((incident.data['sites'] as Array<{ site_id: number }>).map((s) => s.site_id)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(incident.data.summary).toMatch(/^Platform incident: site\.offline on 25 sites \(.+ and 20 more\)$/);

    // People: one message each, about the incident only.
    expect(slack.posts).toHaveLength(1);
    expect(slack.posts[0]!.body).toContain('Platform incident: site.offline on 25 sites');
    expect(slack.posts[0]!.body).not.toContain('is offline');
    expect(mailIds(smtp)).toEqual([[incident.id]]);

    // The per-site alerts are stored and marked as held by the incident, not lost.
    const [held] = await w.query<{ n: number }>("SELECT count(*) n FROM events WHERE held_by = 'incident:site.offline' AND held_outcome IS NULL");
    expect(held!.n).toBe(25);

    // explain says so: held for people, delivered to the webhook.
    const deps = { ...repos(app.store), rules: app.rules, now: Date.now() };
    const offline3 = hook.accepted().map((r) => r.event!).find((e) => e.data.name === 'site.offline' && e.data.site_id === 3)!;
    expect((await explainEvent(deps, offline3.id))!.slice(-2)).toEqual([
      'delivery: held by the platform incident about site.offline from the human channels it reaches that had not sent it yet (the channels below got it):',
      '  hooks: delivered after 1 attempt(s)',
    ]);
    const why = await explainWhyNot(deps, 'sites/3/health', 'site-offline');
    expect(why.reason).toBe('incident');
  });

  it('resolves when fewer than N sites remain; the alerts still firing then reach people, those over meanwhile do not', async () => {
    const { w, slack, smtp, hook, channels } = await outageWorld(8);
    const app = await w.app({ channels });
    await app.runOnce();
    for (let id = 1; id <= 8; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await app.runOnce();
    expect(slack.posts).toHaveLength(1);
    hook.requests.length = 0;

    // Five come back: three remain, fewer than 5.
    for (let id = 1; id <= 5; id++) w.sim.world.setHealth(id, { status: 'online' });
    await app.runOnce();

    const got = hooked(hook);
    expect(count(got, 'site.offline:resolved')).toBe(5);
    expect(count(got, 'platform.incident:resolved')).toBe(1);
    // The resolution names the alert its firing opened (PagerDuty's dedup_key, Opsgenie's alias).
    const incident = w.events.filter((e) => e.data.name === 'platform.incident');
    expect(incident.map((e) => e.data.status)).toEqual(['firing', 'resolved']);
    expect(incident[1]!.data['alert_id']).toBe(incident[0]!.data['alert_id']);
    expect(incident[0]!.data['alert_id']).toEqual(expect.any(String));
    expect(count(got, 'site.offline:firing')).toBe(0); // webhooks had them already
    // People: the incident's end, then the three sites still offline (released).
    expect(slack.posts).toHaveLength(2);
    const second = slack.posts[1]!.body;
    expect(second).toContain('Platform incident over: site.offline on 3 sites now (below 5)');
    for (const id of [6, 7, 8]) expect(second).toContain(w.sim.world.getSite(id)!.domain);
    expect(second).not.toContain('back online');
    expect(smtp.messages).toHaveLength(2);
    expect(mailIds(smtp)[1]).toHaveLength(4);
    const outcomes = await w.query("SELECT status, held_outcome, count(*) n FROM events WHERE held_by = 'incident:site.offline' GROUP BY status, held_outcome ORDER BY status, held_outcome");
    expect(outcomes).toEqual([
      { status: 'firing', held_outcome: 'dropped', n: 5 },
      { status: 'firing', held_outcome: 'released', n: 3 },
      { status: 'resolved', held_outcome: 'dropped', n: 5 },
    ]);
  });

  it('sends a site\'s resolution to the channels that heard it fire before the incident opened, and only to those, when it resolves during the incident', async () => {
    // The console printed sites 1-4 at once; Slack waited (group_wait) and had them taken back.
    const slack = await fakeSlack();
    const w = await startWorld({ sim: { sites: 8 } });
    cleanups.push(() => w.close(), () => slack.close());
    const printed: string[] = [];
    const app = await w.app(
      {
        channels: [
          { name: 'log', type: 'console' },
          { name: 'ops', type: 'slack', url: slack.url },
        ],
        routes: [
          { channels: ['log'], group_wait: '0s', continue: true },
          { channels: ['ops'], group_wait: '10m' },
        ],
      },
      { consoleWrite: (l) => void printed.push(l) },
    );
    // As the daemon runs: a cycle, then what is due (runOnce would also flush the groups' waits).
    const cycle = async (): Promise<void> => {
      await app.scheduler.runAll();
      await app.worker.deliverDue();
    };
    await cycle();
    for (let id = 1; id <= 4; id++) {
      w.sim.world.setHealth(id, { status: 'offline' });
      await cycle();
    }
    expect(slack.posts).toHaveLength(0);
    const siteOffline = (status: string): string[] => printed.filter((l) => /^\S+ site\.offline\s/.test(l) && l.includes(status));
    expect(siteOffline('FIRING')).toHaveLength(4);
    for (let id = 5; id <= 8; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await cycle();
    expect(names(w.events)).toContain('platform.incident:firing');
    for (let id = 1; id <= 8; id++) w.sim.world.setHealth(id, { status: 'online' });
    await app.runOnce();
    expect(names(w.events)).toContain('platform.incident:resolved');
    // Before: sites 1-4 stayed down on the console for good (their resolutions were dropped).
    const resolved = siteOffline('resolved');
    expect(resolved.map((l) => /\[sites\/(\d+)\//.exec(l)?.[1])).toEqual(['1', '2', '3', '4']);
    // Slack heard none of the per-site alerts: it gets none of their resolutions.
    expect(slack.posts.map((p) => p.body).join('\n')).not.toMatch(/back online/);
    const outcomes = await w.query("SELECT status, held_outcome, count(*) n FROM events WHERE held_by = 'incident:site.offline' GROUP BY status, held_outcome ORDER BY status, held_outcome");
    expect(outcomes).toEqual([
      { status: 'firing', held_outcome: 'dropped', n: 8 },
      { status: 'resolved', held_outcome: 'dropped', n: 4 },
      { status: 'resolved', held_outcome: 'released', n: 4 },
    ]);
  });

  it('with per-client routes the incident does not reach, each client channel still gets its sites\' alerts, and the channel the incident reaches gets only the incident', async () => {
    const { w, smtp, hook, channels } = await outageWorld(12);
    const [c0, c1] = await Promise.all([fakeSlack(), fakeSlack()]);
    cleanups.push(() => c0.close(), () => c1.close());
    const app = await w.app({
      channels: [...channels.filter((c) => c['name'] !== 'ops'), { name: 'slack-c0', type: 'slack', url: c0.url }, { name: 'slack-c1', type: 'slack', url: c1.url }],
      site_labels: [
        { match: 'int(id) % 2 == 0', labels: { client: 'c0' } },
        { match: 'int(id) % 2 == 1', labels: { client: 'c1' } },
      ],
      routes: [
        { channels: ['hooks'], continue: true },
        { match: "labels.client == 'c0'", channels: ['slack-c0'], group_by: ['labels.client', 'name'] },
        { match: "labels.client == 'c1'", channels: ['slack-c1'], group_by: ['labels.client', 'name'] },
        // Events without a client (the incident among them) go to the on-call mailbox.
        { channels: ['oncall'] },
      ],
    });
    await outage(w, app, 12);

    const got = hooked(hook);
    expect(count(got, 'site.offline:firing')).toBe(12);
    expect(count(got, 'platform.incident:firing')).toBe(1);
    // The incident reaches no client channel: each still hears about its own six sites, in one message.
    for (const [slack, parity] of [[c0, 0], [c1, 1]] as const) {
      expect(slack.posts).toHaveLength(1);
      for (let id = 1; id <= 12; id++) {
        const domain = w.sim.world.getSite(id)!.domain;
        if (id % 2 === parity) expect(slack.posts[0]!.body).toContain(domain);
        else expect(slack.posts[0]!.body).not.toContain(domain);
      }
      expect(slack.posts[0]!.body).not.toContain('Platform incident');
    }
    // The mailbox the incident reaches gets it, and no per-site alert (no route sends it those).
    const incident = hook.accepted().map((r) => r.event!).find((e) => e.data.name === 'platform.incident')!;
    expect(mailIds(smtp)).toEqual([[incident.id]]);
    // Nothing is held: no channel that takes the per-site alerts would hear of the incident.
    const [held] = await w.query<{ n: number }>('SELECT count(*) n FROM events WHERE held_by IS NOT NULL');
    expect(held!.n).toBe(0);
  });

  it('holds the per-site alerts only from the human channels the incident reaches', async () => {
    const { w, slack, smtp, hook, channels } = await outageWorld(8);
    const app = await w.app({
      channels,
      routes: [
        { channels: ['hooks'], continue: true },
        // Slack takes every alert and the incident; the mailbox only the per-site alerts.
        { channels: ['ops'], continue: true },
        { match: "name != 'platform.incident'", channels: ['oncall'] },
      ],
    });
    await outage(w, app, 8);

    expect(count(hooked(hook), 'site.offline:firing')).toBe(8);
    expect(slack.posts).toHaveLength(1);
    expect(slack.posts[0]!.body).toContain('Platform incident: site.offline on 8 sites');
    expect(slack.posts[0]!.body).not.toContain('is offline');
    // The mailbox never gets the incident, so it gets the eight sites (one grouped message).
    expect(mailIds(smtp)).toHaveLength(1);
    expect(mailIds(smtp)[0]).toHaveLength(8);
    const [held] = await w.query<{ n: number }>("SELECT count(*) n FROM events WHERE held_by = 'incident:site.offline'");
    expect(held!.n).toBe(8);
  });

  it('below the threshold nothing is held: four sites offline page four times', async () => {
    const { w, slack, hook, channels } = await outageWorld(6);
    const app = await w.app({ channels, routes: [{ channels: ['ops', 'hooks'], group_by: ['site_id'] }] });
    await app.runOnce();
    for (let id = 1; id <= 4; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await app.runOnce();
    expect(count(hooked(hook), 'platform.incident:firing')).toBe(0);
    expect(slack.posts).toHaveLength(4);
  });

  it('min_sites can be a share of the watched sites, and incidents can be turned off', async () => {
    const { w, slack, hook, channels } = await outageWorld(10);
    const app = await w.app({ channels, incidents: { min_sites: '30%' } });
    await app.runOnce();
    for (let id = 1; id <= 3; id++) w.sim.world.setHealth(id, { status: 'offline' });
    await app.runOnce();
    expect(count(hooked(hook), 'platform.incident:firing')).toBe(1);
    expect(hook.accepted().map((r) => r.event!).find((e) => e.data.name === 'platform.incident')!.data['threshold']).toBe(3);
    expect(slack.posts).toHaveLength(1);

    const off = await outageWorld(10);
    const app2 = await off.w.app({ channels: off.channels, incidents: { enabled: false } });
    await app2.runOnce();
    for (let id = 1; id <= 6; id++) off.w.sim.world.setHealth(id, { status: 'offline' });
    await app2.runOnce();
    expect(count(hooked(off.hook), 'platform.incident:firing')).toBe(0);
    expect(count(hooked(off.hook), 'site.offline:firing')).toBe(6);
  });
});

describe('the incident state machine (pure)', () => {
  const cfg = { window_ms: 15 * 60_000, wait_ms: 30_000 };
  const sites = (n: number, since = 0): Array<{ site_id: number; since: number; event_id: string }> =>
    Array.from({ length: n }, (_, i) => ({ site_id: i + 1, since, event_id: `e${i}` }));

  it('opens at the N-th site within the window, not for sites that started firing long before', () => {
    expect(stepIncident(undefined, sites(4), 1_000, 5, cfg, false)).toBeNull();
    expect(stepIncident(undefined, sites(5), 1_000, 5, cfg, false)).toBe('open');
    // Five sites firing for an hour already: no incident now (they did not fire together).
    expect(stepIncident(undefined, sites(5, 0), 60 * 60_000, 5, cfg, false)).toBeNull();
  });

  it('an open incident fires at a batch boundary or after wait, and is cancelled if it is below N at a boundary', () => {
    const open = { status: 'resolved' as const, pending_since: 1_000 };
    expect(stepIncident(open, sites(6), 2_000, 5, cfg, false)).toBeNull();
    expect(stepIncident(open, sites(6), 2_000, 5, cfg, true)).toBe('fire');
    expect(stepIncident(open, sites(6), 31_000, 5, cfg, false)).toBe('fire');
    expect(stepIncident(open, sites(4), 2_000, 5, cfg, true)).toBe('cancel');
    // Mid-cycle the count is not whole: no cancelling, no firing below N.
    expect(stepIncident(open, sites(4), 60_000, 5, cfg, false)).toBeNull();
  });

  it('a fired incident resolves below N at a boundary of its source, whatever the window; never mid-cycle', () => {
    const fired = { status: 'firing' as const, pending_since: null };
    expect(stepIncident(fired, sites(5, 0), 10 * 60 * 60_000, 5, cfg, true)).toBeNull();
    expect(stepIncident(fired, sites(4), 1_000, 5, cfg, false)).toBeNull();
    expect(stepIncident(fired, sites(4), 1_000, 5, cfg, true)).toBe('resolve');
  });

  it('the threshold is a count, or a share of the watched sites of at least 2', () => {
    expect(incidentThreshold({ min_sites: { count: 5 } }, 1000)).toBe(5);
    expect(incidentThreshold({ min_sites: { percent: 20 } }, 1000)).toBe(200);
    expect(incidentThreshold({ min_sites: { percent: 20 } }, 12)).toBe(3);
    expect(incidentThreshold({ min_sites: { percent: 20 } }, 3)).toBe(2);
  });
});

describe('machine and human channels', () => {
  it('are told apart in one place: webhooks are machine channels, every other type (chat, paging, e-mail, console) is human', () => {
    expect([...MACHINE_CHANNEL_TYPES]).toEqual(['webhook']);
    for (const t of ['email', 'slack', 'console', 'teams', 'discord', 'pagerduty', 'opsgenie', 'telegram', 'ntfy']) expect(isHumanChannel(t)).toBe(true);
    expect(isHumanChannel('webhook')).toBe(false);
  });

  it('while an incident is open, a covered per-site alert is queued for machine channels and held for human ones; others pass', () => {
    const config = configFrom(
      `api: { base_url: https://x.example, key: k }
channels:
  - { name: hooks, type: webhook, url: https://h.example/hook, secret: ${TEST_SECRET} }
  - { name: ops, type: slack, url: https://hooks.slack.com/services/T/B/C }
`,
      {},
      '/tmp',
    );
    const d = new Dispatcher(config);
    const view = (incidents: string[]): DispatchView => ({
      now: 1_000,
      silences: [],
      inhibitions: () => [],
      group: () => ({ pendingDue: null, lastSent: null }),
      incidents: () => new Set(incidents),
    });
    const offline = siteEvent('a', 3, { name: 'site.offline', status: 'firing' });
    expect(d.decide(offline, view(['site.offline']))).toEqual({ action: 'queue', deliveries: [{ channel: 'hooks', groupKey: null, dueAt: 1_000 }], heldBy: 'incident:site.offline' });
    // Another alert, a change event, and the same alert once the incident is being released: not held.
    const slow = siteEvent('b', 3, { name: 'site.slow', status: 'firing' });
    const change = siteEvent('c', 3, { name: 'site.offline' });
    for (const [e, opts] of [[slow, {}], [change, {}], [offline, { skipIncident: 'site.offline' }]] as const) {
      const r = d.decide(e, view(['site.offline']), opts);
      expect(r).toMatchObject({ action: 'queue' });
      expect(r).not.toHaveProperty('heldBy');
      expect((r as { deliveries: unknown[] }).deliveries).toHaveLength(2);
    }
  });
});
