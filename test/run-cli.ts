import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** The built CLI (`npm test` builds first). */
export const CLI = join(process.cwd(), 'dist/src/cli.js');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `hostwatch ARGS` as a user would and collect its output and exit code. `env` is added
 * to this process's environment; `unset` names variables taken out of it.
 */
export function hostwatch(
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string; unset?: readonly string[]; /** The reader of stdout goes away at once (`| head -0`). */ closedStdout?: boolean } = {},
): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...opts.env };
  for (const name of opts.unset ?? []) delete env[name];
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: opts.cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    if (opts.closedStdout) child.stdout.destroy();
    else child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `hostwatch ARGS…` with `env` added to this process's environment. */
export function hostwatchWithEnv(args: string[], env: Record<string, string>): Promise<CliRun> {
  return hostwatch(args, { env });
}
