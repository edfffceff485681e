/**
 * One daemon per SQLite file, with real processes: the built CLI as a user runs it. A second
 * daemon on a file a running daemon uses refuses to start, within seconds, naming the file
 * and the other's pid; the lock dies with its process (SIGKILL leaves no stale lock); the
 * read-only commands, and the small writes the CLI makes, work beside a running daemon.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { lockDatabase } from '../src/store/sqlite-lock.js';
import { startWorld, TEST_KEY, type World } from './harness.js';
import { startReceiver, TEST_SECRET, waitFor, type Receiver } from './receiver.js';
import { CLI, hostwatch } from './run-cli.js';

let w: World;
let hook: Receiver;
let config: string;
let env: Record<string, string>;
const children: ChildProcess[] = [];

interface Daemon {
  proc: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** `hostwatch ARGS…` in the background. */
function start(args: string[]): Daemon {
  const proc = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return { proc, output: () => out, exited };
}

/** A daemon that has opened its database and started (its lock is held from then on). */
async function running(): Promise<Daemon> {
  const d = start(['run', '-c', config]);
  await waitFor(() => d.output().includes('hostwatch started') || d.proc.exitCode !== null, 'the daemon to start', 15_000);
  expect(d.proc.exitCode, d.output()).toBeNull();
  return d;
}

async function stop(d: Daemon, signal: NodeJS.Signals): Promise<void> {
  d.proc.kill(signal);
  await d.exited;
}

beforeAll(async () => {
  w = await startWorld({ sim: { sites: 3 } });
  hook = await startReceiver({ secret: TEST_SECRET });
  // A history to read: one event, delivered.
  const app = await w.app({ channels: [{ name: 'hooks', type: 'webhook', url: hook.url, secret: TEST_SECRET }] });
  await app.runOnce();
  w.sim.world.setHealth(1, { status: 'offline' });
  await app.runOnce();
  await app.stop();
  config = join(w.dir, 'config.yaml');
  writeFileSync(config, w.yaml({ channels: [{ name: 'hooks', type: 'webhook', url: '${HOOK}', secret: TEST_SECRET }] }));
  env = { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath, HOOK: hook.url };
}, 60_000);

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

afterAll(async () => {
  await hook?.close();
  await w?.close();
});

describe('a second daemon on a SQLite file in use', () => {
  it('refuses to start within seconds, naming the file and the running daemon\'s pid, and sends nothing', async () => {
    const first = await running();
    const sent = hook.requests.length;
    const t0 = Date.now();
    const second = await hostwatch(['run', '-c', config], { env });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(w.dbPath);
    expect(second.stderr).toContain(`pid ${first.proc.pid}`);
    expect(second.stderr).toMatch(/in use by another hostwatch daemon/);
    // `poll --once` is a daemon too: it would deliver what the running one delivers.
    const once = await hostwatch(['poll', '--once', '-c', config], { env });
    expect(once.code).toBe(1);
    expect(once.stderr).toContain(`pid ${first.proc.pid}`);
    expect(hook.requests.length).toBe(sent);
    await stop(first, 'SIGTERM');
    // Stopped cleanly: the next one starts.
    const next = await running();
    await stop(next, 'SIGTERM');
  }, 60_000);

  it('is free again the moment the holder is killed with SIGKILL: no stale lock', async () => {
    const first = await running();
    await stop(first, 'SIGKILL');
    const after = await running();
    expect(after.output()).not.toMatch(/in use/);
    await stop(after, 'SIGTERM');
    expect(await after.exited).toBe(0);
  }, 60_000);

  it('goes to exactly one of two daemons started at the same moment; the other names the winner', async () => {
    const a = start(['run', '-c', config]);
    const b = start(['run', '-c', config]);
    const loser = await Promise.race([a.exited.then(() => a), b.exited.then(() => b)]);
    const winner = loser === a ? b : a;
    expect(await loser.exited).toBe(1);
    expect(loser.output()).toContain(`pid ${winner.proc.pid}`);
    await waitFor(() => winner.output().includes('hostwatch started'), 'the winner to start', 15_000);
    expect(winner.proc.exitCode).toBeNull();
    await stop(winner, 'SIGTERM');
  }, 60_000);
});

describe('beside a running daemon', () => {
  it('the read-only commands work: events, explain, deliveries, silence list, rules backtest', async () => {
    const d = await running();
    const id = (await w.query<{ id: string }>('SELECT id FROM events'))[0]!.id;
    for (const args of [
      ['events', '--json'],
      ['explain', id],
      ['deliveries'],
      ['silence', 'list'],
      ['rules', 'backtest', '--since', '1d'],
    ]) {
      const r = await hostwatch([...args, '-c', config], { env });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stderr).not.toMatch(/in use|cannot open/);
    }
    expect((await hostwatch(['events', '--json', '-c', config], { env })).stdout).toContain(id);
    // And the CLI's small writes, which the daemon reads at its next commit.
    const add = await hostwatch(['silence', 'add', '--match', 'site_id == 2', '--for', '1h', '--comment', 'beside', '-c', config], { env });
    expect(add.code, add.stderr).toBe(0);
    expect(await w.query('SELECT comment FROM silences')).toEqual([{ comment: 'beside' }]);
    expect(d.proc.exitCode).toBeNull();
    await stop(d, 'SIGTERM');
  }, 60_000);
});

describe('the lock file itself', () => {
  it('names its holder; a second taker in the same process is refused until the first releases', () => {
    const path = join(w.dir, 'lock-only.db');
    const first = lockDatabase(path, () => 5, 4242);
    expect(() => lockDatabase(path, () => 6, 4343)).toThrow(/pid 4242 on .*, running since 1970-01-01T00:00:00.005Z/);
    first.release();
    const second = lockDatabase(path, () => 7, 4343);
    second.release();
  });
});
