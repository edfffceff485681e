import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | null = null;

/**
 * The folder holding package.json, migrations/ and rules/. Found by walking up, because
 * the same module runs from src/ under vitest and from dist/src/ when built.
 */
export function packageRoot(): string {
  if (root) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'migrations'))) return (root = dir);
    const up = dirname(dir);
    if (up === dir) throw new Error('hostwatch: cannot find the package folder (package.json with migrations/)');
    dir = up;
  }
}

/** The version in package.json (`hostwatch --version`, `hostwatch_build_info`). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
