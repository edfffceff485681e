/** Run the built CLI as a user would, with extra environment variables. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

export const CLI = join(process.cwd(), 'dist/src/cli.js');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `hostwatch ARGS…` with `env` added to this process's environment. */
export function hostwatch(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
