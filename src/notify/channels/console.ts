import type { ConsoleChannelConfig } from '../../config/types.js';
import { oneLine } from './render.js';
import type { HostwatchEvent } from '../../events/types.js';
import type { Channel, SendResult } from '../channel.js';

const ICON: Record<string, string> = { critical: '🔴', warning: '🟠', info: '🔵' };

/** One readable line for an event (used by the console channel and the demo). */
export function formatEventLine(e: HostwatchEvent): string {
  const status = e.data.status === 'resolved' ? '✅ resolved' : e.data.status === 'firing' ? 'FIRING' : 'change';
  const icon = e.data.status === 'resolved' ? '🟢' : (ICON[e.data.severity] ?? '•');
  // API text is untrusted: control characters and bidi overrides become spaces, so it can
  // neither rewrite the terminal nor make the line read in another order (`hostwatch events`
  // too). So is a subject, made of API text too (a review's URL).
  const summary = oneLine(e.data.summary);
  return `${icon} ${e.data.name.padEnd(24)} ${status.padEnd(10)} ${summary}  [${oneLine(e.subject)}]`;
}

/** Prints events to a writer (stdout by default): the demo's channel, and handy for trying rules. */
export class ConsoleChannel implements Channel {
  readonly type = 'console';
  readonly name: string;

  constructor(
    cfg: ConsoleChannelConfig,
    private readonly write: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
  ) {
    this.name = cfg.name;
  }

  /** Print the event; always succeeds. */
  async send(event: HostwatchEvent): Promise<SendResult> {
    this.write(formatEventLine(event));
    return { ok: true, statusCode: null };
  }
}
