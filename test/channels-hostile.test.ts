/**
 * A hostile review goes through every channel at once: mentions (@everyone, <@id>,
 * <!channel>), Markdown and HTML, links written every way, Adaptive Card and Liquid
 * syntax, control characters and bidi overrides. Each channel must show the text as it was
 * written (after line breaks and control characters became spaces) and give none of it a
 * meaning: no ping, no link, no formatting, no markup (invariant 6).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { formatEventLine } from '../src/notify/channels/console.js';
import { opsgenieAlert } from '../src/notify/channels/opsgenie.js';
import { pagerDutyEvent } from '../src/notify/channels/pagerduty.js';
import { oneLine, subjectOf, terminalJson, terminalLine } from '../src/notify/channels/render.js';
import { siteEvent } from './events-fixture.js';
import { discordShown, fakeDiscord, liveDiscordMarkup, type FakeDiscord } from './fakes/discord.js';
import { fakeNtfy, type FakeNtfy } from './fakes/ntfy.js';
import { fakeOpsgenie, type FakeOpsgenie } from './fakes/opsgenie.js';
import { fakePagerDuty, type FakePagerDuty } from './fakes/pagerduty.js';
import { fakeSlack, slackTexts, type FakeSlack } from './fakes/slack.js';
import { cardTexts, fakeTeams, type FakeTeams } from './fakes/teams.js';
import { fakeTelegram, type FakeTelegram } from './fakes/telegram.js';
import { everyChannel, providerChannels } from './fakes/world.js';
import { startWorld, type World } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';
import { startSmtp, type SmtpReceiver } from './smtp.js';

/** What a hostile reviewer (or a hostile DNS value, or firewall rule name) can put in API text. */
const HOSTILE = [
  'Awful! @everyone @here <@123456789012345678> <@&987654321> <#555> <!channel> <!here> <!subteam^S1>',
  '**bold** __under__ ~~gone~~ `code` ||spoiler|| # Heading > quote - item 1. item',
  '[your bank](http://evil.example/login) <http://evil.example|your bank> http://evil.example/x',
  '<b>bold</b> <a href="http://evil.example">bank</a> <script>alert(1)</script> &amp; &lt; & < > " \'',
  '{{DATE(2017-02-14T06:00:00Z, SHORT)}} {% raw %} ${HOME} %s /start @BotFather #hashtag',
  'line\nbreak\r\n\u0000\u001b[31mred\u001b[0m \u202Eright-to-left\u202C end',
].join(' ');
const DOMAIN = '<@&1>.evil.example';
/** What every channel must show: the text with line breaks and control characters as spaces. */
const LITERAL = oneLine(HOSTILE);

const PD_KEY = 'PDK3Y0123456789ABCDEFGHJKMNPQRST';
const OG_KEY = 'og-key-1234-5678';
const CHAT = -1009876543210;

let w: World;
let event: HostwatchEvent;
let hook: Receiver;
let slack: FakeSlack;
let smtp: SmtpReceiver;
let teams: FakeTeams;
let discord: FakeDiscord;
let pd: FakePagerDuty;
let og: FakeOpsgenie;
let tg: FakeTelegram;
let ntfy: FakeNtfy;
const consoleLines: string[] = [];

beforeAll(async () => {
  [hook, slack, smtp, teams, discord, pd, og, tg, ntfy] = await Promise.all([
    startReceiver(),
    fakeSlack(),
    startSmtp(),
    fakeTeams(),
    fakeDiscord(),
    fakePagerDuty(PD_KEY),
    fakeOpsgenie(OG_KEY),
    fakeTelegram([CHAT]),
    fakeNtfy(),
  ]);
  w = await startWorld();
  const channels = [
    { name: 'hook', type: 'webhook', url: hook.url, secret: TEST_SECRET },
    { name: 'slack', type: 'slack', url: slack.url },
    { name: 'mail', type: 'email', to: ['ops@example.net'], from: 'hostwatch@example.net', smtp: { host: '127.0.0.1', port: smtp.port } },
    ...providerChannels({ teams, discord, pd, og, tg, ntfy, pdKey: PD_KEY, ogKey: OG_KEY, chat: CHAT }),
    { name: 'console', type: 'console' },
  ];
  const app = await w.app(
    { channels, routes: everyChannel(channels) },
    { consoleWrite: (l) => void consoleLines.push(l) },
  );
  event = siteEvent('hostile', 7, { name: 'reputation.poor_review', severity: 'warning', summary: HOSTILE, domain: DOMAIN });
  await app.notifier.publish(event);
  expect(await app.worker.drain(10_000)).toBe(0);
});

