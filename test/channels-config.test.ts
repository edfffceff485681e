/**
 * Config of the new channel types: what a minimal block normalizes to (defaults, provider
 * addresses), and the error a bad value gets (file, line, key path, what is allowed).
 */
import { describe, expect, it } from 'vitest';
import { formatConfigError } from '../src/config/errors.js';
import { parseConfig } from '../src/config/parse.js';
import type { ChannelConfig } from '../src/config/types.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';

const HEAD = 'api: { base_url: https://panel.example.com, key: k }\nchannels:\n';
function parse(channel: string) {
  return parseConfig(`${HEAD}  - ${channel}\n`, 'c.yaml', { TOKEN: 'tk_from_env' }, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
}
function channelOf(channel: string): ChannelConfig {
  const r = parse(channel);
  if (!r.ok) throw new Error(r.errors.map(formatConfigError).join('\n'));
  return r.config.channels[0]!;
}
/** The column of `needle` in the config line `  - <channel>` (1-based). */
function col(channel: string, needle: string): number {
  return 5 + channel.indexOf(needle);
}
function errorsOf(channel: string): string[] {
  const r = parse(channel);
  return r.ok ? [] : r.errors.map(formatConfigError);
}

describe('the new channel types', () => {
  it('normalize with their defaults and the providers\' public addresses', () => {
    expect(channelOf('{ name: t, type: teams, url: "https://prod-1.westus.logic.azure.com/workflows/x/triggers/manual/paths/invoke?sig=s" }')).toEqual({
      name: 't', type: 'teams', url: 'https://prod-1.westus.logic.azure.com/workflows/x/triggers/manual/paths/invoke?sig=s', timeout_ms: 10_000, digest: null, template: null,
    });
    expect(channelOf('{ name: d, type: discord, url: "https://discord.com/api/webhooks/1/abc", digest: daily at 09:30, timeout: 3s }')).toEqual({
      name: 'd', type: 'discord', url: 'https://discord.com/api/webhooks/1/abc', timeout_ms: 3_000, digest: { hour: 9, minute: 30, timezone: 'UTC' }, template: null,
    });
    expect(channelOf('{ name: p, type: pagerduty, routing_key: R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H }')).toEqual({
      name: 'p', type: 'pagerduty', routing_key: 'R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H', api_url: 'https://events.pagerduty.com', timeout_ms: 10_000, template: null,
    });
    expect(channelOf('{ name: g, type: opsgenie, api_key: abc, region: eu }')).toMatchObject({ api_url: 'https://api.eu.opsgenie.com' });
    expect(channelOf('{ name: tg, type: telegram, bot_token: "123:AAbc_-x", chat_id: -1001234 }')).toEqual({
      name: 'tg', type: 'telegram', bot_token: '123:AAbc_-x', chat_id: '-1001234', message_thread_id: null, api_url: 'https://api.telegram.org', timeout_ms: 10_000, digest: null, template: null,
    });
    expect(channelOf('{ name: n, type: ntfy, url: "https://ntfy.example/alerts", token: ${TOKEN} }')).toEqual({
      name: 'n', type: 'ntfy', url: 'https://ntfy.example/alerts', token: 'tk_from_env', timeout_ms: 10_000, digest: null, template: null,
    });
  });

  it('reject what the provider cannot use, saying what is allowed', () => {
    const ntfy = '{ name: n, type: ntfy, url: "https://ntfy.sh/" }';
    expect(errorsOf(ntfy)).toEqual([
      `c.yaml:3:${col(ntfy, '"https')}: channels[0].url: must be an ntfy topic URL like https://ntfy.sh/my-alerts (the last path part is the topic: letters, digits, _ or -, at most 64) (got "[redacted]")`,
    ]);
    const chat = '{ name: tg, type: telegram, bot_token: "1:a", chat_id: "my chat" }';
    expect(errorsOf(chat)).toEqual([
      `c.yaml:3:${col(chat, '"my chat"')}: channels[0].chat_id: must be a Telegram chat id (an integer like -1001234567890) or a public channel name like @my_alerts (got "my chat")`,
    ]);
    expect(errorsOf('{ name: tg, type: telegram, bot_token: "1:a" }')).toEqual([
      'c.yaml:3:5: channels[0].chat_id: is required; must be a Telegram chat id (an integer like -1001234567890) or a public channel name like @my_alerts',
    ]);
  });

  it('take only their own keys: a pager has no digest, e-mail no template', () => {
    const pager = '{ name: p, type: pagerduty, routing_key: R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H, digest: daily at 08:00 }';
    expect(errorsOf(pager)).toEqual([`c.yaml:3:${col(pager, 'digest')}: channels[0].digest: unknown key; allowed: name, type, routing_key, api_url, timeout, template`]);
    const mail = '{ name: m, type: email, to: a@example.net, from: b@example.net, smtp: { host: h }, template: x }';
    expect(errorsOf(mail)).toEqual([`c.yaml:3:${col(mail, 'template')}: channels[0].template: unknown key; allowed: name, type, to, from, smtp, timeout, digest`]);
    const hook = '{ name: h, type: webhook, url: "https://example.net/h", secret: whsec_c2VjcmV0, mode: binary, template: { body: "{}" } }';
    expect(errorsOf(hook)).toEqual([
      `c.yaml:3:${col(hook, 'binary')}: channels[0].mode: is for CloudEvents webhooks; a webhook with a template sends the body its template renders (got "binary")`,
    ]);
    expect(errorsOf('{ name: h, type: webhook, url: "https://example.net/h", template: { body: "{}", headers: { "Content-Length": "1" } } }')).toHaveLength(1);
  });

  it('with a type hostwatch does not know still get their other mistakes reported: the name too', () => {
    const bad = '{ name: Bad Name, type: carrier-pigeon }';
    expect(errorsOf(bad)).toEqual([
      `c.yaml:3:${col(bad, 'Bad Name')}: channels[0].name: must be lowercase letters, digits, "_" or "-", like ops or oncall (got "Bad Name")`,
      `c.yaml:3:${col(bad, 'carrier-pigeon')}: channels[0].type: must be one of webhook, slack, email, console, teams, discord, pagerduty, opsgenie, telegram, ntfy (got "carrier-pigeon")`,
    ]);
    // A missing name, with no type at all.
    expect(errorsOf('{ url: "https://example.net/h" }')).toEqual([
      'c.yaml:3:5: channels[0].type: is required; must be one of webhook, slack, email, console, teams, discord, pagerduty, opsgenie, telegram, ntfy',
      'c.yaml:3:5: channels[0].name: is required; must be lowercase letters, digits, "_" or "-", like ops or oncall',
    ]);
  });
});
