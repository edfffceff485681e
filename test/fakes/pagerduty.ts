/**
 * PagerDuty's Events API v2 on loopback: POST /v2/enqueue with a JSON event, checked the
 * way PagerDuty documents it (developer.pagerduty.com, "Send an Alert Event"): a 32-character
 * routing_key, event_action trigger/acknowledge/resolve, dedup_key at most 255 characters,
 * and for a trigger payload.summary (≤ 1024), payload.source and payload.severity
 * (critical, error, warning, info). Refusals are PagerDuty's 400 body
 * `{"status":"invalid event","message":"Event object is invalid","errors":[...]}`; a
 * success is 202 `{"status":"success","message":"Event processed","dedup_key":...}`.
 * It keeps PagerDuty's alert state per dedup_key, so a test sees how many alerts opened.
 */
import { at, startFake, stringField, type Arrival, type Fake } from './server.js';

export interface PagerDutyAlert {
  dedupKey: string;
  status: 'triggered' | 'resolved';
  /** Trigger events applied to this alert (the first opened it). */
  triggers: number;
  summary: string;
  severity: string;
}

export interface FakePagerDuty extends Fake {
  /** The API address to configure (`api_url`). */
  url: string;
  /** Every alert PagerDuty opened, in order (a trigger after a resolve opens a new one). */
  alerts: PagerDutyAlert[];
}

const SEVERITIES = ['critical', 'error', 'warning', 'info'];

/** Start a fake PagerDuty that knows one routing key. */
export async function fakePagerDuty(routingKey: string): Promise<FakePagerDuty> {
  const alerts: PagerDutyAlert[] = [];
  const open = new Map<string, PagerDutyAlert>();
  const check = (a: Arrival): string[] => {
    if (a.method !== 'POST' || a.path !== '/v2/enqueue') return [`not found: ${a.method} ${a.path}`];
    if (!/^application\/json/.test(a.headers['content-type'] ?? '')) return ['content-type must be application/json'];
    if (a.json === undefined) return ['body is not JSON'];
    const j = a.json;
    const p: string[] = [];
    const key = at(j, 'routing_key');
    if (typeof key !== 'string' || key.length !== 32) p.push("Length of 'routing_key' is incorrect (should be 32 characters)");
    else if (key !== routingKey) p.push('Invalid routing key');
    const action = at(j, 'event_action');
    if (!['trigger', 'acknowledge', 'resolve'].includes(String(action))) p.push("'event_action' is invalid (must be one of trigger, acknowledge, resolve)");
    p.push(...stringField(j, 'dedup_key', { max: 255 }));
    if (action === 'trigger') {
      p.push(...stringField(j, 'payload.summary', { required: true, max: 1024 }), ...stringField(j, 'payload.source', { required: true }));
      if (!SEVERITIES.includes(String(at(j, 'payload.severity')))) p.push("'payload.severity' is invalid (must be one of critical, error, warning, info)");
      const ts = at(j, 'payload.timestamp');
      if (ts !== undefined && Number.isNaN(Date.parse(String(ts)))) p.push("'payload.timestamp' is invalid");
    }
    return p;
  };
  const fake = await startFake({
    check,
    refuse: (a, problems) =>
      problems[0]!.startsWith('not found') ? { status: 404, body: 'Not Found' } : { status: 400, body: { status: 'invalid event', message: 'Event object is invalid', errors: problems } },
    accept: (a) => {
      const j = a.json as { event_action: string; dedup_key?: string; payload?: { summary: string; severity: string } };
      const dedupKey = j.dedup_key ?? `generated-${a.n}`;
      const cur = open.get(dedupKey);
      if (j.event_action === 'trigger') {
        if (cur) cur.triggers++;
        else {
          const alert: PagerDutyAlert = { dedupKey, status: 'triggered', triggers: 1, summary: j.payload!.summary, severity: j.payload!.severity };
          alerts.push(alert);
          open.set(dedupKey, alert);
        }
      } else if (j.event_action === 'resolve' && cur) {
        cur.status = 'resolved';
        open.delete(dedupKey);
      }
      return { status: 202, body: { status: 'success', message: 'Event processed', dedup_key: dedupKey } };
    },
  });
  return Object.assign(fake, { url: fake.origin, alerts });
}
