/**
 * docs/channels.md tells the truth: every payload it shows is exactly what the channel
 * sends for the example event, and every config block it shows is a valid config.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatConfigError } from '../src/config/errors.js';
import { parseConfig } from '../src/config/parse.js';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { PAYLOADS } from './docs-payloads.js';

const DOC = readFileSync('docs/channels.md', 'utf8');

/** The environment the documented blocks name. */
const ENV = {
  WEBHOOK_SECRET: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=',
  HOOK_BASIC_AUTH: 'aG9zdHdhdGNoOnNlY3JldA==',
  SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T0/B0/x',
  SMTP_PASS: 'pass-123',
  TEAMS_WORKFLOW_URL: 'https://prod-01.westus.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=s',
  DISCORD_WEBHOOK_URL: 'https://discord.com/api/webhooks/1/token',
  PAGERDUTY_ROUTING_KEY: '0123456789abcdef0123456789abcdef',
  OPSGENIE_API_KEY: 'og-key',
  TELEGRAM_BOT_TOKEN: '123456789:AAHxyz',
  NTFY_TOKEN: 'tk_abc',
};

describe('docs/channels.md', () => {
  it('shows, for every channel, exactly the payload it sends for the example event', () => {
    const shown = [...DOC.matchAll(/<!-- payload: ([\w-]+) -->\n```json\n([\s\S]*?)\n```/g)].map((m) => [m[1]!, JSON.parse(m[2]!) as unknown] as const);
    expect(shown.map(([name]) => name).sort()).toEqual(Object.keys(PAYLOADS).sort());
    for (const [name, payload] of shown) expect(payload, name).toEqual(PAYLOADS[name]!());
  });

  it('shows config blocks that hostwatch accepts', () => {
    const blocks = [...DOC.matchAll(/```yaml\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThanOrEqual(10);
    for (const block of blocks) {
      const text = `api: { base_url: https://panel.example.com, key: k }\n${block.startsWith('channels:') ? '' : 'channels:\n'}${block}\n`;
      const r = parseConfig(text, 'channels.md', ENV, { sourceNames: SOURCE_NAMES, baseDir: '/tmp' });
      expect(r.ok ? [] : r.errors.map(formatConfigError), block).toEqual([]);
    }
  });
});
