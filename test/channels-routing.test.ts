/**
 * Grouping, digests, silences, maintenance windows and inhibition apply to the new
 * channels as to Slack and e-mail: chat channels (here Telegram and ntfy) send a group as
 * one message after group_wait and hold info events for their digest; pagers (PagerDuty)
 * take each event at once, one incident per alert; held events reach neither.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SilencesRepo } from '../src/store/silences-repo.js';
import { testClock } from './clock.js';
import { siteEvent } from './events-fixture.js';
import { fakeNtfy } from './fakes/ntfy.js';
import { fakePagerDuty } from './fakes/pagerduty.js';
import { fakeTelegram } from './fakes/telegram.js';
import { startWorld } from './harness.js';

const PD_KEY = 'PDROUT1NGK3Y0123456789ABCDEFGHJK';
const CHAT = -1007007007;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function setup(extra: Record<string, unknown> = {}, start = '2026-11-21T10:00:00Z') {
  const [tg, pd, ntfy] = await Promise.all([fakeTelegram([CHAT]), fakePagerDuty(PD_KEY), fakeNtfy({ token: null })]);
  const w = await startWorld();
  cleanups.push(() => w.close(), () => tg.close(), () => pd.close(), () => ntfy.close());
  const clock = testClock(start);
  const app = await w.app(
    {
      channels: [
        { name: 'chat', type: 'telegram', bot_token: tg.token, chat_id: CHAT, api_url: tg.url },
        { name: 'pager', type: 'pagerduty', routing_key: PD_KEY, api_url: pd.url },
        { name: 'push', type: 'ntfy', url: ntfy.url, digest: 'daily at 08:00 Europe/Paris' },
      ],
      routes: [{ channels: ['chat', 'pager', 'push'], group_by: ['site_id'], group_wait: '30s' }],
      ...extra,
    },
    { now: clock.now, sleep: async () => undefined },
  );
  return { w, app, clock, tg, pd, ntfy };
}

/** The sites of the events each message named (each event shows "(site N)" once, as its place). */
const sites = (text: string) => [...text.matchAll(/\(site (\d)\)/g)].map((x) => Number(x[1]));
const sentTo = (tg: Awaited<ReturnType<typeof fakeTelegram>>) => tg.shown.map((m) => sites(m.text));

describe('the new channels behind routing', () => {
  it('group per route and group_by after group_wait in chat channels, while a pager takes each event at once', async () => {
    const { app, clock, tg, pd } = await setup();
    await app.notifier.publish(siteEvent('a', 1));
    await app.notifier.publish(siteEvent('b', 1));
    await app.notifier.publish(siteEvent('c', 2));
    await app.worker.deliverDue();
    expect(pd.accepted()).toHaveLength(3);
    expect(tg.arrivals).toHaveLength(0);
    clock.advance(30_000);
    await app.worker.deliverDue();
    expect(sentTo(tg)).toEqual([[1, 1], [2]]);
  });

  it('hold info events for the channel\'s daily digest and send warnings at once', async () => {
    const { app, clock, ntfy } = await setup({}, '2026-11-21T05:00:00Z'); // 06:00 in Paris
    await app.notifier.publish(siteEvent('i1', 1, { severity: 'info', name: 'report.created' }));
    await app.notifier.publish(siteEvent('i2', 2, { severity: 'info', name: 'report.created' }));
    await app.notifier.publish(siteEvent('w1', 3, { severity: 'warning' }));
    clock.advance(30_000);
    await app.worker.deliverDue();
    expect(ntfy.accepted().map((a) => sites((a.json as { message: string }).message))).toEqual([[3]]);
    clock.t = Date.parse('2026-11-21T07:00:00Z'); // 08:00 in Paris
    await app.worker.deliverDue();
    expect(ntfy.accepted()).toHaveLength(2);
    expect(sites((ntfy.accepted()[1]!.json as { message: string }).message)).toEqual([1, 2]);
  });

  it('send nothing that a silence or a maintenance window covers', async () => {
    const { w, app, clock, tg, pd, ntfy } = await setup({ maintenance: [{ name: 'upgrades', schedule: '0 10 * * *', duration: '1h', sites: [2] }] });
    await new SilencesRepo(app.store).add({ id: 's1', match: 'site_id == 3', starts_at: clock.t, ends_at: clock.t + 3_600_000, comment: 'known', created_by: 'ops', created_at: clock.t, expired_at: null });
    for (const site of [1, 2, 3]) await app.notifier.publish(siteEvent(`e${site}`, site));
    clock.advance(30_000);
    await app.worker.deliverDue();
    expect(sentTo(tg)).toEqual([[1]]);
    expect(pd.accepted()).toHaveLength(1);
    expect(ntfy.accepted()).toHaveLength(1);
  });

  it('hold a site\'s other alerts while site.offline fires for it, and release them when it resolves', async () => {
    const { app, clock, tg, pd } = await setup();
    const offline = (status: 'firing' | 'resolved') => {
      const e = siteEvent(`off-${status}`, 4, { name: 'site.offline', rule: 'site-offline', severity: 'critical', status, subject: 'sites/4/health' });
      e.data['alert_id'] = 'offline-4-firing-1';
      return e;
    };
    await app.notifier.publish(offline('firing'));
    // An alert of the same site is held (a change would pass at once: it may be the cause).
    await app.notifier.publish(siteEvent('held', 4, { name: 'usage.disk_high', rule: 'usage-disk-high', status: 'firing', subject: 'sites/4/usage' }));
    clock.advance(30_000);
    await app.worker.deliverDue();
    expect(pd.accepted().map((a) => (a.json as { event_action: string; dedup_key: string }).event_action)).toEqual(['trigger']);
    expect(tg.shown.map((m) => m.text.includes('usage.disk_high'))).toEqual([false]);
    await app.notifier.publish(offline('resolved'));
    clock.advance(5 * 60_000);
    await app.worker.deliverDue();
    expect(pd.accepted().map((a) => (a.json as { event_action: string }).event_action)).toEqual(['trigger', 'resolve', 'trigger']);
    expect(pd.alerts.map((x) => [x.dedupKey, x.status])).toEqual([
      ['offline-4-firing-1', 'resolved'],
      [expect.any(String), 'triggered'],
    ]);
    expect(tg.shown.some((m) => m.text.includes('usage.disk_high'))).toBe(true);
  });
});