afterAll(async () => {
  await w?.close();
  await Promise.allSettled([hook, slack, smtp, teams, discord, pd, og, tg, ntfy].map((x) => x?.close()));
});

describe('a hostile review', () => {
  it('loses its line breaks, control characters and bidi overrides, and nothing else', () => {
    expect(LITERAL).not.toMatch(/[\u0000-\u001f\u202a-\u202e\u2066-\u2069]/);
    expect(LITERAL).toContain('line break');
    expect(LITERAL).toMatch(/\[0m +right-to-left +end$/);
  });

  it('reaches every channel, and every provider takes the request', () => {
    expect(hook.accepted()).toHaveLength(1);
    expect(slack.posts).toHaveLength(1);
    expect(smtp.messages).toHaveLength(1);
    expect(consoleLines).toHaveLength(1);
    for (const fake of [teams, discord, pd, og, tg, ntfy]) {
      expect(fake.arrivals.map((a) => a.problems)).toEqual([[]]);
      expect(fake.accepted()).toHaveLength(1);
    }
  });

  it('webhook: the event carries the text byte for byte (receivers escape for their own medium)', () => {
    expect(hook.requests[0]!.event!.data.summary).toBe(HOSTILE);
  });

  it('Slack: escaped, so <!channel>, <@id> and <http://…|…> ping and link nobody', () => {
    const texts = slackTexts(slack.posts[0]!);
    const shown = texts.map((t) => t.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')).join('\n');
    expect(shown).toContain(LITERAL);
    for (const t of texts) expect(t).not.toMatch(/<[!@#]|<http/);
  });

  it('e-mail: the HTML part shows the text and contains none of its tags', () => {
    const html = String(smtp.messages[0]!.html);
    const shown = html.replace(/<[^>]+>/g, '').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');
    expect(shown).toContain(LITERAL);
    expect(html).not.toMatch(/<script|<a |<b>bold/);
  });

  it('Teams: every text is a TextRun (no Markdown there), and {{DATE(…)}} cannot be rewritten by the card', () => {
    const texts = cardTexts(teams.arrivals[0]!);
    expect(texts.filter((t) => t.markdown)).toEqual([]);
    const shown = texts.map((t) => t.text).join('\n');
    expect(shown.replace(/\u200B/g, '')).toContain(LITERAL);
    expect(shown.replace(/\u200B/g, '')).toContain(DOMAIN);
    expect(shown).not.toContain('{{');
  });

  it('Discord: no mention is allowed, and every Markdown, mention and link character is escaped', () => {
    const body = discord.arrivals[0]!.json as { content: string; embeds: Array<{ title: string; description: string }>; allowed_mentions: { parse: string[] } };
    expect(body.allowed_mentions).toEqual({ parse: [] });
    const api = body.embeds.map((e) => e.description);
    expect(discordShown(api.join('\n'))).toContain(LITERAL);
    expect(discordShown(api.join('\n'))).toContain(DOMAIN);
    for (const t of [body.content, ...api, ...body.embeds.map((e) => e.title)]) expect(liveDiscordMarkup(t.replace(/^\*\*hostwatch\*\*/, ''))).toEqual([]);
  });

  it('Telegram: the HTML parses into exactly our bold and italic, the text shows as written, and @names and /commands are not live', () => {
    const [msg] = tg.shown;
    expect(msg!.entities.map((e) => e.type).sort()).toEqual(['bold', 'bold', 'italic']);
    expect(msg!.text.replace(/\u2060/g, '')).toContain(LITERAL);
    expect(msg!.text).not.toMatch(/@[A-Za-z]/);
    expect(msg!.text).not.toMatch(/(^|\s)\/[a-z]/);
    const sent = tg.arrivals[0]!.json as { parse_mode: string; link_preview_options: unknown };
    expect(sent.parse_mode).toBe('HTML');
    expect(sent.link_preview_options).toEqual({ is_disabled: true });
  });

  it('ntfy: plain text (markdown off), shown as written', () => {
    const body = ntfy.arrivals[0]!.json as { message: string; markdown: boolean };
    expect(body.markdown).toBe(false);
    expect(body.message).toContain(LITERAL);
  });

  it('PagerDuty and Opsgenie: plain-text fields hold the text as written', () => {
    const trigger = pd.arrivals[0]!.json as { payload: { summary: string; source: string } };
    expect(trigger.payload.summary).toBe(LITERAL);
    expect(trigger.payload.source).toBe(DOMAIN);
    const alert = og.arrivals[0]!.json as { message: string; description: string };
    expect(LITERAL.startsWith(alert.message.replace(/…$/, ''))).toBe(true);
    expect(alert.description).toContain(LITERAL);
  });

  it('console: control characters cannot rewrite the terminal, nor bidi overrides reorder the line', () => {
    expect(consoleLines[0]).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(consoleLines[0]).toContain(LITERAL);
    expect(consoleLines[0]).toContain('**bold**');
  });
});

describe('API text in a subject or a domain', () => {
  // A review's URL becomes part of its subject; a site's domain comes from the API as well.
  const forged = '\u001b]0;TITLE\u0007\u001b[2J\r\n2026-11-28T00:00:00Z  🟢 site.offline resolved\u202e';
  const e = siteEvent('subject', 4, { name: 'reputation.poor_review', subject: `reputation/businesses/1/reviews/https://r.test/${forged}`, domain: `site4.example.com${forged}` });
  const unsafe = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

  it('is one line with no terminal escapes where the CLI and the console channel print it (hostwatch events, deliveries, explain, silence list)', () => {
    expect(formatEventLine(e)).not.toMatch(unsafe);
    expect(formatEventLine(e)).toContain('[reputation/businesses/1/reviews/https://r.test/ ]0;TITLE [2J 2026-11-28T00:00:00Z  🟢 site.offline resolved]');
    // A whole printed row keeps its own spacing; JSON output keeps the value, escaped.
    expect(terminalLine(`a  ${forged}  b`)).toBe('a   ]0;TITLE  [2J  2026-11-28T00:00:00Z  🟢 site.offline resolved   b');
    const json = terminalJson(JSON.stringify({ subject: e.subject }));
    expect(json).not.toMatch(unsafe);
    expect((JSON.parse(json) as { subject: string }).subject).toBe(e.subject);
  });

  it('is one line in what PagerDuty and Opsgenie show: source, component, entity, details and description', () => {
    const pdBody = JSON.stringify(pagerDutyEvent(e, PD_KEY));
    const ogBody = JSON.stringify(opsgenieAlert(e));
    for (const body of [pdBody, ogBody]) expect(body.replace(/\\n/g, ' '), body).not.toMatch(/\\u00(0|1)[0-9a-f]|\\r|\\u202e|\u202e/i);
    expect(pagerDutyEvent(e, PD_KEY).payload!.source).toBe(oneLine(e.data.domain!));
  });
});

describe('a group\'s headline', () => {
  it('names its one site only when every event is about it: events about no site make it "and the account"', () => {
    const site = siteEvent('s', 14, { name: 'site.offline', severity: 'critical', summary: 'site14.example.com is offline' });
    const accountWide = (key: string) => {
      const e = siteEvent(key, 1, { name: 'channel.disabled', severity: 'critical' });
      return { ...e, data: { ...e.data, site_id: null, domain: null } };
    };
    expect(subjectOf([site, siteEvent('t', 14)])).toMatch(/^\[hostwatch\] CRITICAL: 2 events on site14\.example\.com: /);
    expect(subjectOf([site, accountWide('a'), accountWide('b')])).toMatch(/^\[hostwatch\] CRITICAL: 3 events on site14\.example\.com and the account: /);
    expect(subjectOf([site, siteEvent('u', 2), accountWide('c')])).toMatch(/^\[hostwatch\] CRITICAL: 3 events on 2 sites and the account: /);
    expect(subjectOf([accountWide('d'), accountWide('e')])).toMatch(/^\[hostwatch\] CRITICAL: 2 events: /);
  });
});

describe('an SMTP server\'s answer', () => {
  it('is stored on one line, as every channel\'s error is: a multi-line answer or a TLS error text cannot break a row of hostwatch deliveries', async () => {
    const { resultFromSmtpError } = await import('../src/notify/channels/email.js');
    const tls = resultFromSmtpError({ code: 'ESOCKET', message: '80AC:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:ssl3_record.c:350:\n' });
    expect(!tls.ok && tls.error).toBe('SMTP connection failed (ESOCKET): 80AC:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:ssl3_record.c:350:');
    const refused = resultFromSmtpError({ responseCode: 554, response: '554-5.7.1 Rejected\r\n554 5.7.1 policy' });
    expect(!refused.ok && refused.error).toBe('SMTP 554-5.7.1 Rejected 554 5.7.1 policy');
  });
});
