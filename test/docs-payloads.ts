/**
 * The example event of docs/channels.md and what each channel sends for it: the docs show
 * these payloads, and test/docs-channels.test.ts keeps them exact.
 */
import { alertEventId, envelope } from '../src/events/envelope.js';
import type { HostwatchEvent } from '../src/events/types.js';
import { discordMessage } from '../src/notify/channels/discord.js';
import { emailBodies } from '../src/notify/channels/email.js';
import { ntfyMessage } from '../src/notify/channels/ntfy.js';
import { opsgenieAlert, opsgenieClose } from '../src/notify/channels/opsgenie.js';
import { pagerDutyEvent } from '../src/notify/channels/pagerduty.js';
import { slackMessage } from '../src/notify/channels/slack.js';
import { teamsMessage } from '../src/notify/channels/teams.js';
import { telegramText } from '../src/notify/channels/telegram.js';
import { compileWebhookTemplate, templateRequest } from '../src/notify/channels/webhook.js';

const FIRING_ID = alertEventId('site-offline', 'sites/12/health', 1, 'firing');

/** The PRODUCT.md example: example.com goes offline, then comes back (as the built-in site-offline rule writes it). */
export function exampleEvent(status: 'firing' | 'resolved' = 'firing'): HostwatchEvent {
  const at = new Date(status === 'firing' ? '2026-11-21T14:00:00Z' : '2026-11-21T14:25:00Z');
  return envelope({
    id: status === 'firing' ? FIRING_ID : alertEventId('site-offline', 'sites/12/health', 1, 'resolved'),
    instance: 'agency-prod',
    subject: 'sites/12/health',
    time: at,
    data: {
      name: 'site.offline',
      severity: 'critical',
      status,
      alert_id: FIRING_ID,
      summary: status === 'firing' ? 'example.com is offline' : 'example.com is back online',
      site_id: 12,
      domain: 'example.com',
      changes: [
        { path: 'online.status', before: status === 'firing' ? 'online' : 'offline', after: status === 'firing' ? 'offline' : 'online' },
        { path: 'online.label', before: status === 'firing' ? 'Online' : 'Offline', after: status === 'firing' ? 'Offline' : 'Online' },
      ],
      rule: 'site-offline',
      observed_at: at.toISOString(),
      // As the built-in rule writes them (its labels and description).
      labels: { category: 'availability' },
      description:
        status === 'firing'
          ? 'The health check of example.com (site 12) reports it offline (Offline). Visitors cannot reach the site.'
          : 'The health check of example.com (site 12) reports it online again.',
    },
  });
}

/** The webhook template docs/channels.md shows. */
export const EXAMPLE_WEBHOOK_TEMPLATE = {
  body: '{"text": {{ data.summary | json }}, "severity": "{{ data.severity }}", "link": "https://status.example.net/sites/{{ data.site_id }}"}',
  headers: { 'X-Hostwatch-Type': '{{ type }}' },
  content_type: 'application/json',
};

/** Each documented payload, by the name of its marker in docs/channels.md. */
export const PAYLOADS: Record<string, () => unknown> = {
  webhook: () => {
    const r = templateRequest(compileWebhookTemplate(EXAMPLE_WEBHOOK_TEMPLATE), exampleEvent());
    return { headers: r.headers, body: JSON.parse(r.body) as unknown };
  },
  slack: () => slackMessage([exampleEvent()]),
  email: () => emailBodies([exampleEvent()]).text,
  teams: () => teamsMessage([exampleEvent()]),
  discord: () => discordMessage([exampleEvent()]),
  'pagerduty-trigger': () => pagerDutyEvent(exampleEvent(), '0123456789abcdef0123456789abcdef'),
  'pagerduty-resolve': () => pagerDutyEvent(exampleEvent('resolved'), '0123456789abcdef0123456789abcdef'),
  'opsgenie-create': () => opsgenieAlert(exampleEvent()),
  'opsgenie-close': () => opsgenieClose('https://api.eu.opsgenie.com', exampleEvent('resolved')),
  telegram: () => ({ chat_id: -1001234567890, text: telegramText([exampleEvent()]), parse_mode: 'HTML', link_preview_options: { is_disabled: true } }),
  ntfy: () => ntfyMessage([exampleEvent()], 'agency-alerts'),
};
