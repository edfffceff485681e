import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { timingSafeEqual } from 'node:crypto';
import { parseConfig } from './config/parse.js';
import { createApp, type App } from './main.js';
import { CONFIG_SOURCES, SOURCE_NAMES, VIEW_NAMES } from './sources/registry.js';
import { signWebhook } from './notify/channels/webhook.js';
import type { CronState } from './simulator/families/cron.js';
import type { RankState } from './simulator/families/rank.js';
import { startSimulator, type Simulator } from './simulator/index.js';

/**
 * Every source polled every 10 s (the site list every 30 s; views with their origin), so the whole simulated API
 * shows up within a minute; the opt-in file watch is on for `.htaccess` and `config.php`.
 */
function demoSources(): string {
  return SOURCE_NAMES.map((name) => {
    // A view is read with its origin, at its interval.
    if (VIEW_NAMES.includes(name)) return `  ${name}: {}`;
    if (name === 'sites') return '  sites: { every: 30s }';
    if (name === 'files') return '  files: { every: 10s, paths: [.htaccess, config.php] }';
    return `  ${name}: { every: 10s }`;
  }).join('\n');
}

/** The demo's embedded config: the simulator, a local webhook receiver and the console. */
const DEMO_CONFIG = `
name: demo
api:
  base_url: \${SIM_URL}
  key: sim-key
  max_requests_per_second: 50
storage:
  path: \${DEMO_DB}
sources:
\${DEMO_SOURCES}
channels:
  - { name: console, type: console }
  - { name: demo-webhook, type: webhook, url: "\${HOOK_URL}", secret: whsec_ZGVtby1zZWNyZXQtZm9yLWhvc3R3YXRjaA== }
delivery:
  retry_schedule: [2s, 5s, 10s]
server:
  listen: "\${DEMO_LISTEN}"
log:
  level: warn
  pretty: true
`;

const DEMO_SECRET = 'whsec_ZGVtby1zZWNyZXQtZm9yLWhvc3R3YXRjaA==';

export interface DemoOptions {
  /** Stop by itself after this long (0: run until stopped). */
  durationMs: number;
  write?: (line: string) => void;
  /** Folder of the demo database (default ./data). */
  dataDir?: string;
  /**
   * Where the dashboard and API listen. Default 127.0.0.1:8080, or a free port on
   * 127.0.0.1 when 8080 is taken; an address given here is used as is (`127.0.0.1:0`: any port).
   */
  listen?: string;
  /** Play the scripted story (default true); tests turn it off and drive `sim.world` themselves. */
  script?: boolean;
  /** Let the simulated world drift by itself every 7 s (default true); off for a test that needs a still world. */
  drift?: boolean;
}

/** A running demo. */
export interface Demo {
  /** The dashboard's address (the operator server's base URL). */
  url: string;
  sim: Simulator;
  app: App;
  stop: () => Promise<void>;
  /** Resolves once the demo has stopped. */
  done: Promise<void>;
}

/** Where the demo's server listens unless told otherwise (falls back to a free port). */
export const DEMO_LISTEN = '127.0.0.1:8080';

/**
 * `npm start`: the simulator, a webhook receiver that verifies signatures, and the daemon,
 * with a script that makes the interesting things happen in the first minute.
 */
