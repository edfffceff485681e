import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** The built CLI (`npm test` builds first). */
export const CLI = join(process.cwd(), 'dist/src/cli.js');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `hostwatch ARGS` as a user would and collect its output and exit code. */
export function hostwatch(args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
