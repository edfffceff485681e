import type { Template } from 'liquidjs';
import type { HostwatchEvent } from '../events/types.js';
import { isRecord } from '../is-record.js';
import { liquid, liquidTemplates } from '../rules/parse.js';

/**
 * Channel templates (docs/channels.md#templates): a chat channel's `template:` (the text
 * shown for each event) and a webhook's `template:` body and headers. They use the rules'
 * Liquid engine: strict variables and filters, bounded. `hostwatch check` finds an unknown
 * variable before the daemon runs (checkTemplate), so a template cannot fail later on a
 * typo; the few things only an event can show (a label it lacks) fall back to the summary.
 */

/** What a template sees at the top level: the CloudEvent's attributes and its data. */
export const TEMPLATE_ROOTS = ['id', 'type', 'source', 'subject', 'time', 'specversion', 'datacontenttype', 'data'] as const;

/**
 * The `data` fields a template may name: the ones every event has (docs/events.md) and
 * the ones some events have (absent ones are null, so a template may test them with if).
 */
export const TEMPLATE_DATA_FIELDS = [
  'name', 'severity', 'status', 'summary', 'site_id', 'domain', 'changes', 'rule', 'observed_at',
  'labels', 'description', 'repeat', 'alert_id', 'shadow',
  'channel', 'reason', 'source', 'failing', 'last_error', 'required',
] as const;

const ROOTS: ReadonlySet<string> = new Set(TEMPLATE_ROOTS);
const DATA_FIELDS: ReadonlySet<string> = new Set(TEMPLATE_DATA_FIELDS);

/**
 * Every problem of a template text, as messages: Liquid syntax, unknown filters, and
 * variables that no event has (with the line and column inside the template). Empty: fine.
 */
export function checkTemplate(text: string): string[] {
  let parsed: Template[];
  try {
    parsed = liquid.parse(text);
  } catch (e) {
    return [`is not a valid Liquid template: ${(e as Error).message}`];
  }
  const problems: string[] = [];
  const analysis = liquid.analyzeSync(parsed, { partials: false });
  for (const variables of Object.values(analysis.globals)) {
    for (const v of variables) {
      const [root, field] = v.segments;
      const at = `line ${v.location.row}, column ${v.location.col} of the template`;
      if (!ROOTS.has(String(root))) {
        problems.push(`unknown variable "${String(v)}" (${at}); a template can use ${TEMPLATE_ROOTS.join(', ')}`);
      } else if (root === 'data' && typeof field === 'string' && !DATA_FIELDS.has(field)) {
        problems.push(`unknown variable "${String(v)}" (${at}); data has ${TEMPLATE_DATA_FIELDS.join(', ')}`);
      }
    }
  }
  return problems;
}

/** API text as it can come: with a quote, a backslash and a line break (what `| json` escapes). */
const AWKWARD = 'a "quoted" word, a back\\slash\nand a line break';

/**
 * An event whose texts that can come from the API (summary, domain, subject, description,
 * an error's text) are AWKWARD, to try a JSON body with (jsonBodyProblem); the rest (ids,
 * names hostwatch gives, times) are as hostwatch writes them, which never need escaping.
 */
function awkwardEvent(): HostwatchEvent {
  const data: Record<string, unknown> = Object.fromEntries(TEMPLATE_DATA_FIELDS.map((f) => [f, null]));
  Object.assign(data, {
    name: 'site.offline', severity: 'critical', status: 'firing', summary: AWKWARD, site_id: 1, domain: AWKWARD, changes: [],
    rule: 'site-offline', observed_at: '2026-11-28T00:00:00.000Z', labels: {}, description: AWKWARD, repeat: 1,
    alert_id: '5f0c6a8e-2b1d-4c3e-9f7a-1e2d3c4b5a69', shadow: false, channel: 'ops', reason: AWKWARD, source: 'health',
    failing: 1, last_error: AWKWARD, required: 'sites:read',
  });
  return {
    specversion: '1.0',
    id: '5f0c6a8e-2b1d-4c3e-9f7a-1e2d3c4b5a69',
    source: 'hostwatch://hostwatch',
    type: 'hostwatch.site.offline',
    subject: `sites/1/${AWKWARD}`,
    time: '2026-11-28T00:00:00.000Z',
    datacontenttype: 'application/json',
    data: data as unknown as HostwatchEvent['data'],
  };
}

/**
 * Why a webhook body template sent as JSON would not be JSON for some events: a value put in
 * quotes by hand (`"{{ data.summary }}"`) breaks, or adds fields, when API text holds a quote,
 * a backslash or a line break; `{{ data.summary | json }}` escapes it. Null when the body is
 * JSON for such an event, or when only a real event can tell (a label it names).
 */
export function jsonBodyProblem(text: string): string | null {
  let rendered: string;
  try {
    rendered = renderTemplate(liquid.parse(text), awkwardEvent());
  } catch {
    return null;
  }
  try {
    JSON.parse(rendered);
    return null;
  } catch {
    return 'is not JSON for an event whose text holds a quote, a backslash or a line break (API text can): put a value in with | json, like {{ data.summary | json }}, not in quotes "{{ data.summary }}"; or set content_type if the body is not JSON';
  }
}

/** Parse a template that checkTemplate accepted (config validation ran before). */
export function compileTemplate(text: string): Template[] {
  return liquid.parse(text);
}

/** What a template sees of an event: the envelope, and data with every known field present. */
function scopeOf(e: HostwatchEvent): Record<string, unknown> {
  const data: Record<string, unknown> = Object.fromEntries(TEMPLATE_DATA_FIELDS.map((f) => [f, null]));
  Object.assign(data, e.data);
  if (!isRecord(data['labels'])) data['labels'] = {};
  return { ...e, data };
}

/**
 * Render a template for an event; throws on what only this event can show wrong (a missing
 * label). Through the rules' fast path where the template allows it: the same text.
 */
export function renderTemplate(template: Template[], e: HostwatchEvent): string {
  return liquidTemplates.render(template, scopeOf(e));
}

/**
 * The text of an event through a channel's template. A render error must not lose the
 * message: the event's summary is shown instead and `onError` is told (the daemon logs it).
 */
export function templateText(template: Template[], onError: (message: string, e: HostwatchEvent) => void = () => undefined): (e: HostwatchEvent) => string {
  // A message renders an event more than once (its headline, its body): one warning each.
  // By id, since each attempt reads the event again; the last few ids are enough.
  const told: string[] = [];
  return (e) => {
    try {
      return renderTemplate(template, e).trim();
    } catch (err) {
      if (!told.includes(e.id)) {
        onError((err as Error).message, e);
        told.push(e.id);
        if (told.length > 64) told.shift();
      }
      return e.data.summary;
    }
  };
}
