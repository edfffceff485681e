/**
 * A Microsoft Teams Workflows webhook on loopback ("Post to a channel when a webhook
 * request is received"): a Power Automate HTTP trigger URL signed with `sig` in its query.
 * A wrong signature is Logic Apps' 401 `{"error":{"code":"AuthorizationFailed",…}}`, an
 * unknown flow 404 `{"error":{"code":"WorkflowNotFound",…}}`. The body must be a `message`
 * with one Adaptive Card attachment (contentType application/vnd.microsoft.card.adaptive,
 * content.type AdaptiveCard, a version, a body list) and at most 28 KB; else 400
 * `{"error":{"code":"TriggerInputSchemaMismatch",…}}`. Success is 202 with no body, as the
 * flow runs after it answers.
 */
import { startFake, type Arrival, type Fake } from './server.js';

export interface FakeTeams extends Fake {
  /** The webhook URL to configure (it holds the signature). */
  url: string;
  sig: string;
}

/** A text of a card as Teams shows it: TextRun text is literal; TextBlock text would be Markdown. */
export interface CardText {
  text: string;
  markdown: boolean;
}

/** Every text of the card of a request, in order. */
export function cardTexts(a: Arrival): CardText[] {
  const out: CardText[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (v === null || typeof v !== 'object') return;
    const o = v as Record<string, unknown>;
    if (o['type'] === 'TextRun' && typeof o['text'] === 'string') out.push({ text: o['text'], markdown: false });
    if (o['type'] === 'TextBlock' && typeof o['text'] === 'string') out.push({ text: o['text'], markdown: true });
    for (const [k, child] of Object.entries(o)) if (k !== 'text') walk(child);
  };
  walk(a.json);
  return out;
}

const PATH = /^\/workflows\/([a-z0-9]+)\/triggers\/manual\/paths\/invoke$/;
const ELEMENTS = new Set(['RichTextBlock', 'Container', 'TextBlock', 'FactSet', 'ColumnSet']);

/** Start a fake Workflows webhook. */
export async function fakeTeams(): Promise<FakeTeams> {
  const sig = 'q9pXrT3sKvW7mYbN2cLfH8dJ4gA6eZ1uVxRwSoPnMiQ';
  const flow = '4f1c2d8e9a7b';
  const logicError = (code: string, message: string) => ({ error: { code, message } });
  const check = (a: Arrival): string[] => {
    const m = PATH.exec(a.path);
    if (a.method !== 'POST' || !m || m[1] !== flow) return ['not found'];
    if (a.query.get('sig') !== sig || a.query.get('sp') === null || a.query.get('sv') === null) return ['unauthorized'];
    const p: string[] = [];
    if (Buffer.byteLength(a.body) > 28 * 1024) p.push(`the message is ${Buffer.byteLength(a.body)} bytes, more than 28 KB`);
    const j = a.json as { type?: unknown; attachments?: Array<{ contentType?: unknown; content?: { type?: unknown; version?: unknown; body?: unknown } }> } | undefined;
    if (!j || j.type !== 'message') return [...p, 'type must be "message"'];
    const att = j.attachments;
    if (!Array.isArray(att) || att.length !== 1) return [...p, 'attachments must hold one card'];
    const card = att[0]!;
    if (card.contentType !== 'application/vnd.microsoft.card.adaptive') p.push('contentType must be application/vnd.microsoft.card.adaptive');
    if (card.content?.type !== 'AdaptiveCard' || typeof card.content.version !== 'string') p.push('content must be an AdaptiveCard with a version');
    if (!Array.isArray(card.content?.body)) p.push('content.body must be a list');
    else for (const el of card.content.body as Array<{ type?: string }>) if (!ELEMENTS.has(String(el.type))) p.push(`unknown element ${String(el.type)}`);
    return p;
  };
  const fake = await startFake({
    check,
    refuse: (_a, problems) =>
      problems[0] === 'not found'
        ? { status: 404, body: logicError('WorkflowNotFound', `The workflow '${flow}' could not be found.`) }
        : problems[0] === 'unauthorized'
          ? { status: 401, body: logicError('AuthorizationFailed', 'The authentication credentials are not valid.') }
          : { status: 400, body: logicError('TriggerInputSchemaMismatch', problems.join('; ')) },
    accept: () => ({ status: 202 }),
  });
  const url = `${fake.origin}/workflows/${flow}/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=${sig}`;
  return Object.assign(fake, { url, sig });
}
