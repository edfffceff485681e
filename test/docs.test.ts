/**
 * Every documented path is run: the README's "Running it against your panel", followed line
 * by line against the simulator with the variables it tells you to export; the systemd
 * path of docs/operations.md (the example copied to an /etc folder, the variables of its
 * environment file); the config its Docker section asks for; the Dockerfile's promises; and
 * every command the README's table names.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { packageRoot } from '../src/paths.js';
import { json } from '../src/server/http.js';
import { startServer } from '../src/server/server.js';
import { startSimulator, type Simulator } from '../src/simulator/index.js';
import { tempDir } from './harness.js';
import { startReceiver, TEST_SECRET, type Receiver } from './receiver.js';
import { CLI, hostwatch, type CliRun } from './run-cli.js';
import { startSmtp, type SmtpReceiver } from './smtp.js';

const ROOT = packageRoot();
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The shell lines of the first ```sh block after `heading` in a Markdown file, comments and continuations dropped. */
function shellBlock(markdown: string, heading: string): string[] {
  const at = markdown.indexOf(heading);
  expect(at, heading).toBeGreaterThanOrEqual(0);
  const start = markdown.indexOf('```sh\n', at) + '```sh\n'.length;
  const block = markdown.slice(start, markdown.indexOf('\n```', start));
  return block
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** The variables a config file reads without a default (`${NAME}`, not `${NAME:-x}`). */
function requiredVariables(yaml: string): string[] {
  const withoutComments = yaml.split('\n').map((l) => l.replace(/(^|\s)#.*$/, '')).join('\n');
  return [...new Set([...withoutComments.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!))].sort();
}

/** Edit a YAML file the way a user would, keeping its comments. */
function edit(file: string, changes: Array<[path: Array<string | number>, value: unknown]>): void {
  const doc = parseDocument(readFileSync(file, 'utf8'));
  for (const [path, value] of changes) doc.setIn(path, value);
  writeFileSync(file, doc.toString());
}

/** `hostwatch run` until its first full cycle is logged, then SIGTERM. */
function runUntilCycle(args: string[], env: Record<string, string>, cwd: string): Promise<CliRun> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes('"cycle done"') && !child.killed) child.kill('SIGTERM');
    });
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('the README, "Running it against your panel"', () => {
  it('works as written against the simulator, with the variables it says to export', async () => {
    const sim: Simulator = await startSimulator({ sites: 1, keys: { 'panel-key-0123456789': '*' } });
    const hook: Receiver = await startReceiver();
    const slack: Receiver = await startReceiver({ answer: () => ({ status: 200, body: 'ok' }) });
    const smtp: SmtpReceiver = await startSmtp({ login: { user: 'hostwatch', pass: 'smtp-pass-0123' } });
    const tmp = tempDir();
    cleanups.push(() => sim.close(), () => hook.close(), () => slack.close(), () => smtp.close(), tmp.cleanup);

    // `npx hostwatch` is the package's bin.
    expect((JSON.parse(read('package.json')) as { bin: Record<string, string> }).bin['hostwatch']).toBe('dist/src/cli.js');
    const values: Record<string, string> = {
      HOSTWATCH_API_KEY: 'panel-key-0123456789',
      WEBHOOK_SECRET: TEST_SECRET,
      HOSTWATCH_TOKEN: 'dashboard-token-0123',
      // Named in the README as the ones with defaults, set when those channels are kept.
      SLACK_WEBHOOK_URL: slack.url,
      SMTP_PASS: 'smtp-pass-0123',
    };
    const env: Record<string, string> = {};
    const lines = shellBlock(read('README.md'), '## Running it against your panel');
    const ran: string[] = [];
    for (const line of lines) {
      const cp = /^cp (\S+) (\S+)$/.exec(line);
      const exported = /^export ([A-Z_]+)=/.exec(line);
      const command = /^npx hostwatch (.+)$/.exec(line);
      if (cp) {
        copyFileSync(join(ROOT, cp[1]!), join(tmp.dir, cp[2]!));
        // "then edit it: api.base_url (your panel) and channels (where events go)"; and, on
        // a shared test machine, a free port for the server and a faster request rate.
        const smtpAt = ['channels', 2, 'smtp'];
        edit(join(tmp.dir, cp[2]!), [
          [['api', 'base_url'], sim.url],
          [['api', 'max_requests_per_second'], 100],
          [['channels', 0, 'url'], hook.url],
          [[...smtpAt, 'host'], '127.0.0.1'],
          [[...smtpAt, 'port'], smtp.port],
          [['server', 'listen'], '127.0.0.1:0'],
        ]);
      } else if (exported) {
        expect(values[exported[1]!], `a value for ${exported[1]}`).toBeDefined();
        env[exported[1]!] = values[exported[1]!]!;
      } else if (command) {
        const args = command[1]!.split(/\s+/);
        const withChannels = { ...env, SLACK_WEBHOOK_URL: values['SLACK_WEBHOOK_URL']!, SMTP_PASS: values['SMTP_PASS']! };
        const r = args[0] === 'run' ? await runUntilCycle(args, withChannels, tmp.dir) : await hostwatch(args, { env: withChannels, cwd: tmp.dir });
        expect({ line, code: r.code, stderr: args[0] === 'check' ? r.stderr : '' }).toEqual({ line, code: 0, stderr: '' });
        ran.push(args[0]!);
      } else {
        throw new Error(`the README block has a line this test does not know how to follow: ${line}`);
      }
    }
    expect(ran).toEqual(['check', 'check', 'poll', 'run']);
    // Every variable the example needs without a default is one the README says to export.
    expect(requiredVariables(read('config.example.yaml')).filter((v) => !(v in env))).toEqual([]);
    expect(existsSync(join(tmp.dir, 'data', 'hostwatch.db'))).toBe(true);
  }, 120_000);
});

