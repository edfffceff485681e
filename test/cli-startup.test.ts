import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from './harness.js';
import { CLI } from './run-cli.js';

const REGISTER = pathToFileURL(join(process.cwd(), 'test/fixtures/loads/register.mjs')).href;

const cleanups: (() => void)[] = [];
afterEach(() => cleanups.splice(0).forEach((c) => c()));

function dir(): string {
  const t = tempDir();
  cleanups.push(t.cleanup);
  return t.dir;
}

/** Run `hostwatch ARGS` and list the npm packages it loaded (by their folder under node_modules). */
function packagesLoaded(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; packages: string[] }> {
  const file = join(dir(), 'loads.txt');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', REGISTER, CLI, ...args], {
      env: { ...process.env, ...env, HOSTWATCH_LOADS_FILE: file },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.on('close', (code) => {
      const urls = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
      const packages = new Set<string>();
      for (const u of urls) {
        const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u);
        if (m) packages.add(m[1]!);
      }
      resolve({ code, stdout, packages: [...packages].sort() });
    });
  });
}

describe('what a command loads at start', () => {
  it('--version loads no package but the argument parser', async () => {
    const r = await packagesLoaded(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(r.packages).toEqual(['commander']);
  });

  it('check loads the config and rule parsers but no database driver, query builder, HTTP client, logger or metrics', async () => {
    const folder = dir();
    const config = join(folder, 'hostwatch.yaml');
    writeFileSync(config, `api:\n  base_url: http://127.0.0.1:9\n  key: \${HW_KEY}\nstorage:\n  path: ${join(folder, 'hw.db')}\n`);
    const r = await packagesLoaded(['check', '-c', config], { HW_KEY: 'k' });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(': OK (');
    // The parsers `check` needs: the loader hook sees them, so an empty list would not pass.
    expect(r.packages).toEqual(expect.arrayContaining(['yaml', 'zod', '@bufbuild/cel']));
    for (const heavy of ['better-sqlite3', 'pg', 'kysely', 'undici', 'nodemailer', 'pino', 'prom-client']) expect(r.packages).not.toContain(heavy);
  });
});
