/**
 * Opsgenie's Alert API on loopback: `Authorization: GenieKey <key>`; POST /v2/alerts to
 * create (message ≤ 130, alias ≤ 512, description ≤ 15000, tags ≤ 20 of ≤ 50, details ≤
 * 8000 characters in all, entity ≤ 512, source ≤ 100, priority P1-P5) and
 * POST /v2/alerts/{alias}/close?identifierType=alias to close (docs.opsgenie.com, Alert
 * API). Requests are asynchronous: 202 `{"result":"Request will be processed","took":…,
 * "requestId":…}`. A bad key is 401; a refused body 422 `{"message":"Request body is not
 * processable. Please check the errors.","errors":{…}}`. It keeps the alerts by alias.
 */
import { randomUUID } from 'node:crypto';
import { at, startFake, stringField, type Arrival, type Fake } from './server.js';

export interface OpsgenieAlert {
  alias: string;
  message: string;
  priority: string;
  status: 'open' | 'closed';
  /** Create requests that landed on this open alert (Opsgenie counts duplicates by alias). */
  count: number;
}

export interface FakeOpsgenie extends Fake {
  url: string;
  alerts: OpsgenieAlert[];
}

const CLOSE = /^\/v2\/alerts\/([^/]+)\/close$/;

/** Start a fake Opsgenie that knows one API key. */
export async function fakeOpsgenie(apiKey: string): Promise<FakeOpsgenie> {
  const alerts: OpsgenieAlert[] = [];
  const check = (a: Arrival): string[] => {
    if (a.method !== 'POST' || (a.path !== '/v2/alerts' && !CLOSE.test(a.path))) return [`not found: ${a.method} ${a.path}`];
    if (a.headers['authorization'] !== `GenieKey ${apiKey}`) return ['unauthorized'];
    if (!/^application\/json/.test(a.headers['content-type'] ?? '') || a.json === undefined) return ['body: must be JSON'];
    const j = a.json;
    if (CLOSE.test(a.path)) {
      if (a.query.get('identifierType') !== 'alias') return ['identifierType: must be alias here'];
      return [...stringField(j, 'source', { max: 100 }), ...stringField(j, 'note', { max: 25_000 })];
    }
    const p = [
      ...stringField(j, 'message', { required: true, max: 130 }),
      ...stringField(j, 'alias', { max: 512 }),
      ...stringField(j, 'description', { max: 15_000 }),
      ...stringField(j, 'entity', { max: 512 }),
      ...stringField(j, 'source', { max: 100 }),
    ];
    const tags = at(j, 'tags');
    if (tags !== undefined && (!Array.isArray(tags) || tags.length > 20 || tags.some((t) => typeof t !== 'string' || t.length > 50))) p.push('tags: at most 20 tags of at most 50 characters');
    const details = at(j, 'details');
    if (details !== undefined) {
      const flat = Object.entries(details as Record<string, unknown>);
      if (flat.some(([, v]) => typeof v !== 'string')) p.push('details: values must be strings');
      if (flat.reduce((n, [k, v]) => n + k.length + String(v).length, 0) > 8000) p.push('details: more than 8000 characters');
    }
    const priority = at(j, 'priority');
    if (priority !== undefined && !['P1', 'P2', 'P3', 'P4', 'P5'].includes(String(priority))) p.push('priority: must be one of P1, P2, P3, P4, P5');
    return p;
  };
  const fake = await startFake({
    check,
    refuse: (a, problems) => {
      const took = { took: 0.001, requestId: randomUUID() };
      if (problems[0]!.startsWith('not found')) return { status: 404, body: { message: 'Could not find the requested resource', ...took } };
      if (problems[0] === 'unauthorized') return { status: 401, body: { message: 'Could not authenticate', ...took } };
      const errors = Object.fromEntries(problems.map((p) => [p.split(/[ :]/)[0]!, p]));
      return { status: 422, body: { message: 'Request body is not processable. Please check the errors.', errors, ...took } };
    },
    accept: (a) => {
      const close = CLOSE.exec(a.path);
      if (close) {
        const alias = decodeURIComponent(close[1]!);
        const alert = alerts.find((x) => x.alias === alias && x.status === 'open');
        if (alert) alert.status = 'closed';
      } else {
        const j = a.json as { message: string; alias?: string; priority?: string };
        const alias = j.alias ?? randomUUID();
        const same = alerts.find((x) => x.alias === alias && x.status === 'open');
        if (same) same.count++;
        else alerts.push({ alias, message: j.message, priority: j.priority ?? 'P3', status: 'open', count: 1 });
      }
      return { status: 202, body: { result: 'Request will be processed', took: 0.107, requestId: randomUUID() } };
    },
  });
  return Object.assign(fake, { url: fake.origin, alerts });
}
