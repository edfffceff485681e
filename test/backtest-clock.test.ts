/**
 * `rules backtest` between stored changes: an entity with a running alert timer is polled at
 * its source's interval, and a clock rule of its source is evaluated at its `every`. The
 * clock rule's turns are not polls: a `for` timer is judged at the polls only, as the daemon
 * judges it.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SOURCE_NAMES } from '../src/sources/registry.js';
import { backtest } from '../src/rules/backtest.js';
import { loadRules } from '../src/rules/parse.js';
import type { ChangeLogRow } from '../src/store/history-repo.js';

const MIN = 60_000;
let dir: string | null = null;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = null;
});

function rules(text: string) {
  dir = mkdtempSync(join(tmpdir(), 'hostwatch-bt-'));
  const file = join(dir, 'mine.yaml');
  writeFileSync(file, text);
  // Only the user's file: the built-in folder is an empty one.
  mkdirSync(join(dir, 'builtin'));
  return loadRules(join(dir, 'builtin'), [file], { sourceNames: SOURCE_NAMES, cwd: dir });
}

const health = (status: string) => JSON.stringify({ site_id: 1, online: { status, label: status }, integrity: { status: 'ok', problems: 0 } });

describe('rules backtest between changes', () => {
  it('fires a for: timer at a poll of the source, not at a clock rule\'s turn in between', async () => {
    const compiled = rules(
      [
        'rules:',
        '  - { name: down, event: site.down, kind: alert, source: health, when: "after.online.status == \'offline\'", for: 7m, summary: down }',
        // A clock rule of the same source, evaluated every minute (never true here).
        '  - { name: ancient, event: site.ancient, kind: alert, source: health, when: "now < timestamp(\'2000-01-01T00:00:00Z\')", every: 1m, summary: old }',
        '',
      ].join('\n'),
    );
    const t0 = Date.parse('2026-11-01T00:00:00Z');
    const rows: ChangeLogRow[] = [
      { source: 'health', entity: 'sites/1/health', site_id: 1, version: 1, at: t0, body: health('online') },
      { source: 'health', entity: 'sites/1/health', site_id: 1, version: 2, at: t0 + 60 * MIN, body: health('offline') },
    ];
    const r = await backtest(rows, { rules: compiled, router: () => ['ops'], since: t0, now: t0 + 90 * MIN, everyMs: () => 5 * MIN });
    const fired = r.events.filter((e) => e.event.data.status === 'firing');
    // Polls every 5 minutes after the change: pending from 60 min, the poll at 70 min is the first 7 minutes on.
    expect(fired.map((e) => (Date.parse(e.event.time) - t0) / MIN)).toEqual([70]);
    expect(fired[0]!.event.data.rule).toBe('down');
  });
});
