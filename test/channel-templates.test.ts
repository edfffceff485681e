/**
 * Channel templates: a chat or pager channel's `template:` (the text of each event) and a
 * webhook's `template:` (a Liquid body and headers). Checked with their variables when the
 * config is read, so `hostwatch check` names the file and line of an unknown variable;
 * rendered per event; their output still escaped per channel.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/parse.js';
import { formatConfigError } from '../src/config/errors.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { siteEvent } from './events-fixture.js';
import { fakeNtfy } from './fakes/ntfy.js';
import { fakeTelegram } from './fakes/telegram.js';
import { channelWorld } from './fakes/world.js';
import { rows, tempDir } from './harness.js';
import { startReceiver, TEST_SECRET } from './receiver.js';
import { hostwatch } from './run-cli.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const HEAD = 'api: { base_url: https://panel.example.com, key: k }\nchannels:\n';
function errorsOf(channels: string): string[] {
  const r = parseConfig(HEAD + channels, 'hostwatch.yaml', {}, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
  return r.ok ? [] : r.errors.map(formatConfigError);
}

describe('checking templates', () => {
  it('an unknown variable is an error naming the file, line, key path and what a template can use', () => {
    expect(errorsOf('  - name: chat\n    type: ntfy\n    url: https://ntfy.sh/alerts\n    template: "{{ data.summary }} on {{ data.domian }}"\n')).toEqual([
      'hostwatch.yaml:6:15: channels[0].template: unknown variable "data.domian" (line 1, column 26 of the template); data has name, severity, status, summary, site_id, domain, changes, rule, observed_at, labels, description, repeat, alert_id, shadow, channel, reason, source, failing, last_error, required (got "{{ data.summary }} on {{ data.domian }}")',
    ]);
    expect(errorsOf('  - { name: hook, type: webhook, url: "https://example.net/h", template: { body: "{{ event.id }}" } }\n')).toEqual([
      'hostwatch.yaml:3:82: channels[0].template.body: unknown variable "event.id" (line 1, column 4 of the template); a template can use id, type, source, subject, time, specversion, datacontenttype, data (got "{{ event.id }}")',
    ]);
  });

  it('an unknown filter or broken Liquid is an error too; a valid template is not, whatever it uses inside loops and conditions', () => {
    expect(errorsOf('  - { name: s, type: slack, url: "https://hooks.slack.com/services/a/b", template: "{{ type | shout }}" }\n')).toEqual([
      'hostwatch.yaml:3:84: channels[0].template: is not a valid Liquid template: undefined filter: shout, line:1, col:1 (got "{{ type | shout }}")',
    ]);
    expect(errorsOf('  - { name: d, type: discord, url: "https://discord.com/api/webhooks/1/x", template: "{% if data.status %}" }\n')).toHaveLength(1);
    const ok = '{% for c in data.changes %}{{ c.path }}: {{ c.before }} → {{ c.after }}{% endfor %} {{ data.labels.team | default: "ops" }} {% if data.status == "resolved" %}ok{% endif %}';
    expect(errorsOf(`  - { name: t, type: teams, url: "https://example.net/wf", template: '${ok}' }\n`)).toEqual([]);
  });

  it('hostwatch check exits 2 and names the file and line of a template with an unknown variable', async () => {
    const { dir, cleanup } = tempDir();
    cleanups.push(cleanup);
    const file = join(dir, 'config.yaml');
    writeFileSync(file, `${HEAD}  - name: pager\n    type: pagerduty\n    routing_key: R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H\n    template: "{{ data.sumary }}"\n`);
    const r = await hostwatch(['check', '-c', file]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${file}:6:15: channels[0].template: unknown variable "data.sumary"`);
    expect(r.stderr).not.toContain('R02Q9XK7PZ3M8N1B4V6C5X2Z7L0K9J8H');
  });
});

describe('a chat channel with a template', () => {
  it('shows what the template says for each event, still escaped for the channel', async () => {
    const tg = await fakeTelegram([42]);
    const { w, app } = await channelWorld([
      { name: 'chat', type: 'telegram', bot_token: tg.token, chat_id: 42, api_url: tg.url, template: '{{ data.domain }} — {{ data.name }}: {{ data.summary | upcase }} ({{ data.status | default: "change" }})' },
    ]);
    cleanups.push(() => w.close(), () => tg.close());
    await app.notifier.publish(siteEvent('t', 3, { summary: '<b>review</b> & more', domain: 'shop.example' }));
    await app.worker.drain(2_000);
    expect(tg.arrivals[0]!.problems).toEqual([]);
    expect(tg.shown[0]!.text).toContain('shop.example — backup.failed: <B>REVIEW</B> & MORE (change)');
    expect(tg.shown[0]!.entities.map((e) => e.type).sort()).toEqual(['bold', 'bold', 'italic']);
  });

  it('a template an event cannot fill (a label it lacks) sends the summary instead and logs why', async () => {
    const ntfy = await fakeNtfy({ token: null });
    const { w, app } = await channelWorld([{ name: 'chat', type: 'ntfy', url: ntfy.url, template: 'team {{ data.labels.team }}: {{ data.summary }}' }], { config: { log: { level: 'warn' } } });
    cleanups.push(() => w.close(), () => ntfy.close());
    const e = siteEvent('nolabel', 1, { summary: 'the real summary' });
    await app.notifier.publish(e);
    await app.worker.drain(2_000);
    expect((ntfy.accepted()[0]!.json as { message: string }).message).toContain('the real summary');
    const lines = w.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['msg'] === 'channel template failed; the summary was sent instead');
    // Once, though the message renders the event twice (its title and its text).
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ channel: 'chat', event_id: e.id, error: expect.stringContaining('data.labels.team') });
  });
});

describe('a webhook with a template', () => {
  it('sends the rendered body and headers, signed per Standard Webhooks when it has a secret', async () => {
    const hook = await startReceiver();
    const { w, app } = await channelWorld([
      {
        name: 'hook',
        type: 'webhook',
        url: hook.url,
        secret: TEST_SECRET,
        template: { body: '{"text": {{ data.summary | json }}, "site": {{ data.site_id }}, "id": "{{ id }}"}', headers: { 'X-Kind': '{{ type }}', 'X-Where': '{{ data.domain }}' } },
      },
    ], { realTime: true });
    cleanups.push(() => w.close(), () => hook.close());
    const e = siteEvent('wh', 5, { summary: 'say "hi"\nX-Injected: yes', domain: 'bücher.example\r\nX-Evil: 1' });
    await app.notifier.publish(e);
    await app.worker.drain(2_000);
    const r = hook.requests[0]!;
    expect(r.signatureError).toBeNull();
    expect(JSON.parse(r.body)).toEqual({ text: 'say "hi"\nX-Injected: yes', site: 5, id: e.id });
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['x-kind']).toBe('hostwatch.backup.failed');
    // A line break in API text cannot add a header; non-ASCII is percent-encoded.
    expect(r.headers['x-where']).toBe('b%C3%BCcher.example X-Evil: 1');
    expect(r.headers['x-evil']).toBeUndefined();
    expect(r.id).toBe(e.id);
  });

  it('without a secret is sent unsigned; a CloudEvents webhook still needs one', async () => {
    const hook = await startReceiver();
    const { w, app } = await channelWorld([{ name: 'hook', type: 'webhook', url: hook.url, template: { body: '{{ data.summary }}', content_type: 'text/plain; charset=utf-8' } }]);
    cleanups.push(() => w.close(), () => hook.close());
    await app.notifier.publish(siteEvent('plain', 1, { summary: 'plain text' }));
    await app.worker.drain(2_000);
    expect(hook.requests[0]!.headers['webhook-signature']).toBeUndefined();
    expect(hook.requests[0]!.body).toBe('plain text');
    expect(hook.requests[0]!.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(errorsOf('  - { name: hook, type: webhook, url: "https://example.net/h" }\n')).toEqual([
      'hostwatch.yaml:3:5: channels[0].secret: is required (a webhook without a template sends signed CloudEvents); must be a Standard Webhooks secret: "whsec_" followed by base64, like whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    ]);
  });

  it('an event the template cannot fill is dead-lettered with the reason', async () => {
    const hook = await startReceiver();
    const { w, app } = await channelWorld([{ name: 'hook', type: 'webhook', url: hook.url, template: { body: '{{ data.labels.team }}' } }]);
    cleanups.push(() => w.close(), () => hook.close());
    await app.notifier.publish(siteEvent('x', 1));
    await app.worker.drain(2_000);
    expect(hook.requests).toHaveLength(0);
    const [row] = rows<{ state: string; last_error: string }>(w, 'SELECT state, last_error FROM outbox');
    expect(row!.state).toBe('dead');
    expect(row!.last_error).toMatch(/^permanent failure: template: .*data\.labels\.team/);
  });
});
