import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { configFrom, tempDir } from './harness.js';
import { createApp } from '../src/main.js';

const CLI = join(process.cwd(), 'dist/src/cli.js');

function scopes(yaml: string, ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const { dir, cleanup } = tempDir();
  try {
    const file = join(dir, 'config.yaml');
    writeFileSync(file, yaml);
    const r = spawnSync(process.execPath, [CLI, 'scopes', '-c', file, ...args], { encoding: 'utf8' });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    cleanup();
  }
}

const BASE = 'api: { base_url: https://panel.example.com, key: k }\n';

describe('hostwatch scopes -c FILE', () => {
  it('prints one read scope per line for every enabled source, sorted, and nothing else', () => {
    const r = scopes(BASE);
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'account:read', 'aivis:read', 'archive:read', 'backups:read', 'botcheck:read', 'competitors:read', 'cron:read', 'dns:read',
      'extradb:read', 'footprint:read', 'local:read', 'rank:read', 'reports:read', 'reputation:read', 'research:read', 'security:read',
      'sites:read', 'updates:read',
    ]);
  });

  it('leaves out the scopes of disabled sources and adds files:read only when paths are watched', () => {
    const off = ['rank', 'rank_domains', 'reputation', 'reputation_businesses', 'cron_list'].map((n) => `  ${n}: { enabled: false }`).join('\n');
    const r = scopes(`${BASE}sources:\n${off}\n  files: { paths: [.htaccess] }\n`);
    const lines = r.stdout.trim().split('\n');
    expect(lines).not.toContain('rank:read');
    expect(lines).not.toContain('reputation:read');
    expect(lines).not.toContain('cron:read');
    expect(lines).toContain('files:read');
  });

  it('with --why, names the sources that need each scope', () => {
    const r = scopes(BASE, '--why');
    expect(r.stdout).toMatch(/^cron:read +cron_list, cron_jobs, cron_runs$/m);
    expect(r.stdout).toMatch(/^dns:read +dns, dns_publishing, nameservers$/m);
  });

  it('exits 2 with the config error on a bad config', () => {
    const r = scopes('api: { base_url: nope, key: k }\n');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('api.base_url: must be an http(s) URL');
  });
});

describe('a key with exactly the printed scopes', () => {
  let sim: Simulator | undefined;
  afterEach(async () => {
    await sim?.close();
  });

  it('lets a full cycle run without a single scope_missing', async () => {
    const r = scopes(BASE);
    const printed = r.stdout.trim().split('\n');
    sim = await startSimulator({ sites: 2, keys: { 'scoped-key': printed } });
    const { dir, cleanup } = tempDir();
    try {
      const config = configFrom(`api: { base_url: ${sim.url}, key: scoped-key, max_requests_per_second: 1000, retries: 0 }\nstorage: { path: ${join(dir, 'db.sqlite')} }\n`, {}, dir);
      const app = await createApp(config, { logDestination: { write: () => true } as unknown as NodeJS.WritableStream });
      const cycles = await app.scheduler.runAll();
      await app.stop();
      const missing = cycles.flatMap((c) => c.outcomes).filter((o) => o.error?.code === 'scope_missing');
      expect(missing).toEqual([]);
    } finally {
      cleanup();
    }
  });
});
