import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { tempDir } from './harness.js';
import { startReceiver, TEST_SECRET } from './receiver.js';

const CLI = join(process.cwd(), 'dist/src/cli.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run the built CLI as a user would, with an optional signal after a delay. */
function hostwatch(args: string[], opts: { env?: Record<string, string>; signalOn?: string; signals?: NodeJS.Signals[]; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: opts.cwd,
      env: { ...process.env, ...opts.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    // Signal once the process says it is running (its log, on stderr), not after a guessed delay.
    const watch = (): void => {
      if (opts.signalOn !== undefined && !signalled && stderr.includes(opts.signalOn)) {
        signalled = true;
        // Each signal 300 ms after the one before (default: SIGTERM alone).
        (opts.signals ?? ['SIGTERM']).forEach((signal, i) => setTimeout(() => child.kill(signal), i * 300));
      }
    };
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      watch();
    });
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

let tmp: { dir: string; cleanup: () => void };
let sim: Simulator | undefined;
beforeEach(() => {
  tmp = tempDir();
});
afterEach(async () => {
  await sim?.close();
  sim = undefined;
  tmp.cleanup();
});

function write(name: string, text: string): string {
  const file = join(tmp.dir, name);
  writeFileSync(file, text);
  return file;
}

function validConfig(url: string, extra = ''): string {
  return `api:\n  base_url: ${url}\n  key: \${HW_KEY}\n  max_requests_per_second: 500\nstorage:\n  path: ./state.db\n${extra}`;
}

describe('hostwatch check', () => {
  it('says OK for a valid config and exits 0', async () => {
    const file = write('config.yaml', validConfig('http://127.0.0.1:9'));
    const r = await hostwatch(['check', '-c', file], { env: { HW_KEY: 'k-123456' } });
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/config\.yaml: OK \(\d+ rules, 0 channels\)/);
    expect(r.code).toBe(0);
  });

  it('accepts the shipped config.example.yaml', async () => {
    const r = await hostwatch(['check', '-c', 'config.example.yaml'], {
      env: { HOSTWATCH_API_KEY: 'k-123456', WEBHOOK_SECRET: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=', HOSTWATCH_TOKEN: 't-123456' },
    });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('prints every config error at once with file, line and key, and exits 2', async () => {
    const file = write(
      'config.yaml',
      'api:\n  base_url: ftp://nope\n  key: k-123456\n  timeout: soon\nlog:\n  levle: debug\n',
    );
    const r = await hostwatch(['check', '-c', file]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/config\.yaml:2:\d+: api\.base_url: /);
    expect(lines[1]).toMatch(/config\.yaml:4:\d+: api\.timeout: must be a duration/);
    expect(lines[2]).toMatch(/config\.yaml:6:\d+: log\.levle: unknown key/);
  });

  it('reports a broken rule file with its file, line and CEL error, and exits 2', async () => {
    const rules = write(
      'my-rules.yaml',
      'rules:\n  - name: my-rule\n    event: site.custom\n    kind: alert\n    source: health\n    when: "after.online.status =="\n',
    );
    const file = write('config.yaml', validConfig('http://127.0.0.1:9', `rules: [${rules}]\n`));
    const r = await hostwatch(['check', '-c', file], { env: { HW_KEY: 'k-123456' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('my-rules.yaml:6: rules[0].when: CEL error:');
  });

  it('exits 2 with a clear message for a missing config file', async () => {
    const r = await hostwatch(['check', '-c', join(tmp.dir, 'nope.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('nope.yaml: cannot read the config file: it does not exist');
  });
});

describe('hostwatch poll --once', () => {
  it('does one full cycle against a server that speaks the API, and exits 0', async () => {
    sim = await startSimulator({ sites: 2, keys: { 'cli-key-123': '*' } });
    sim.world.setHealth(1, { status: 'offline' });
    const file = write('config.yaml', validConfig(sim.url, 'channels:\n  - { name: out, type: console }\n'));
    const r = await hostwatch(['poll', '--once', '-c', file], { env: { HW_KEY: 'cli-key-123' } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('site.offline');
    const db = new BetterSqlite3(join(tmp.dir, 'state.db'), { readonly: true });
    expect((db.prepare("SELECT count(*) n FROM outbox WHERE state = 'delivered'").get() as { n: number }).n).toBe(1);
    // sites, jobs, 2 × (health, usage, backups); every other source also wrote its baseline.
    const foundation = "SELECT count(*) n FROM snapshots WHERE source IN ('sites', 'jobs', 'health', 'usage', 'backups')";
    expect((db.prepare(foundation).get() as { n: number }).n).toBe(2 + 2 * 3);
    expect((db.prepare("SELECT count(DISTINCT source) n FROM snapshots WHERE source NOT IN ('sites', 'jobs', 'health', 'usage', 'backups')").get() as { n: number }).n).toBeGreaterThan(30);
    db.close();
  });

  it('goes through the proxy HTTP_PROXY names, to the API and to a webhook, and reaches this machine directly', { timeout: 90_000 }, async () => {
    sim = await startSimulator({ sites: 2, keys: { 'cli-key-123': '*' } });
    sim.world.setHealth(1, { status: 'offline' });
    const hook = await startReceiver();
    // A proxy that tunnels (CONNECT) to hosts named *.invalid, which resolve nowhere else.
    const tunnels: string[] = [];
    const proxy = createServer();
    proxy.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
      tunnels.push(req.url ?? '');
      const [host, port] = (req.url ?? '').split(':');
      if (!host!.endsWith('.invalid')) return client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      const upstream = connect(Number(port), '127.0.0.1', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const api = new URL(sim.url);
    const file = write(
      'config.yaml',
      validConfig(`http://panel.invalid:${api.port}${api.pathname}`, `channels:\n  - { name: hooks, type: webhook, url: "http://hooks.invalid:${hook.port}/hook", secret: "${TEST_SECRET}" }\n`),
    );
    try {
      const r = await hostwatch(['poll', '--once', '-c', file], { env: { HW_KEY: 'cli-key-123', HTTP_PROXY: proxyUrl, NO_PROXY: 'localhost' } });
      expect(r.code).toBe(0);
      expect(r.stderr).not.toMatch(/ENOTFOUND|poll failed/);
      expect(new Set(tunnels)).toEqual(new Set([`panel.invalid:${api.port}`, `hooks.invalid:${hook.port}`]));
      expect(hook.accepted().map((a) => a.event!.data.name)).toContain('site.offline');
      // This machine is always reached directly (a proxy cannot reach its loopback): the API
      // on 127.0.0.1 with no NO_PROXY at all, as in a shell where HTTP_PROXY is set for everything.
      tunnels.length = 0;
      sim.world.setHealth(2, { status: 'offline' });
      const local = write('local.yaml', validConfig(sim.url, `channels:\n  - { name: hooks, type: webhook, url: "http://hooks.invalid:${hook.port}/hook", secret: "${TEST_SECRET}" }\n`).replace('./state.db', './local.db'));
      const direct = await hostwatch(['poll', '--once', '-c', local], { env: { HW_KEY: 'cli-key-123', HTTP_PROXY: proxyUrl, NO_PROXY: '', no_proxy: '' } });
      expect(direct.code).toBe(0);
      expect(direct.stderr).not.toMatch(/poll failed/);
      expect(new Set(tunnels)).toEqual(new Set([`hooks.invalid:${hook.port}`]));
      // A proxy that refuses the tunnel is named, with its answer (undici says UND_ERR_ABORTED).
      const refused = write('refused.yaml', validConfig(`http://panel.refused.example:${api.port}`).replace('./state.db', './refused.db'));
      const r403 = await hostwatch(['poll', '--once', '-c', refused], { env: { HW_KEY: 'cli-key-123', HTTP_PROXY: proxyUrl, NO_PROXY: '' } });
      expect(r403.code).toBe(3);
      expect(r403.stderr).toContain('network error: the proxy refused the tunnel (it answered CONNECT with 403; see HTTPS_PROXY / HTTP_PROXY and NO_PROXY)');
    } finally {
      await hook.close();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('exits 0 when a source fails: a failed source is not a failed command', async () => {
    sim = await startSimulator({ sites: 1, keys: { 'cli-key-123': '*' } });
    sim.faults.add({ path: '^/jobs$', kind: 'status', status: 500 });
    const file = write('config.yaml', validConfig(sim.url));
    const r = await hostwatch(['poll', '--once', '-c', file], { env: { HW_KEY: 'cli-key-123' } });
    expect(r.code).toBe(0);
    // Logs go to stderr; stdout is for command output and the console channel.
    expect(r.stderr).toContain('poll failed');
    expect(r.stdout).toBe('');
  });

  it('exits 2 without --once, pointing at `hostwatch run`', async () => {
    const file = write('config.yaml', validConfig('http://127.0.0.1:9'));
    const r = await hostwatch(['poll', '-c', file], { env: { HW_KEY: 'k-123456' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --once');
  });
});

describe('hostwatch run', () => {
  it('stops gracefully on SIGTERM and exits 0', async () => {
    sim = await startSimulator({ sites: 2, keys: { 'cli-key-123': '*' } });
    const file = write('config.yaml', validConfig(sim.url));
    const r = await hostwatch(['run', '-c', file], { env: { HW_KEY: 'cli-key-123' }, signalOn: 'cycle done' });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('SIGTERM');
    expect(r.stderr).toContain('hostwatch stopped');
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toContain('cli-key-123');
  });

  it('goes on after SIGHUP, saying the config is read at start only, and its log stays JSON through the SIGTERM that stops it', async () => {
    sim = await startSimulator({ sites: 2, keys: { 'cli-key-123': '*' } });
    const file = write('config.yaml', validConfig(sim.url));
    const r = await hostwatch(['run', '-c', file], { env: { HW_KEY: 'cli-key-123' }, signalOn: 'cycle done', signals: ['SIGHUP', 'SIGTERM'] });
    expect(r.code).toBe(0);
    const lines = r.stderr.trimEnd().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; signal?: string });
    expect(lines.filter((l) => l.signal).map((l) => [l.level, l.msg])).toEqual([
      [40, 'SIGHUP: hostwatch reads its config at start only, so nothing was reloaded and it goes on; restart it to apply a change (hostwatch check first)'],
      [30, 'SIGTERM: finishing in-flight work, then stopping'],
    ]);
    expect(lines.at(-1)!.msg).toBe('hostwatch stopped');
  });
});

describe('bad arguments', () => {
  it('are refused with exit code 2 and a reason', async () => {
    for (const bad of ['abc', '99999', '-1']) {
      const r = await hostwatch(['simulate', '--port', bad]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`option '--port <n>' argument '${bad}' is invalid. must be a port number from 0 to 65535 (0 = any free port)`);
    }
    // A folder where a rule test file is expected.
    const dir = await hostwatch(['rules', 'test', 'test/fixtures/rules/tests']);
    expect(dir.code).toBe(2);
    expect(dir.stderr).toBe('test/fixtures/rules/tests: is a folder; give the test files in it, like test/fixtures/rules/tests/*.test.yaml\n');
    const u = await hostwatch(['frobnicate']);
    expect(u.code).toBe(2);
    expect(u.stderr).toContain("unknown command 'frobnicate'");
  });
});
