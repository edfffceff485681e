/**
 * Secrets of the new channels (routing_key, the Opsgenie key, the bot token, the ntfy
 * token, and the Teams, Discord and ntfy URLs that are credentials themselves) appear in
 * no log line, event, database row or error: not when a config value is wrong, and not
 * when a provider echoes the whole request back in its error (invariant 7).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import type { App } from '../src/main.js';
import { secretScrubber, secretsOf } from '../src/log.js';
import { siteEvent } from './events-fixture.js';
import { fakeDiscord } from './fakes/discord.js';
import { fakeNtfy } from './fakes/ntfy.js';
import { fakeOpsgenie } from './fakes/opsgenie.js';
import { fakePagerDuty } from './fakes/pagerduty.js';
import type { Arrival, Fake } from './fakes/server.js';
import { fakeTeams } from './fakes/teams.js';
import { fakeTelegram } from './fakes/telegram.js';
import { everyChannel, everythingStored, providerChannels } from './fakes/world.js';
import { rows, startWorld, type World } from './harness.js';

const PD_KEY = 'S3CR3TR0UT1NGK3YS3CR3TR0UT1NGK3Y';
const OG_KEY = 'og-s3cret-5f1e2d3c-4b5a-6978';
const CHAT = -100424242;

/** Everything a request carried, as a careless provider would repeat it in an error. */
function echo(a: Arrival): string {
  return `you sent ${a.method} ${a.path}?${a.query.toString()} with ${JSON.stringify(a.headers)} and ${a.body}`;
}

let w: World;
let app: App;
let fakes: Fake[];
let secrets: string[];

beforeAll(async () => {
  const [teams, discord, pd, og, tg, ntfy] = await Promise.all([fakeTeams(), fakeDiscord(), fakePagerDuty(PD_KEY), fakeOpsgenie(OG_KEY), fakeTelegram([CHAT]), fakeNtfy()]);
  fakes = [teams, discord, pd, og, tg, ntfy];
  w = await startWorld();
  const channels = [...providerChannels({ teams, discord, pd, og, tg, ntfy, pdKey: PD_KEY, ogKey: OG_KEY, chat: CHAT }), { name: 'console', type: 'console' }];
  app = await w.app(
    {
      channels,
      routes: everyChannel(channels),
      delivery: { retry_schedule: ['100ms', '100ms'] },
    },
    { consoleWrite: () => undefined },
  );
  secrets = [teams.sig, discord.url.split('/').at(-1)!, PD_KEY, OG_KEY, tg.token, tg.token.split(':')[1]!, ntfy.token!];
  // First every provider fails with a retryable error that repeats the request, then with a
  // permanent one that does too (which disables the channel, with an operator event).
  for (const fake of fakes) fake.respond((a) => ({ status: a.n === 1 ? 500 : 401, body: { message: echo(a), error: { code: 'Echo', message: echo(a) }, description: echo(a), errors: [echo(a)] } }));
  await app.notifier.publish(siteEvent('s1', 1, { status: 'firing' }));
  await app.worker.drain(5_000);
});

afterAll(async () => {
  await w?.close();
  await Promise.allSettled((fakes ?? []).map((f) => f.close()));
});

describe('secrets of the new channels', () => {
  it('are all known to the scrubber', () => {
    const known = secretsOf(app.config);
    for (const s of secrets) expect(known.some((k) => k.includes(s))).toBe(true);
  });

  it('each provider failed a request (500), then refused one (401), echoing its secrets both times', () => {
    for (const fake of fakes) {
      expect(fake.arrivals.map((a) => a.status).slice(0, 2)).toEqual([500, 401]);
      expect(secrets.some((s) => echo(fake.arrivals[0]!).includes(s))).toBe(true);
    }
    expect(rows(w, "SELECT count(*) n FROM channel_state WHERE disabled_at IS NOT NULL")).toEqual([{ n: 6 }]);
  });

  it('appear in no database row, log line or event, though the errors were stored, logged and sent on', () => {
    const stored = everythingStored(w);
    expect(stored).toContain('[REDACTED]');
    expect(w.logs.text).toContain('[REDACTED]');
    for (const s of secrets) {
      expect(stored).not.toContain(s);
      expect(w.logs.text).not.toContain(s);
    }
  });

  it('leave not even their first characters in the error of any attempt', () => {
    const errors = rows<{ error: string }>(w, 'SELECT error FROM delivery_attempts WHERE error IS NOT NULL').map((r) => r.error);
    expect(errors.length).toBeGreaterThanOrEqual(12);
    for (const s of secrets) for (const e of errors) expect(e).not.toContain(s.slice(0, 10));
  });
});