describe('docs/operations.md', () => {
  it('the systemd path: the example copied to /etc/hostwatch passes check with the variables of its environment file, storage under /var/lib/hostwatch', async () => {
    const ops = read('docs/operations.md');
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const etc = join(tmp.dir, 'etc', 'hostwatch');
    mkdirSync(etc, { recursive: true });
    const config = join(etc, 'config.yaml');
    expect(ops).toContain('sudo cp config.example.yaml /etc/hostwatch/config.yaml');
    copyFileSync(join(ROOT, 'config.example.yaml'), config);
    // "In the config: storage.path: /var/lib/hostwatch/hostwatch.db" (StateDirectory makes the folder).
    expect(ops).toContain('In the config: `storage.path: /var/lib/hostwatch/hostwatch.db`');
    edit(config, [[['storage', 'path'], join(tmp.dir, 'var', 'lib', 'hostwatch', 'hostwatch.db')]]);
    const envFile = ops.slice(ops.indexOf('# /etc/hostwatch/hostwatch.env'));
    const env = Object.fromEntries(
      envFile
        .slice(0, envFile.indexOf('```'))
        .split('\n')
        .flatMap((l) => {
          const m = /^([A-Z_]+)=(.*)$/.exec(l.trim());
          if (!m) return [];
          const sample: Record<string, string> = { HOSTWATCH_API_KEY: 'k-0123456789', WEBHOOK_SECRET: TEST_SECRET, HOSTWATCH_TOKEN: 't-0123456789', HOSTWATCH_CONFIG: config };
          return [[m[1]!, sample[m[1]!] ?? m[2]!]];
        }),
    );
    expect(Object.keys(env).sort()).toEqual(['HOSTWATCH_API_KEY', 'HOSTWATCH_CONFIG', 'HOSTWATCH_TOKEN', 'WEBHOOK_SECRET']);
    // The documented check line, with the documented paths moved under the test's folder.
    const checkLine = /node \/opt\/hostwatch\/dist\/src\/cli\.js (check -c \/etc\/hostwatch\/config\.yaml)/.exec(ops);
    expect(checkLine).not.toBeNull();
    const args = checkLine![1]!.replace('/etc/hostwatch/config.yaml', config).split(' ');
    const r = await hostwatch(args, { env, cwd: tmp.dir, unset: ['SLACK_WEBHOOK_URL', 'SMTP_PASS'] });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // check created nothing: the state folder is the service's to make.
    expect(existsSync(join(tmp.dir, 'var'))).toBe(false);
    // And with HOSTWATCH_CONFIG from that file, -c may be left out.
    expect((await hostwatch(['check'], { env, cwd: tmp.dir })).code).toBe(0);
  });

  it('the Docker config: listening on 0.0.0.0 passes check with a token and is refused without one', async () => {
    const ops = read('docs/operations.md');
    const snippet = /For that the config must contain:\n\n```yaml\n([\s\S]*?)```/.exec(ops)![1]!;
    const parsed = parseDocument(snippet).toJS() as { storage: { path: string }; server: { listen: string; token: string } };
    expect(parsed).toEqual({ storage: { path: '/var/lib/hostwatch/hostwatch.db' }, server: { listen: '0.0.0.0:8080', token: '${HOSTWATCH_TOKEN}' } });
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const config = join(tmp.dir, 'config.yaml');
    copyFileSync(join(ROOT, 'config.example.yaml'), config);
    edit(config, [
      [['storage', 'path'], join(tmp.dir, 'hostwatch.db')],
      [['server', 'listen'], parsed.server.listen],
      [['server', 'token'], parsed.server.token],
    ]);
    const env = { HOSTWATCH_API_KEY: 'k-0123456789', WEBHOOK_SECRET: TEST_SECRET, HOSTWATCH_TOKEN: 't-0123456789' };
    expect((await hostwatch(['check', '-c', config], { env })).code).toBe(0);
    const noToken = await hostwatch(['check', '-c', config], { env: { ...env, HOSTWATCH_TOKEN: '' } });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain('server.listen: is reachable from other machines, so it needs server.token');
  });

  it('the image: `# syntax=` first, the current Node.js LTS, no bench/ and no source maps, a health check that follows the configured port', () => {
    const dockerfile = read('Dockerfile');
    expect(dockerfile.split('\n')[0]).toBe('# syntax=docker/dockerfile:1');
    const bases = [...dockerfile.matchAll(/^FROM node:(\d+)-/gm)].map((m) => Number(m[1]));
    expect(bases.length).toBe(2);
    // Node 20 reached its end of life in April 2026; 26 is the Active LTS since 2026-10-28
    // (24 went to maintenance on 2026-10-20).
    for (const major of bases) expect(major).toBeGreaterThanOrEqual(26);
    expect(dockerfile).not.toMatch(/^COPY bench/m);
    expect(dockerfile).toMatch(/tsc -p tsconfig\.json --sourceMap false/);
    expect(dockerfile).toMatch(/^HEALTHCHECK [^\n]*\\\n\s+CMD \["node", "dist\/src\/cli\.js", "health"\]/m);
    expect(dockerfile).toMatch(/^ENV HOSTWATCH_CONFIG=\/etc\/hostwatch\/config\.yaml$/m);
  });
});

