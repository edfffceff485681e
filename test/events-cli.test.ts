/**
 * `hostwatch events`: the built CLI, run as a user would, reading the event log of a
 * database a daemon (stopped by then) wrote. No API calls, no daemon.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostwatchEvent } from '../src/events/types.js';
import { formatEventLine } from '../src/notify/channels/console.js';
import { startWorld, TEST_KEY, type World } from './harness.js';

const CLI = join(process.cwd(), 'dist/src/cli.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let w: World;
let config: string;
let env: Record<string, string>;

function hostwatch(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const lines = (text: string): string[] => text.split('\n').filter(Boolean);

beforeAll(async () => {
  w = await startWorld({ sim: { sites: 3 } });
  const app = await w.app();
  await app.runOnce();
  w.sim.world.setHealth(1, { status: 'offline' });
  w.sim.world.setHealth(2, { status: 'slow' });
  await app.runOnce();
  w.sim.world.setHealth(1, { status: 'online' });
  await app.runOnce();
  await app.stop();
  config = join(w.dir, 'config.yaml');
  writeFileSync(config, w.yaml());
  env = { SIM_URL: w.sim.url, API_KEY: TEST_KEY, DB: w.dbPath };
  // The simulator stays up only so the config's URL is real; the command must not call it.
  w.sim.requests.length = 0;
});

afterAll(async () => {
  await w.close();
});

describe('hostwatch events', () => {
  it('prints one readable line per event, oldest first, with its time, and calls no API', async () => {
    expect(w.events.length).toBe(3);
    const r = await hostwatch(['events', '-c', config]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toEqual(w.events.map((e) => `${e.time}  ${formatEventLine(e)}`));
    expect(w.sim.requests).toEqual([]);
  });

  it('prints each event as CloudEvent JSON on its own line with --json', async () => {
    const r = await hostwatch(['events', '-c', config, '--json']);
    expect(r.code).toBe(0);
    const parsed = lines(r.stdout).map((l) => JSON.parse(l) as HostwatchEvent);
    expect(parsed.map((e) => e.id)).toEqual(w.events.map((e) => e.id));
    expect(parsed).toEqual(w.events);
  });

  it('filters by type and age, and keeps the newest with --limit', async () => {
    const [slow, offline, limited] = await Promise.all([
      hostwatch(['events', '-c', config, '--json', '--type', 'site.slow']),
      hostwatch(['events', '-c', config, '--json', '--type', 'hostwatch.site.offline', '--since', '1h']),
      hostwatch(['events', '-c', config, '--json', '--limit', '2']),
    ]);
    expect(lines(slow.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).type)).toEqual(['hostwatch.site.slow']);
    expect(lines(offline.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).data.status)).toEqual(['firing', 'resolved']);
    expect(lines(limited.stdout).map((l) => (JSON.parse(l) as HostwatchEvent).id)).toEqual(w.events.slice(-2).map((e) => e.id));
    expect(limited.stderr).toBe('(the newest 2 shown; --limit N shows more)\n');
  });

  it('exits 2 with a clear message on a bad --since, --type or --limit', async () => {
    const [since, type, limit] = await Promise.all([
      hostwatch(['events', '-c', config, '--since', 'an hour']),
      hostwatch(['events', '-c', config, '--type', 'Offline!']),
      hostwatch(['events', '-c', config, '--limit', '0']),
    ]);
    expect(since.code).toBe(2);
    expect(since.stderr).toContain("option '--since <duration>' argument 'an hour' is invalid. expected a duration like 30m, 1h, 2d or 1h30m");
    expect(type.code).toBe(2);
    expect(type.stderr).toContain('expected an event type like site.offline or hostwatch.site.offline');
    expect(limit.code).toBe(2);
    expect(limit.stderr).toContain('must be a whole number ≥ 1');
  });

  it('says which database it cannot open', async () => {
    const missing = join(w.dir, 'missing.yaml');
    writeFileSync(missing, w.yaml({ storage: { path: join(w.dir, 'nowhere', 'none.db') } }));
    const r = await hostwatch(['events', '-c', missing]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^hostwatch events: cannot open the SQLite database .*none\.db: /);
  });
});