export async function runDemo(opts: DemoOptions): Promise<Demo> {
  const write = opts.write ?? ((l: string) => process.stdout.write(`${l}\n`));
  const sim = await startSimulator({ seed: 7, sites: 6, tickMs: opts.drift === false ? false : 7_000 });
  const hook = await startReceiver(write);
  const db = join(opts.dataDir ?? 'data', 'demo.db');
  for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
  const build = (listen: string): Promise<App> => {
    const parsed = parseConfig(DEMO_CONFIG.replace('${DEMO_SOURCES}', demoSources()), '<demo>', { SIM_URL: sim.url, HOOK_URL: hook.url, DEMO_DB: db, DEMO_LISTEN: listen }, {
      ...CONFIG_SOURCES,
      baseDir: process.cwd(),
    });
    if (!parsed.ok) throw new Error(`demo config is invalid: ${JSON.stringify(parsed.errors)}`);
    return createApp(parsed.config, {
      consoleWrite: (line) => write(line),
      onAttempt: ({ channel, result, durationMs, state }) => {
        if (channel === 'console') return;
        const how = result.ok ? `HTTP ${result.statusCode}` : `${result.error} → ${state}`;
        write(`      ↳ ${channel}: ${how} in ${durationMs} ms`);
      },
    });
  };
  let app = await build(opts.listen ?? DEMO_LISTEN);
  try {
    await app.start();
  } catch (e) {
    // Port 8080 is often taken on a developer's machine; the demo must still start.
    if (opts.listen !== undefined || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') {
      await app.stop();
      await Promise.all([sim.close(), new Promise<void>((r) => hook.server.close(() => r()))]);
      throw e;
    }
    await app.stop();
    app = await build('127.0.0.1:0');
    await app.start();
  }
  const url = app.serverUrl!;

  // Written right after start, before any poll can answer, so it comes first.
  write('');
  write('hostwatch demo');
  write(`  dashboard ${url}/`);
  write(`  simulator (the Hosting Control API) ${sim.url}/api/v1   control: ${sim.url}/_sim/history`);
  write(`  webhook receiver (verifies Standard Webhooks signatures) ${hook.url}`);
  write(`  database ${db}`);
  write(
    opts.script === false
      ? '  The first poll is a baseline (no change events). Ctrl-C stops.'
      : '  The first poll is a baseline (no change events). Then watch the script below, here or on the dashboard. Ctrl-C stops.',
  );
  write('');

  const say = (text: string): void => write(`▶ ${text}`);
  const timers: NodeJS.Timeout[] = [];
  const at = (s: number, fn: () => void): void => void timers.push(setTimeout(fn, s * 1000));
  const domain = (id: number): string => sim.world.getSite(id)?.domain ?? `site ${id}`;
  let failing = 0;
  const story = (): void => {
    at(8, () => {
      say(`simulator: ${domain(2)} goes offline`);
      sim.world.setHealth(2, { status: 'offline' });
    });
    at(12, () => {
      const { backup } = sim.world.startBackup(3);
      failing = backup.id;
      say(`simulator: a manual backup ${backup.id} of ${domain(3)} starts`);
    });
    at(20, () => {
      say(`simulator: backup ${failing} of ${domain(3)} fails`);
      sim.world.setBackupState(3, failing, 'Error');
    });
    at(26, () => {
      const usage = sim.world.getUsage(4);
      const limit = usage?.disk.limit_mib ?? 10_240;
      say(`simulator: ${domain(4)} fills its disk past the limit`);
      sim.world.setUsage(4, { diskUsedMib: Math.round(limit * 1.05) });
    });
    at(34, () => {
      say(`simulator: ${domain(2)} is back online`);
      sim.world.setHealth(2, { status: 'online' });
    });
    at(46, () => {
      say(`simulator: ${domain(4)} frees disk space`);
      sim.world.setUsage(4, { diskUsedMib: 100 });
    });
    // The rest of the API, through the same family actions the simulator's drift uses.
    const act = (family: string, siteId: number | null, action: string, args: Record<string, unknown> = {}): unknown => sim.world.resources.act(family, siteId, action, args);
    at(16, () => {
      say(`simulator: the DNS provider refuses a record of ${domain(5)}`);
      act('dns', 5, 'refuse', { error: 'provider rejected the record: invalid target' });
    });
    at(30, () => {
      say('simulator: a 1-star review arrives for a watched business');
      act('reputation', null, 'review', { business_id: 1, rating: 1 });
    });
    at(38, () => {
      const job = sim.world.resources.account<CronState>('cron').jobs[0];
      if (!job) return;
      say(`simulator: cron job ${job.id} of ${domain(job.site_id)} times out 3 times in a row and is paused`);
      act('cron', null, 'run', { job_id: job.id, status: 'timeout', count: 3 });
    });
    at(42, () => {
      say(`simulator: someone edits .htaccess on ${domain(1)}`);
      act('files', 1, 'touch', { path: '.htaccess' });
    });
    at(52, () => {
      const kw = sim.world.resources.account<RankState>('rank').keywords.find((k) => k.position !== null && k.position <= 10);
      if (!kw) return;
      say(`simulator: the keyword "${kw.keyword}" falls from ${kw.position} to 25`);
      act('rank', null, 'move', { keyword_id: kw.id, position: 25 });
    });
  };
  if (opts.script !== false) story();

  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    for (const t of timers) clearTimeout(t);
    await app.stop();
    await sim.close();
    await new Promise<void>((r) => hook.server.close(() => r()));
    resolveDone();
  };
  if (opts.durationMs > 0) timers.push(setTimeout(() => void stop(), opts.durationMs));
  return { url, sim, app, stop, done };
}

/** A tiny webhook receiver that checks each signature before answering 204. */
async function startReceiver(write: (l: string) => void): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      const ts = Number(req.headers['webhook-timestamp']);
      const expected = Buffer.from(signWebhook(DEMO_SECRET, id, ts, body));
      const given = Buffer.from(String(req.headers['webhook-signature'] ?? '').split(' ')[0] ?? '');
      const ok = given.length === expected.length && timingSafeEqual(given, expected);
      if (!ok) write('      ✗ receiver: bad signature');
      res.writeHead(ok ? 204 : 401).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return { url: `http://127.0.0.1:${port}/hook`, server };
}