describe('docs/operations.md, the event feed', () => {
  it('the EventSource snippet brings a token with +, /, &, # and % (openssl rand -base64) intact to the stream', async () => {
    const expr = /new EventSource\((.+)\);/.exec(read('docs/operations.md'))?.[1];
    expect(expr).toBeDefined();
    const token = 'a+b/c&d#e%2Ff==';
    const path = (new Function('token', `return ${expr!};`) as (t: string) => string)(token);
    const srv = await startServer({
      listen: '127.0.0.1:0',
      token,
      routes: [{ method: 'GET', path: '/api/events/stream', queryToken: true, handler: (req, res) => json(res, 200, Object.fromEntries(req.url.searchParams)) }],
    });
    cleanups.push(() => srv.close());
    const res = await fetch(`${srv.url}${path}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ type: 'site.offline', access_token: token });
  });
});

describe('hostwatch health (the image\'s HEALTHCHECK)', () => {
  it('asks /readyz at the port server.listen names, a wildcard bind on loopback, and exits 1 when nothing answers', async () => {
    const sim = await startSimulator({ sites: 1, keys: { 'health-key-0123456789': '*' } });
    const tmp = tempDir();
    cleanups.push(() => sim.close(), tmp.cleanup);
    const { freePort } = await import('./receiver.js');
    const port = await freePort();
    const config = join(tmp.dir, 'config.yaml');
    writeFileSync(config, `api: { base_url: ${sim.url}, key: \${KEY}, max_requests_per_second: 100 }\nstorage: { path: ./hw.db }\nserver: { listen: "0.0.0.0:${port}", token: \${TOKEN} }\n`);
    const env = { KEY: 'health-key-0123456789', TOKEN: 'health-token-0123' };
    const down = await hostwatch(['health', '-c', config], { env });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`hostwatch health: http://127.0.0.1:${port}/readyz: connection refused (is the daemon running, with this server.listen?)`);
    const daemon = spawn(process.execPath, [CLI, 'run', '-c', config], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    cleanups.push(() => new Promise((r) => (daemon.exitCode !== null ? r(null) : (daemon.once('close', r), daemon.kill('SIGTERM')))));
    let log = '';
    await new Promise<void>((resolve) => daemon.stderr.on('data', (d: Buffer) => ((log += d.toString()), log.includes('"cycle done"') && resolve())));
    // No secret needed: the health check runs with the container's environment, or none.
    const up = await hostwatch(['health', '-c', config], { unset: ['KEY', 'TOKEN'] });
    expect(up.stdout).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/readyz: 200 \\{"status":"ready"`));
    expect(up.code).toBe(0);
  }, 60_000);
});

describe('the README command table', () => {
  it('names only commands that exist, each answering --help', async () => {
    const readme = read('README.md');
    const table = readme.slice(readme.indexOf('| command | does |'), readme.indexOf('Configuration: [config.example.yaml]'));
    const commands = [...new Set([...table.matchAll(/`hostwatch ([a-z]+(?: (?:test|backtest|add|list|expire))?)/g)].map((m) => m[1]!))];
    expect(commands.length).toBeGreaterThan(12);
    for (const c of commands) {
      const r = await hostwatch([...c.split(' '), '--help']);
      expect({ c, code: r.code }).toEqual({ c, code: 0 });
    }
    // One CLI process per command, one after another: slow on a loaded 2-core machine.
  }, 180_000);
});

describe('docs/configuration.md', () => {
  it('shows what `hostwatch check --sites 1000` prints for a config of one channel, as it prints it', async () => {
    const doc = read('docs/configuration.md');
    const start = doc.indexOf('$ hostwatch check -c hostwatch.yaml --sites 1000\n');
    expect(start).toBeGreaterThanOrEqual(0);
    const shown = doc.slice(doc.indexOf('\n', start) + 1, doc.indexOf('\n```', start));
    const tmp = tempDir();
    cleanups.push(tmp.cleanup);
    const config = join(tmp.dir, 'hostwatch.yaml');
    writeFileSync(config, 'api: { base_url: "https://panel.example.com", key: k }\nstorage: { path: ./hostwatch.db }\nchannels: [{ name: ops, type: console }]\n');
    const r = await hostwatch(['check', '-c', 'hostwatch.yaml', '--sites', '1000'], { cwd: tmp.dir });
    expect(r.code).toBe(0);
    // The file is named absolute (the docs show it as given).
    expect(r.stdout.replaceAll(`${tmp.dir}/`, '').trimEnd()).toBe(shown);
  });
});
