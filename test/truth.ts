/**
 * Ground truth for delivery tests: the events PRODUCT.md's catalog calls for, read off the
 * simulator's own history (never from hostwatch), as "type subject status" triples.
 */
import type { HostwatchEvent } from '../src/events/types.js';
import type { HistoryEntry } from '../src/simulator/index.js';

/** The sources whose changes expectedFrom reads off the history. */
export const TRUTH_SOURCES: readonly string[] = ['sites', 'jobs', 'health', 'usage', 'backups'];

/** "type subject status" — what identifies an event to a person, independent of its id. */
export type Triple = string;
export const triple = (e: Pick<HostwatchEvent, 'type' | 'subject'> & { data: { status?: string } }): Triple =>
  `${e.type} ${e.subject} ${e.data.status ?? '-'}`;

/**
 * The events PRODUCT.md's catalog calls for, read off the simulator's history alone (not
 * from hostwatch): for each record, its state at the baseline against its state at the
 * next poll. Condition alerts fire when their condition starts to hold; change events when
 * a backup or job reaches a final state.
 */
export function expectedFrom(history: readonly HistoryEntry[]): Triple[] {
  const first = new Map<string, unknown>();
  const last = new Map<string, unknown>();
  const note = (key: string, before: unknown, after: unknown): void => {
    if (!first.has(key)) first.set(key, before);
    last.set(key, after);
  };
  for (const h of history) {
    const d = h.detail as Record<string, any>;
    if (h.kind === 'health_changed') note(`health ${h.site_id}`, d.before, d.after);
    else if (h.kind === 'usage_changed') note(`usage ${h.site_id}`, d.before, d.after);
    else if (h.kind === 'backup_added') note(`backup ${h.site_id} ${d.backup.id}`, null, d.backup.state);
    else if (h.kind === 'backup_state') note(`backup ${h.site_id} ${d.backup_id}`, d.before, d.after);
    else if (h.kind === 'job_added') note(`job ${d.job.id}`, null, d.job.state);
    else if (h.kind === 'job_state') note(`job ${d.job_id}`, d.before, d.after);
  }
  const out: Triple[] = [];
  const alert = (name: string, subject: string, was: boolean, is: boolean): void => {
    if (was !== is) out.push(`hostwatch.${name} ${subject} ${is ? 'firing' : 'resolved'}`);
  };
  for (const [key, after] of last) {
    const before = first.get(key);
    const [kind, a, b] = key.split(' ');
    if (kind === 'health') {
      const [x, y] = [before as any, after as any];
      alert('site.offline', `sites/${a}/health`, x.status === 'offline', y.status === 'offline');
      alert('site.slow', `sites/${a}/health`, x.status === 'slow', y.status === 'slow');
      alert('site.integrity_problems', `sites/${a}/health`, x.problems > 0, y.problems > 0);
    } else if (kind === 'usage') {
      const [x, y] = [before as any, after as any];
      alert('site.frozen', `sites/${a}/usage`, x.frozen, y.frozen);
      alert('usage.over_limit', `sites/${a}/usage`, x.over.length > 0, y.over.length > 0);
      alert('usage.disk_high', `sites/${a}/usage`, x.percent >= 90, y.percent >= 90);
    } else if (kind === 'backup') {
      const finals: Record<string, string> = { Ok: 'backup.completed', Error: 'backup.failed' };
      if (finals[after as string] && before !== after) out.push(`hostwatch.${finals[after as string]} sites/${a}/backups/${b} -`);
    } else if (kind === 'job') {
      const cls = (s: unknown): string | null => (['done', 'completed', 'succeeded', 'ok'].includes(s as string) ? 'job.completed' : ['failed', 'error'].includes(s as string) ? 'job.failed' : null);
      if (cls(after) && cls(before) !== cls(after)) out.push(`hostwatch.${cls(after)} jobs/${a} -`);
    }
  }
  return out.sort();
}
