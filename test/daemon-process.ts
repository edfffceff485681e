/**
 * The daemon as a real process: the built CLI (`dist/src/cli.js`) started as a child, so
 * tests and the chaos suite can kill it, signal it and read what it printed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { clockRuleNames, merge } from './harness.js';
import { TEST_SECRET } from './receiver.js';
import { TRUTH_SOURCES } from './truth.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'src', 'cli.js');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : entry.name.endsWith('.ts') ? statSync(p).mtimeMs : 0);
  }
  return newest;
}

/** `npm test` builds first (pretest); a bare `npx vitest run` may find dist/ missing or stale. */
export function ensureBuilt(): void {
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= newestMtime(join(ROOT, 'src'))) return;
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  // tsc emits despite type errors; a type error elsewhere (bench/) is `npm run typecheck`'s to report.
  if (!existsSync(CLI) || statSync(CLI).mtimeMs < newestMtime(join(ROOT, 'src'))) {
    throw new Error(`build failed:\n${r.stdout}\n${r.stderr}`);
  }
}

/** A `hostwatch` child process and everything it printed. */
export interface Child {
  proc: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Every child started, so a test's cleanup can kill what is left (killAll). */
const children: Child[] = [];

/** Start the built CLI with `args` (and extra environment variables). */
export function startCli(args: string[], env: Record<string, string> = {}): Child {
  const proc = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  proc.stdout!.on('data', (b: Buffer) => output.push(b.toString()));
  proc.stderr!.on('data', (b: Buffer) => output.push(b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    proc.on('exit', (code, signal) => res({ code, signal })),
  );
  const child = { proc, output, exited };
  children.push(child);
  return child;
}

/** Run the CLI to completion; fail with its output if it does not exit 0 in time. */
export async function runCli(args: string[], timeoutMs = 20_000): Promise<void> {
  const child = startCli(args);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await child.exited;
  clearTimeout(timer);
  if (code !== 0) throw new Error(`hostwatch ${args.join(' ')} exited ${code ?? signal}:\n${child.output.join('')}`);
}

/** SIGKILL a child and wait for it to be gone; throws when it had already ended by itself. */
export async function kill(child: Child): Promise<void> {
  child.proc.kill('SIGKILL');
  const { code, signal } = await child.exited;
  if (signal !== 'SIGKILL') throw new Error(`hostwatch had already ended by itself (exit ${code ?? signal}) before SIGKILL:\n${child.output.join('')}`);
}

/** SIGKILL every child still running (a test's cleanup). */
export function killAll(): void {
  for (const c of children.splice(0)) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
}

/**
 * Write the config file of a daemon process that polls the simulator at `simUrl` and
 * delivers to the webhook at `hookUrl`, with its database in `dir` (or `storage`): the sources the ground
 * truth covers every 10 s (the shortest allowed), and the rules that read the clock off
 * (the simulator's clock stands still while the CLI reads the real one: to those rules days
 * would pass). `overrides` are deep-merged over it (lists replace).
 */
export function writeDaemonConfig(
  dir: string,
  o: { name: string; simUrl: string; key: string; hookUrl: string; storage?: { path: string } | { url: string }; overrides?: Record<string, unknown> },
): { configPath: string; dbPath: string } {
  const dbPath = join(dir, 'hostwatch.db');
  const configPath = join(dir, 'hostwatch.yaml');
  const quiet = join(dir, 'quiet.yaml');
  writeFileSync(quiet, stringify({ rules: clockRuleNames().map((name) => ({ name, enabled: false })) }));
  const base = {
    name: o.name,
    api: { base_url: o.simUrl, key: o.key, timeout: '5s', max_requests_per_second: 1000, max_concurrency: 2, retries: 1 },
    storage: o.storage ?? { path: dbPath },
    rules: [quiet],
    sources: Object.fromEntries(TRUTH_SOURCES.map((s) => [s, { every: '10s' }])),
    channels: [{ name: 'hooks', type: 'webhook', url: o.hookUrl, secret: TEST_SECRET, timeout: '5s' }],
    log: { level: 'info' },
  };
  writeFileSync(configPath, stringify(merge(base, o.overrides ?? {})));
  return { configPath, dbPath };
}
