/**
 * Before the chaos run: build (the scenarios run the real CLI) and forget the last run's
 * figures. After it: print every scenario's figures and write dist/chaos-results.json.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { machine } from '../bench/common.js';
import { packageRoot } from '../src/paths.js';
import { ensureBuilt } from '../test/daemon-process.js';
import { limits, RESULTS_LINES, type Figure } from './figures.js';

const started = Date.now();

/** vitest globalSetup: runs once before every scenario file. */
export function setup(): void {
  ensureBuilt();
  rmSync(RESULTS_LINES, { force: true });
}

/** vitest globalSetup teardown: the report. */
export function teardown(): void {
  const lines = existsSync(RESULTS_LINES) ? readFileSync(RESULTS_LINES, 'utf8').split('\n').filter(Boolean) : [];
  const scenarios = lines.map((l) => JSON.parse(l) as { scenario: string; figures: Record<string, Figure> });
  const out: string[] = [`\nhostwatch chaos run — seed ${limits.seed}, ${((Date.now() - started) / 1000).toFixed(0)} s`];
  for (const s of scenarios) {
    out.push(`\n${s.scenario}`);
    for (const [k, v] of Object.entries(s.figures)) out.push(`  ${k.padEnd(44)} ${String(v)}`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
  writeFileSync(
    join(packageRoot(), 'dist', 'chaos-results.json'),
    `${JSON.stringify({ command: 'npm run chaos', date: new Date().toISOString(), machine: machine(), limits, durationS: Math.round((Date.now() - started) / 1000), scenarios }, null, 2)}\n`,
  );
}