describe('the token of a Slack or Discord URL', () => {
  it('is scrubbed where an error echoes it alone, without the rest of the URL; the short ids beside it are not secrets', () => {
    const slack = 'https://hooks.slack.com/services/T00000000/B00000000/SlackSecretToken0123456789XY';
    const discord = 'https://discord.com/api/webhooks/112233445566778899/DiscordSecretTokenAbCdEf0123456789-_xyz';
    const text = ['api: { base_url: https://panel.example.com, key: k }', 'channels:', `  - { name: a, type: slack, url: "${slack}" }`, `  - { name: b, type: discord, url: "${discord}" }`, ''].join('\n');
    const r = parseConfig(text, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    const scrub = secretScrubber(secretsOf(r.ok ? r.config : (undefined as never)));
    expect(scrub('Unknown Webhook DiscordSecretTokenAbCdEf0123456789-_xyz (code 10015)')).toBe('Unknown Webhook [REDACTED] (code 10015)');
    expect(scrub('err SlackSecretToken0123456789XY / T00000000')).toBe('err [REDACTED] / T00000000');
  });
});

describe('a wrong secret in the config', () => {
  it('is named by its key and never shown', () => {
    const config = [
      'api: { base_url: https://panel.example.com, key: k }',
      'channels:',
      '  - { name: a, type: pagerduty, routing_key: "too-short-secret-key" }',
      '  - { name: b, type: telegram, bot_token: "not a token secret", chat_id: 1 }',
      '  - { name: c, type: ntfy, url: "ftp://ntfy.example/secret-topic" }',
      '  - { name: d, type: teams, url: "not a url sig=secret" }',
      '  - { name: e, type: discord, url: "discord://secret" }',
      '  - { name: f, type: opsgenie, api_key: 12 }',
      '  - { name: g, type: ntfy, url: "https://ntfy.sh/x", token: 99 }',
      '',
    ].join('\n');
    const r = parseConfig(config, 'c.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
    expect(r.ok).toBe(false);
    const errors = r.ok ? [] : r.errors;
    expect(errors.map((e) => e.path)).toEqual(['channels[0].routing_key', 'channels[1].bot_token', 'channels[2].url', 'channels[3].url', 'channels[4].url', 'channels[5].api_key', 'channels[6].token']);
    for (const e of errors) {
      expect(e.message).toMatch(/\(got "\[redacted\]"\)$/);
      expect(e.value).toBe('[redacted]');
      expect(e.message).not.toMatch(/secret/);
    }
  });
});

describe('a provider error cut to length', () => {
  it('is scrubbed before the cut, so a secret that straddles the cut leaves no piece behind', async () => {
    const pd = await fakePagerDuty(PD_KEY);
    const world = await startWorld();
    try {
      const a = await world.app({ channels: [{ name: 'pager', type: 'pagerduty', routing_key: PD_KEY, api_url: pd.url }], delivery: { retry_schedule: ['1h'] } });
      // 290 characters, then the key: a cut at 300 would keep its first 9 characters.
      pd.respond(() => ({ status: 500, body: `${'x'.repeat(290)}${PD_KEY}` }));
      await a.notifier.publish(siteEvent('cut', 1));
      await a.worker.deliverDue();
      const [row] = rows<{ last_error: string }>(world, 'SELECT last_error FROM outbox');
      expect(row!.last_error.length).toBeLessThan(340);
      expect(row!.last_error).not.toContain(PD_KEY.slice(0, 6));
    } finally {
      await world.close();
      await pd.close();
    }
  });
});

describe('a webhook template', () => {
  it('treats credential headers as secrets: scrubbed when written plainly, redacted in config errors', () => {
    const config = (auth: string) =>
      parseConfig(
        `api: { base_url: https://panel.example.com, key: k }\nchannels:\n  - { name: h, type: webhook, url: "https://example.net/h", template: { body: "{}", headers: { Authorization: "${auth}", X-Kind: "{{ type }}" } } }\n`,
        'c.yaml',
        {},
        { sourceNames: SOURCE_NAMES, baseDir: '/tmp' },
      );
    const ok = config('Bearer s3cr3t-header-token');
    expect(ok.ok && secretsOf(ok.config)).toEqual(expect.arrayContaining(['Bearer s3cr3t-header-token', 's3cr3t-header-token']));
    expect(ok.ok && secretsOf(ok.config).some((s) => s.includes('type'))).toBe(false);
    const bad = config('Bearer {{ nope }}');
    expect(bad.ok ? [] : bad.errors.map((e) => [e.path, e.value])).toEqual([['channels[0].template.headers.Authorization', '[redacted]']]);
  });
});
