/**
 * The Slack channel through @slack/webhook against a real loopback HTTP server standing in
 * for hooks.slack.com: escaping (injection strings show literally), Block Kit limits,
 * pacing, 429 Retry-After, Slack's named permanent errors and the request timeout.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import type { App } from '../src/main.js';
import { SLACK_MAX_BLOCKS, SLACK_SECTION_MAX, slackMessage } from '../src/notify/channels/slack.js';
import { testClock, type TestClock } from './clock.js';
import { siteEvent } from './events-fixture.js';
import { fakeSlack, slackTexts as texts, type FakeSlack, type SlackReply as Reply } from './fakes/slack.js';
import { startWorld, type World, rows } from './harness.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

async function setup(
  reply?: (n: number) => Reply,
  opts: { route?: Record<string, unknown>; timeout?: string } = {},
): Promise<{ w: World; app: App; slack: FakeSlack; clock: TestClock; sleeps: number[] }> {
  const slack = await fakeSlack(reply);
  const w = await startWorld();
  cleanups.push(() => w.close(), () => slack.close());
  const clock = testClock();
  const sleeps: number[] = [];
  const app = await w.app(
    {
      channels: [
        { name: 'ops', type: 'slack', url: slack.url, timeout: opts.timeout ?? '5s' },
        { name: 'log', type: 'console' },
      ],
      routes: [{ channels: ['ops', 'log'], group_wait: '0s', ...opts.route }],
      delivery: { retry_schedule: ['5s', '5m'] },
    },
    { now: clock.now, sleep: async (ms) => void sleeps.push(ms), consoleWrite: () => undefined },
  );
  return { w, app, slack, clock, sleeps };
}

describe('the Slack channel', () => {
  it('shows <!channel>, <http://x|y> and <@U123> from a review text literally: escaped, so they ping and link nobody', async () => {
    const { app, slack } = await setup();
    const review = 'Terrible! <!channel> <!here> go to <http://evil.example|your bank> & tell <@U123>';
    await app.notifier.publish(siteEvent('r', 4, { name: 'reputation.poor_review', summary: review, domain: '<!everyone>.example' }));
    expect(await app.worker.drain(5_000)).toBe(0);
    expect(slack.posts).toHaveLength(1);
    const post = slack.posts[0]!;
    const escaped = 'Terrible! &lt;!channel&gt; &lt;!here&gt; go to &lt;http://evil.example|your bank&gt; &amp; tell &lt;@U123&gt;';
    expect(post.json.blocks.some((b) => b.text?.text.includes(escaped))).toBe(true);
    expect(post.json.blocks.some((b) => b.text?.text.includes('&lt;!everyone&gt;.example'))).toBe(true);
    for (const t of texts(post)) {
      // Slack's control sequences start with "<"; none of the untrusted text may produce one.
      expect(t).not.toMatch(/<[!@#]|<http/);
    }
    expect(post.json.text).toContain('&lt;!channel&gt;');
    expect(post.json.blocks[1]!.text!.type).toBe('mrkdwn');
  });

  it('keeps within Slack\'s limits: at most 50 blocks, each section at most 3000 characters, and says how many events were left out', () => {
    const long = `${'x'.repeat(2_990)}&&&& <!channel> ${'y'.repeat(5_000)}`;
    const events: HostwatchEvent[] = Array.from({ length: 120 }, (_, i) => siteEvent(`l${i}`, i + 1, { summary: i === 0 ? long : `event ${i}` }));
    const m = slackMessage(events);
    expect(m.blocks.length).toBeLessThanOrEqual(SLACK_MAX_BLOCKS);
    expect(m.blocks).toHaveLength(SLACK_MAX_BLOCKS);
    for (const b of m.blocks) if (b.type === 'section') expect(b.text.text.length).toBeLessThanOrEqual(SLACK_SECTION_MAX);
    const first = m.blocks[1]!;
    expect(first.type === 'section' && first.text.text).toMatch(/x…\n_/);
    // The cut never leaves half an entity behind.
    expect(first.type === 'section' && /&[a-z]*…/.test(first.text.text)).toBe(false);
    const last = m.blocks.at(-1)!;
    expect(last.type === 'context' && last.elements[0]!.text).toBe('…and 72 more events (hostwatch events lists them all)');
    expect(m.text.length).toBeLessThanOrEqual(SLACK_SECTION_MAX);
    // 49 events fit without a "more" line.
    expect(slackMessage(events.slice(0, 49)).blocks).toHaveLength(50);
  });

  it('keeps a section within 3000 characters when the domain or subject itself is huge, and never ends on half an emoji', () => {
    const huge = siteEvent('h1', 1, { domain: `${'d'.repeat(4_000)}.example`, summary: `${'s'.repeat(2_998)}😀 tail` });
    const m = slackMessage([huge, { ...huge, id: 'h2', subject: `sites/1/files/${'p'.repeat(5_000)}`, data: { ...huge.data, domain: null } }]);
    for (const b of m.blocks) {
      if (b.type !== 'section') continue;
      expect(b.text.text.length).toBeLessThanOrEqual(SLACK_SECTION_MAX);
      expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(b.text.text)).toBe(false);
    }
  });

  it('sends one message per group, paced to one a second per webhook', async () => {
    const { app, slack, sleeps } = await setup(undefined, { route: { group_by: ['site_id'] } });
    for (let site = 1; site <= 3; site++) for (let i = 0; i < 3; i++) await app.notifier.publish(siteEvent(`p${site}-${i}`, site));
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(3);
    for (const p of slack.posts) expect(p.json.blocks.filter((b) => b.type === 'section')).toHaveLength(4); // heading + 3 events
    // The test clock stands still, so each message after the first waits a full second.
    expect(sleeps).toEqual([1_000, 1_000]);
  });

  it('honours a 429\'s Retry-After: the retry waits for it, then the message goes', async () => {
    const { w, app, slack, clock } = await setup((n) => (n === 1 ? { status: 429, body: 'rate_limited', headers: { 'retry-after': '120' } } : { status: 200, body: 'ok' }));
    await app.notifier.publish(siteEvent('rl', 1));
    await app.worker.deliverDue();
    const [row] = rows<{ state: string; next_attempt_at: number; last_error: string }>(w, "SELECT state, next_attempt_at, last_error FROM outbox WHERE channel = 'ops'");
    expect(row).toMatchObject({ state: 'pending', last_error: 'Slack HTTP 429: rate_limited' });
    expect(row!.next_attempt_at).toBe(clock.t + 120_000);
    clock.advance(119_000);
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(1);
    clock.advance(1_000);
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(2);
    expect(rows<{ state: string }>(w, "SELECT state FROM outbox WHERE channel = 'ops'")).toEqual([{ state: 'delivered' }]);
  });

  it('stores an error answer on one line, as every channel does: its line breaks and terminal escapes cannot forge a row of hostwatch deliveries', async () => {
    const { w, app } = await setup(() => ({ status: 500, body: 'boom\u001b[31mESC\r\n2026-11-21T00:00:00Z  delivered  ops\u0007' }));
    await app.notifier.publish(siteEvent('forged', 1));
    await app.worker.deliverDue();
    expect(rows(w, "SELECT last_error FROM outbox WHERE channel = 'ops'")).toEqual([{ last_error: 'Slack HTTP 500: boom [31mESC 2026-11-21T00:00:00Z  delivered  ops' }]);
  });

  it('a named permanent error (channel_is_archived) marks the channel misconfigured: disabled, an operator event, no more requests', async () => {
    const { w, app, slack } = await setup(() => ({ status: 410, body: 'channel_is_archived' }));
    await app.notifier.publish(siteEvent('arch', 1));
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(1);
    const state = rows<{ channel: string; disabled_reason: string }>(w, 'SELECT channel, disabled_reason FROM channel_state WHERE disabled_at IS NOT NULL');
    expect(state).toEqual([{ channel: 'ops', disabled_reason: 'Slack: channel_is_archived (the webhook or its channel is misconfigured)' }]);
    const op = rows<{ body: string }>(w, "SELECT body FROM events WHERE type = 'hostwatch.channel.disabled'");
    expect(op).toHaveLength(1);
    const e = JSON.parse(op[0]!.body) as HostwatchEvent;
    expect(e.data).toMatchObject({ name: 'channel.disabled', severity: 'critical', channel: 'ops', summary: 'channel ops is disabled: Slack: channel_is_archived (the webhook or its channel is misconfigured)' });
    expect(e.subject).toBe('channels/ops');
    // The operator event reached the working channel; nothing more is posted to Slack.
    await app.notifier.publish(siteEvent('after', 2));
    await app.worker.drain(2_000);
    expect(slack.posts).toHaveLength(1);
    const ops = rows<{ state: string; last_error: string }>(w, "SELECT state, last_error FROM outbox WHERE channel = 'ops' ORDER BY id");
    // The first event and the one after; the channel.disabled about ops went to the others only.
    expect(ops.map((o) => o.state)).toEqual(['dead', 'dead']);
    expect(ops[1]!.last_error).toBe('permanent failure: channel disabled: Slack: channel_is_archived (the webhook or its channel is misconfigured)');
    expect(rows<{ state: string }>(w, "SELECT state FROM outbox WHERE channel = 'log'").map((r) => r.state)).toEqual(['delivered', 'delivered', 'delivered']);
  });

  it('sends a group once: a row its group\'s message took is not sent again by a later attempt of the same pass', async () => {
    const slack = await fakeSlack();
    const w = await startWorld();
    cleanups.push(() => w.close(), () => slack.close());
    // One attempt at a time: the group's message is sent and recorded before the pass reaches
    // the group's other rows, which it read before that message took them.
    const app = await w.app(
      { channels: [{ name: 'ops', type: 'slack', url: slack.url }], routes: [{ channels: ['ops'], group_wait: '0s' }], delivery: { concurrency: 1 } },
      { consoleWrite: () => undefined },
    );
    for (let i = 0; i < 3; i++) await app.notifier.publish(siteEvent(`once-${i}`, 1));
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(1);
    expect(rows<{ state: string; attempts: number }>(w, "SELECT state, attempts FROM outbox WHERE channel = 'ops'")).toEqual(
      Array.from({ length: 3 }, () => ({ state: 'delivered', attempts: 1 })),
    );
  });

  it('gives up on a request after the channel\'s timeout and retries later', async () => {
    const { w, app, slack } = await setup(() => 'hold', { timeout: '300ms' });
    await app.notifier.publish(siteEvent('slow', 1));
    await app.worker.deliverDue();
    expect(slack.posts).toHaveLength(1);
    expect(rows<{ state: string; last_error: string }>(w, "SELECT state, last_error FROM outbox WHERE channel = 'ops'")).toEqual([
      { state: 'pending', last_error: 'Slack: timed out' },
    ]);
  });
});
