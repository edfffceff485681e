import type { TeamsChannelConfig } from '../../config/types.js';
import type { HostwatchEvent } from '../../events/types.js';
import { detailOf, retryAfterHeader, standardVerdict, type HttpAnswer, type Provider } from './http.js';
import { escapedCut, fitting, moreLine, renderItem, subjectOf, summaryText, type ItemText, type RenderedItem } from './render.js';

/**
 * Microsoft Teams through a Workflows webhook ("Post to a channel when a webhook request is
 * received"), the replacement of the retired Office 365 connectors: a `message` whose one
 * attachment is an Adaptive Card. Every API text sits in a TextRun of a RichTextBlock,
 * where Adaptive Cards render no Markdown at all, so nothing in it becomes a link, a
 * mention or formatting (docs/channels.md).
 */

/** Teams refuses messages over about 28 KB; the card is kept under this many bytes of JSON. */
export const TEAMS_MAX_BYTES = 27_000;
/** A webhook is throttled past a few requests a second; one message a second per webhook. */
export const TEAMS_MIN_INTERVAL_MS = 1000;
/** The longest text of one event shown (its place, and its summary or template text). */
const WHERE_MAX = 300;
const TEXT_MAX = 2000;

type TextRun = { type: 'TextRun'; text: string; weight?: 'Bolder'; size?: 'Small' | 'Medium'; isSubtle?: boolean };
type RichText = { type: 'RichTextBlock'; inlines: TextRun[] };
type Container = { type: 'Container'; style: string; items: RichText[] };

/**
 * Literal text for a TextRun: no Markdown is rendered there, but Adaptive Cards still read
 * `{{DATE(...)}}` / `{{TIME(...)}}`; an invisible zero-width space after every `{` keeps an
 * API text that spells one from being rewritten.
 */
export function teamsLiteral(char: string): string {
  return char === '{' ? '{\u200B' : char;
}

function run(text: string, style: Omit<TextRun, 'type' | 'text'> = {}): TextRun {
  return { type: 'TextRun', text, ...style };
}

function rich(...inlines: TextRun[]): RichText {
  return { type: 'RichTextBlock', inlines };
}

const STYLE: Record<string, string> = { critical: 'attention', warning: 'warning', info: 'accent' };

function container(i: RenderedItem, resolved: boolean): Container {
  return {
    type: 'Container',
    style: resolved ? 'good' : (STYLE[i.severity] ?? 'default'),
    items: [
      rich(run(`${i.icon} ${i.title}`, { weight: 'Bolder' }), run(`  ·  ${escapedCut(i.where, WHERE_MAX, teamsLiteral)}`)),
      rich(run(escapedCut(i.summary, TEXT_MAX, teamsLiteral))),
      rich(run(i.time, { size: 'Small', isSubtle: true })),
    ],
  };
}

/** The Workflows payload for a group of events: a heading, one container per event that fits in 28 KB, and a "more" line. */
export function teamsMessage(events: readonly HostwatchEvent[], text: ItemText = summaryText) {
  const heading = rich(run(`hostwatch: ${escapedCut(subjectOf(events, text).replace(/^\[hostwatch\] /, ''), 400, teamsLiteral)}`, { weight: 'Bolder', size: 'Medium' }));
  const boxes = events.map((e) => container(renderItem(e, text), e.data.status === 'resolved'));
  const card = (body: Array<RichText | Container>) => ({
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: { $schema: 'http://adaptivecards.io/schemas/adaptive-card.json', type: 'AdaptiveCard', version: '1.4', msteams: { width: 'Full' }, body },
      },
    ],
  });
  const base = Buffer.byteLength(JSON.stringify(card([heading])));
  const sizes = boxes.map((b) => Buffer.byteLength(JSON.stringify(b)) + 1);
  const shown = fitting(sizes, TEAMS_MAX_BYTES - base, 200);
  const body: Array<RichText | Container> = [heading, ...boxes.slice(0, shown)];
  if (shown < boxes.length) body.push(rich(run(moreLine(boxes.length - shown), { isSubtle: true })));
  return card(body);
}

/**
 * What a Workflows webhook's answer means. Its errors are Logic Apps' `{"error": {"code",
 * "message"}}`: a bad signature (401/403) or a deleted flow (404) will never take a
 * message, so they disable the channel; a refused card (400) is dead-lettered; 429 and 5xx
 * are retried after Retry-After.
 */
export function judgeTeams(answer: HttpAnswer, now: number) {
  const detail = detailOf(answer.body, (j) => {
    const err = j['error'] as { code?: unknown; message?: unknown } | undefined;
    if (!err || typeof err !== 'object') return null;
    return [err.code, err.message].filter((x) => typeof x === 'string').join(': ') || null;
  });
  return standardVerdict(answer.status, detail, retryAfterHeader(answer, now), [401, 403, 404, 410]);
}

/** The Teams provider for a channel. */
export function teamsProvider(cfg: TeamsChannelConfig, text: ItemText = summaryText): Provider {
  return {
    label: 'Teams',
    groups: true,
    minIntervalMs: TEAMS_MIN_INTERVAL_MS,
    request: (events) => ({ url: cfg.url, headers: { 'content-type': 'application/json' }, body: JSON.stringify(teamsMessage(events, text)) }),
    judge: judgeTeams,
  };
}

