#!/usr/bin/env node
// First, before the modules below load: the daemon commands' heap flags (command-heap.ts).
import { DAEMON_COMMANDS } from './command-heap.js';
import { Command, InvalidArgumentError, Option } from 'commander';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
// Only modules that load quickly are imported here; each command imports what it uses when
// it runs (below, `await import`), so `hostwatch check` does not load the database driver,
// the HTTP client or the daemon, and `--version` loads almost nothing.
import { closest } from './closest.js';
import { clusterStatusLines, readClusterStatus } from './cluster/status.js';
import { parseDuration } from './config/duration.js';
import { ConfigErrors } from './config/errors.js';
import type { Config } from './config/types.js';
import { knownEventNames } from './events/catalog.js';
import { resolveEventType, resolveTypeFilter, TYPE_SHAPE_MESSAGE, typeShaped } from './events/envelope.js';
import type { HostwatchEvent } from './events/types.js';
import type { App } from './main.js';
import { formatEventLine } from './notify/channels/console.js';
import { terminalJson, terminalLine } from './notify/channels/render.js';
import type { Router } from './notify/routing.js';
import { registerDeliveryCommands } from './notify/cli-commands.js';
import type { UnknownEventName } from './notify/event-names.js';
import { packageRoot, packageVersion } from './paths.js';
import type { ExplainDeps } from './rules/explain.js';
import type { CompiledRule } from './rules/types.js';
import { configPlan, describePlan, sitesThatFit, sourcePriorities } from './scheduler/budget-plan.js';
import { CONFIG_SOURCES, SOURCE_NAMES, sitesSource } from './sources/registry.js';
import { enabledSources, pathsFor, scopesFor } from './sources/select.js';
import { describeStorage, openStore, StorageUnreachableError, storedSchemaProblem, type Store } from './store/db.js';
import { SchemaMissingError } from './store/migrate.js';
import type { Repos } from './store/repos.js';
import { storageExists, storagePathProblem } from './store/storage-path.js';

/**
 * Exit codes: 0 ok, 1 runtime failure, 2 bad config, rules or arguments, 3 (`poll --once`)
 * no source could be read: every poll of the cycle failed (a wrong key, an unreachable panel).
 */
const EXIT_CONFIG = 2;
const EXIT_NOTHING_READ = 3;

/** Where the config is when `-c` is not given. */
const CONFIG_HELP = 'config file (YAML); default: $HOSTWATCH_CONFIG, else ./hostwatch.yaml';

/**
 * The reader of stdout went away (`hostwatch events | head`). A command that prints and
 * exits stops there, quietly and with 0, as other Unix tools do; the daemon goes on (only
 * its console channel writes to stdout, and nobody reads it any more), and says so once.
 */
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
  if (!DAEMON_COMMANDS.includes(process.argv[2] ?? '')) process.exit(0);
  if (!stdoutGone) process.stderr.write('hostwatch: stdout was closed; the console channel\'s lines go nowhere now\n');
  stdoutGone = true;
});
let stdoutGone = false;

/** Rows that hold API text (subjects, summaries, answers), printed with terminalLine. */
function printRows(lines: Iterable<string>): void {
  for (const line of lines) process.stdout.write(`${terminalLine(line)}\n`);
}

/** Removes the loaded config's secrets from what the CLI prints (set by `load`). */
let scrubOut: (text: string) => string = (text) => text;

function fail(message: string, code: number): never {
  // Whatever an error says (a driver's, a server's), it never prints a configured secret.
  process.stderr.write(`${scrubOut(message)}\n`);
  process.exit(code);
}

/** The config file a command reads: `-c FILE`, else $HOSTWATCH_CONFIG, else ./hostwatch.yaml. */
function configFile(given: string | undefined): string {
  if (given !== undefined) return given;
  const fromEnv = process.env['HOSTWATCH_CONFIG'];
  if (fromEnv) return fromEnv;
  if (existsSync('hostwatch.yaml')) return 'hostwatch.yaml';
  fail('hostwatch: no config file: pass -c FILE, set HOSTWATCH_CONFIG, or put hostwatch.yaml in the current folder (start from config.example.yaml)', EXIT_CONFIG);
}

/**
 * Load the config, exiting 2 with every error. `secretsOptional`: for commands that call
 * neither the API nor a channel, a secret whose variable is unset is no error;
 * `serverUnused`: nor is `server.listen`'s, for those that do not ask the daemon either.
 */
async function load(file: string | undefined, opts: { secretsOptional?: boolean; serverUnused?: boolean } = {}): Promise<Config> {
  const [{ loadConfig, rulePathProblem }, { secretScrubber, secretsOf }] = await Promise.all([import('./config/load.js'), import('./log.js')]);
  try {
    // The commands that call the API or a channel load the rules: a missing rule file is an
    // error at its line, with the file's others (the read-only ones may not need the rules).
    const rulePath = opts.secretsOptional === true ? {} : { rulePath: rulePathProblem };
    const config = await loadConfig(configFile(file), process.env, { ...CONFIG_SOURCES, secretsOptional: opts.secretsOptional === true, serverUnused: opts.serverUnused === true, ...rulePath });
    scrubOut = secretScrubber(secretsOf(config));
    return config;
  } catch (e) {
    if (e instanceof ConfigErrors) fail(e.format(), EXIT_CONFIG);
    throw e;
  }
}

/** Build the app, mapping bad rules/routes/channels to exit code 2 with their messages. */
async function build(config: Config): Promise<App> {
  const [{ createApp, UnknownEventNamesError }, { RuleErrors }, { RouteError }] = await Promise.all([import('./main.js'), import('./rules/parse.js'), import('./notify/routing.js')]);
  try {
    return await createApp(config);
  } catch (e) {
    if (e instanceof RuleErrors) fail(e.message, EXIT_CONFIG);
    // Named at their lines, as `check` names them.
    if (e instanceof UnknownEventNamesError) fail(await atTheirLines(config.file, e.problems), EXIT_CONFIG);
    // Named with its file, as `check` and `rules backtest` name it (invariant 8).
    if (e instanceof RouteError) fail(`${config.file}: ${e.message}`, EXIT_CONFIG);
    fail(`hostwatch: cannot start: ${(e as Error).message}`, 1);
  }
}

/**
 * Stop on SIGTERM or SIGINT. `log`: the daemon's logger, so the line is JSON like the rest of
 * its log (else a line of text on stderr); the daemon also stays up on SIGHUP, which it names.
 */
function onShutdown(stop: () => Promise<void>, log?: Logger): void {
  let stopping = false;
  const handler = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    if (log) log.info({ signal }, `${signal}: finishing in-flight work, then stopping`);
    else process.stderr.write(`hostwatch: ${signal}, finishing in-flight work…\n`);
    stop().then(
      () => process.exit(0),
      (e) => fail(`hostwatch: error while stopping: ${(e as Error).message}`, 1),
    );
  };
  process.once('SIGTERM', () => handler('SIGTERM'));
  process.once('SIGINT', () => handler('SIGINT'));
  // Many daemons reload their config on SIGHUP; this one reads it at start only. Without a
  // handler, a SIGHUP (a reload script, a closed terminal) would end it at once, with no drain.
  if (log) process.on('SIGHUP', () => log.warn({ signal: 'SIGHUP' }, 'SIGHUP: hostwatch reads its config at start only, so nothing was reloaded and it goes on; restart it to apply a change (hostwatch check first)'));
}

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a whole number ≥ 0');
  return n;
}

function port(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number from 0 to 65535 (0 = any free port)');
  return n;
}

/** The most a count given on the command line may be: a million rows is more than a terminal shows. */
const MAX_COUNT = 1_000_000;

function atLeastOne(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number ≥ 1');
  if (n > MAX_COUNT) throw new InvalidArgumentError(`must be at most ${MAX_COUNT.toLocaleString('en')}`);
  return n;
}

function duration(v: string): number {
  const ms = parseDuration(v);
  // 0 would look back no time at all: nothing, with exit 0.
  if (ms === null || ms <= 0) throw new InvalidArgumentError('expected a duration greater than 0, like 30m, 1h, 2d or 1h30m');
  return ms;
}

function typeName(v: string): string {
  if (typeShaped(v)) return v;
  // The rules are not loaded yet: the near miss of a rule's name is looked for among the built-in events.
  const r = resolveEventType(v, knownEventNames([]));
  throw new InvalidArgumentError(`${TYPE_SHAPE_MESSAGE}${!r.ok && r.near ? `; did you mean ${r.near}?` : ''}`);
}

const program = new Command()
  .name('hostwatch')
  .description('Polls the Hosting Control API and turns changes into signed, durable events.')
  .version(packageVersion(), '-V, --version', 'print the version')
  // One line after the error, not the whole help, which would push the error off the screen.
  .showHelpAfterError('(add --help for usage)')
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_CONFIG));

program
  .command('run')
  .description('run the daemon in the foreground until SIGTERM/SIGINT')
  .option('-c, --config <file>', CONFIG_HELP)
  .action(async (o: { config?: string }) => {
    const app = await build(await load(o.config));
    onShutdown(() => app.stop(), app.log);
    try {
      await app.start();
    } catch (e) {
      await app.stop();
      fail(`hostwatch: cannot start: ${(e as Error).message}`, (e as { code?: string }).code === 'server_config' ? EXIT_CONFIG : 1);
    }
  });

program
  .command('poll')
  .description('poll every enabled source once, deliver what is pending, and exit (exit 3 when no source could be read)')
  .option('-c, --config <file>', CONFIG_HELP)
  .option('--once', 'one full cycle (required: the daemon is `hostwatch run`)')
  .action(async (o: { config?: string; once?: boolean }) => {
    if (!o.once) fail('hostwatch poll: pass --once (the continuous daemon is `hostwatch run`)', EXIT_CONFIG);
    const app = await build(await load(o.config));
    let read: { polls: number; failed: number };
    try {
      const { pending, ...counts } = await app.runOnce();
      read = counts;
      if (pending > 0) {
        app.log.warn({ pending }, 'deliveries still pending when poll --once ends (retries or digests not due within delivery.drain_timeout); they stay in the outbox for the next run');
      }
    } finally {
      await app.stop();
    }
    // A failed source is not a failed command; nothing read at all is (a wrong key, a panel down).
    if (read.polls > 0 && read.failed === read.polls) {
      fail(`hostwatch poll: no source could be read: all ${read.polls} polls failed (see the log above; api.unauthorized / api.unreachable say why)`, EXIT_NOTHING_READ);
    }
  });

program
  .command('check')
  .description('validate the config and the rules, and everything `run` would refuse; print every error (exit 2 on any), then what the request budget allows')
  .option('-c, --config <file>', CONFIG_HELP)
  .option('--online', 'also call the API (GET only, nothing written): does the key work, and can each enabled source read? exit 1 when not')
  .option('--sites <n>', 'plan the request budget for this many sites (default: the sites list, else the stored site list)', positiveInt)
  .action(async (o: { config?: string; online?: boolean; sites?: number }) => {
    const [{ loadConfig, rulePathProblem }, { RuleErrors, rulesFor }, { MaintenanceCalendar }, { Dispatcher }, { RouteError }] = await Promise.all([
      import('./config/load.js'),
      import('./rules/parse.js'),
      import('./notify/maintenance.js'),
      import('./notify/dispatch.js'),
      import('./notify/routing.js'),
    ]);
    const problems: string[] = [];
    let config: Config | null = null;
    try {
      // The SQLite path is looked at (never created: only `run` creates it), with the file's other errors.
      config = await loadConfig(configFile(o.config), process.env, { ...CONFIG_SOURCES, storagePath: storagePathProblem, rulePath: rulePathProblem });
    } catch (e) {
      if (!(e instanceof ConfigErrors)) throw e;
      problems.push(e.format());
    }
    let ruleCount = 0;
    let rules: CompiledRule[] = [];
    if (config) {
      try {
        rules = rulesFor(config);
        ruleCount = rules.length;
      } catch (e) {
        if (!(e instanceof RuleErrors)) throw e;
        problems.push(e.message);
      }
      // Only against rules that loaded: with a broken rule file, its events would all look unknown.
      if (problems.length === 0) {
        const { unknownEventNames } = await import('./notify/event-names.js');
        const unknown = unknownEventNames(config, rules);
        if (unknown.length > 0) problems.push(await atTheirLines(configFile(o.config), unknown));
      }
      let calendar: InstanceType<typeof MaintenanceCalendar> | null = null;
      try {
        // Routes, maintenance matches and inhibit targets compile exactly as the daemon's.
        calendar = new MaintenanceCalendar(config.maintenance);
        new Dispatcher(config, calendar);
      } catch (e) {
        if (!(e instanceof RouteError)) throw e;
        problems.push(`${config.file}: ${e.message}`);
      } finally {
        calendar?.close();
      }
      // A SQLite file a newer hostwatch migrated (a downgrade), or one that is no database or
      // damaged where these reads look: `run` would refuse to start.
      const schema = await storedSchemaProblem(config.storage).catch(() => null);
      if (schema !== null) {
        const where = describeStorage(config.storage);
        problems.push(`${config.file}: storage.path: ${schema.startsWith(where) ? schema : `${where}: ${schema}`}`);
      }
    }
    // A plan for more sites than sites.max plans for a site list run would refuse.
    if (config && o.sites !== undefined && o.sites > config.sites_max) {
      problems.push(`--sites ${o.sites}: more than sites.max (${config.sites_max.toLocaleString('en-US')}): run would refuse a site list that long and poll no site; raise sites.max`);
    }
    if (problems.length) fail(problems.join('\n'), EXIT_CONFIG);
    process.stdout.write(`${config!.file}: OK (${counted(ruleCount, 'rule')}, ${counted(config!.channels.length, 'channel')})\n`);
    // Online, the API is asked first: the number of sites it answers is the one to plan for.
    const online = o.online ? await probeOnline(config!) : null;
    for (const line of await budgetLines(config!, rules, o.sites, online?.sites)) process.stdout.write(`${line}\n`);
    online?.report();
  });

/**
 * What `check` says about the request budget: for the number of sites given, listed in
 * `sites`, answered by the API (`--online`, `answered`), or stored by a daemon in the SQLite
 * file at storage.path; without any, how many sites fit. (A PostgreSQL database is not
 * connected to: `check` works offline.)
 */
async function budgetLines(config: Config, rules: CompiledRule[], given: number | undefined, answered: number | undefined): Promise<string[]> {
  const sources = enabledSources(config);
  const priorities = sourcePriorities(sources, rules, config);
  let sites = given ?? (config.sites === 'all' ? (answered ?? null) : config.sites.length);
  let note = given !== undefined ? ' (--sites)' : config.sites !== 'all' ? ' (the sites list)' : answered !== undefined ? ' (GET /sites, just now)' : '';
  const storage = config.storage;
  if (sites === null && storage.engine === 'sqlite' && storage.path !== ':memory:' && existsSync(storage.path)) {
    const stored = await storedSiteCount(storage);
    if (stored !== null) {
      sites = stored;
      note = ` (the site list stored in ${storage.path})`;
    }
  }
  if (sites !== null) return describePlan(configPlan(config, sources, priorities, sites), config.api.max_requests_per_second, note);
  const fit = sitesThatFit(config, sources, priorities);
  return [
    `request budget: the number of sites is not known yet (no site list stored; pass --sites N to plan for N sites)`,
    fit === null ? '  the intervals fit the budget at any number of sites' : `  every interval is met up to ${fit.toLocaleString('en-US')} sites at api.max_requests_per_second ${config.api.max_requests_per_second}; beyond that, the least important sources are polled less often`,
  ];
}

/** The number of sites in the site list a daemon stored (null when none is stored or the file cannot be read). */
async function storedSiteCount(storage: Config['storage']): Promise<number | null> {
  let store: Store | null = null;
  try {
    // Read-only: check writes nothing, and a daemon may hold the file.
    store = await openStore(storage, { now: Date.now, readonly: true });
    const row = await (await reposOf(store)).snapshots.get(sitesSource.name, sitesSource.name);
    const { listOf } = await import('./pipeline/plan.js');
    return row ? listOf(sitesSource, JSON.parse(row.body)).length : null;
  } catch {
    return null;
  } finally {
    await store?.close().catch(() => undefined);
  }
}

/**
 * `check --online`: the key and each enabled source's scope, against the real API. Returns
 * the number of sites the API listed, and `report`, which prints what was found (and exits 1
 * when the key or a scope does not work).
 */
async function probeOnline(config: Config): Promise<{ sites: number | undefined; report: () => void }> {
  const { ApiClient, clientOptionsOf } = await import('./api/client.js');
  const { probeScopes } = await import('./sources/probe.js');
  const { secretsOf } = await import('./log.js');
  // The daemon's client, one request at a time and without retries (an answer, not a poll).
  const client = new ApiClient({ ...clientOptionsOf(config.api, secretsOf(config)), maxConcurrency: 1, retries: 0 });
  try {
    const r = await probeScopes(client, enabledSources(config), (name, siteId) => ({ paths: pathsFor(config, name, siteId) }));
    return {
      sites: r.fatal === null ? (r.sites ?? undefined) : undefined,
      report: () => {
        if (r.fatal !== null) fail(`online: ${config.api.base_url}: ${r.fatal}`, 1);
        process.stdout.write(`online: ${config.api.base_url}: the key works; GET /sites: ${r.sites} sites\n`);
        for (const l of r.lines) process.stdout.write(scrubOut(`  ${l.source.padEnd(24)} ${l.scope.padEnd(18)} ${l.status === 'ok' ? 'ok' : l.status === 'scope_missing' ? 'SCOPE MISSING' : 'ERROR'}  ${l.detail}`) + '\n');
        const bad = r.lines.filter((l) => l.status !== 'ok');
        const found = [onlineSitesProblem(config, r.siteIds)].filter((p) => p !== null);
        if (bad.length > 0) found.push(`${bad.length} of ${r.lines.length} enabled sources cannot read; add the scopes to the key (hostwatch scopes lists them) or set enabled: false for those sources`);
        if (found.length > 0) fail(found.map((p) => `online: ${p}`).join('\n'), 1);
      },
    };
  } finally {
    await client.close();
  }
}

/**
 * What `check --online` finds wrong with the site list the API answered, as run would meet
 * it: longer than sites.max (refused whole: no site polled), or without a site `sites:` lists
 * (that one skipped). Null when nothing.
 */
function onlineSitesProblem(config: Config, ids: readonly number[] | null): string | null {
  // Not read (the key lacks its scope, said with the sources): nothing to compare.
  if (ids === null) return null;
  if (config.sites === 'all') {
    if (ids.length <= config.sites_max) return null;
    return `GET /sites lists ${ids.length.toLocaleString('en-US')} sites, more than sites.max (${config.sites_max.toLocaleString('en-US')}): run would refuse the site list and poll no site; raise sites.max, or list the sites to watch in sites:`;
  }
  const answered = new Set(ids);
  const missing = config.sites.filter((id) => !answered.has(id));
  if (missing.length === 0) return null;
  return `sites: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not in the account (GET /sites lists ${ids.length.toLocaleString('en-US')} sites): run would skip ${missing.length === 1 ? 'it' : 'them'}`;
}

program
  .command('health')
  .description("ask a running daemon's /readyz at the config's server.listen; exit 0 when ready, 1 when not (the Docker HEALTHCHECK)")
  .option('-c, --config <file>', CONFIG_HELP)
  .addOption(new Option('--timeout <duration>', 'how long to wait for the answer').argParser(duration).default(4_000, '4s'))
  .action(async (o: { config?: string; timeout: number }) => {
    const config = await load(o.config, { secretsOptional: true });
    const listen = config.server.listen;
    if (listen === null) fail(`hostwatch health: ${config.file} sets no server.listen, so there is no /readyz to ask`, 1);
    const url = `${await readyzBase(listen)}/readyz`;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(o.timeout) });
      const body = await res.text();
      process.stdout.write(`${url}: ${res.status} ${body}\n`);
      process.exit(res.status === 200 ? 0 : 1);
    } catch (e) {
      // fetch says only "fetch failed": the reason is its cause (ECONNREFUSED: no daemon there).
      const code = (e as { cause?: { code?: unknown } }).cause?.code;
      const why = code === 'ECONNREFUSED' ? 'connection refused (is the daemon running, with this server.listen?)' : typeof code === 'string' ? `${(e as Error).message} (${code})` : (e as Error).message;
      fail(`hostwatch health: ${url}: ${why}`, 1);
    }
  });

/** Where a daemon listening on `listen` answers on this machine (a wildcard bind is asked on loopback). */
async function readyzBase(listen: string): Promise<string> {
  const { parseListen } = await import('./server/server.js');
  const { host, port } = parseListen(listen);
  const local = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${local.includes(':') ? `[${local}]` : local}:${port}`;
}

program
  .command('scopes')
  .description('print the least-privilege API scopes for the enabled sources (one per line), for a read-only key')
  .option('-c, --config <file>', CONFIG_HELP)
  .option('--why', 'also name the sources that need each scope')
  .action(async (o: { config?: string; why?: boolean }) => {
    const config = await load(o.config, { secretsOptional: true, serverUnused: true });
    const lines = scopesFor(enabledSources(config)).map(({ scope, sources }) => (o.why ? `${scope.padEnd(18)} ${sources.join(', ')}` : scope));
    process.stdout.write(`${lines.join('\n')}\n`);
  });

program
  .command('events')
  .description('print the event log from the database, oldest first (read-only; the daemon need not run)')
  .option('-c, --config <file>', `${CONFIG_HELP}; its storage (path or url) is read`)
  .option('--since <duration>', 'only events of the last DURATION (e.g. 30m, 1h, 2d)', duration)
  .option('--type <type>', 'only events of this type (site.offline or hostwatch.site.offline)', typeName)
  .option('--limit <n>', 'at most the newest N events', atLeastOne, 100)
  .option('--json', 'one CloudEvent JSON per line, as stored (control characters as \\u escapes)')
  .action(async (o: { config?: string; since?: number; type?: string; limit: number; json?: boolean }) => {
    const config = await load(o.config, { secretsOptional: true, serverUnused: true });
    // Read-only: it reads beside a running daemon and never writes (no migration, no lock).
    const store = await openDatabase(config, true, true);
    try {
      const type = o.type === undefined ? null : await knownTypeOrExit(config, o.type, store);
      const filter = { type, siteId: null, since: o.since === undefined ? null : Date.now() - o.since };
      const rows = await (await reposOf(store)).events.latest(filter, o.limit + 1);
      for (const r of rows.slice(0, o.limit).reverse()) {
        const line = o.json ? terminalJson(r.body) : eventLine(JSON.parse(r.body) as HostwatchEvent);
        process.stdout.write(`${line}\n`);
      }
      // On stderr, so `--json` output stays one event per line (and stays empty for none).
      if (rows.length > o.limit) process.stderr.write(`(the newest ${o.limit} shown; --limit N shows more)\n`);
      const filters = [o.type === undefined ? '' : `--type ${o.type}`, o.since === undefined ? '' : '--since'].filter(Boolean);
      if (rows.length === 0) process.stderr.write(filters.length ? `(no event matches ${filters.join(' and ')})\n` : '(the log holds no events yet)\n');
    } finally {
      await store.close();
    }
  });

program
  .command('simulate')
  .description('run the Hosting Control API simulator alone')
  .option('--port <n>', 'port (0 = any free port)', port, 8787)
  .option('--seed <s>', 'world seed', positiveInt, 1)
  .option('--sites <n>', 'number of sites', positiveInt, 5)
  .option('--tick <ms>', 'advance the world every N ms (0 = never)', positiveInt, 5000)
  .action(async (o: { port: number; seed: number; sites: number; tick: number }) => {
    // Loaded on demand: `hostwatch run` does not carry the simulator in memory.
    const { startSimulator } = await import('./simulator/index.js');
    const sim = await startSimulator({ port: o.port, seed: o.seed, sites: o.sites, tickMs: o.tick || false });
    // The control interface has no index: /_sim/world shows the whole world (docs/simulator.md).
    process.stdout.write(`simulator listening on ${sim.url}  (API key: sim-key; base_url: ${sim.url}; control: ${sim.url}/_sim/world)\n`);
    onShutdown(() => sim.close());
  });

program
  .command('demo')
  .description('simulator + daemon + readable console output (npm start)')
  .option('--duration <s>', 'stop after N seconds (0 = run until Ctrl-C)', positiveInt, 0)
  .action(async (o: { duration: number }) => {
    const { runDemo } = await import('./demo.js');
    const demo = await runDemo({ durationMs: o.duration * 1000 });
    onShutdown(() => demo.stop());
    await demo.done;
    process.exit(0);
  });

const rulesCmd = program.command('rules').description('test rules and replay history through them');

rulesCmd
  .command('test')
  .description('run rule test files (steps of snapshots and the events expected at each); exit 1 on a failure')
  .argument('<files...>', 'rule test files (YAML), e.g. rules/tests/*.test.yaml')
  .action(async (files: string[]) => {
    const [{ runRuleTestFile }, { RuleErrors }] = await Promise.all([import('./rules/rule-tests.js'), import('./rules/parse.js')]);
    let failed = 0;
    let passed = 0;
    for (const file of files) {
      try {
        const r = runRuleTestFile(file, join(packageRoot(), 'rules'), { sourceNames: SOURCE_NAMES, cwd: process.cwd() });
        for (const line of r.lines) process.stdout.write(`${line}\n`);
        failed += r.failed;
        passed += r.passed;
      } catch (e) {
        if (e instanceof RuleErrors) fail(e.message, EXIT_CONFIG);
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') fail(`${file}: no such file`, EXIT_CONFIG);
        if (code === 'EISDIR') fail(`${file}: is a folder; give the test files in it, like ${file.replace(/\/+$/, '')}/*.test.yaml`, EXIT_CONFIG);
        if (code === 'EACCES') fail(`${file}: cannot be read by this user`, EXIT_CONFIG);
        throw e;
      }
    }
    process.stdout.write(`${passed} passed, ${failed} failed\n`);
    if (failed > 0) process.exit(1);
  });

rulesCmd
  .command('backtest')
  .description('replay the stored change log through the current rules: what would have fired, when, per rule and channel')
  .option('-c, --config <file>', `${CONFIG_HELP}: its rules, routes, channels and storage`)
  .addOption(new Option('--since <duration>', 'how far back to replay (e.g. 7d, 30d)').argParser(duration).default(30 * 86_400_000, '30d'))
  .option('--rule <name>', 'only this rule (evaluated even if it is disabled, to try it before turning it on)')
  .action(async (o: { config?: string; since: number; rule?: string }) => {
    const config = await load(o.config, { secretsOptional: true, serverUnused: true });
    let rules = await loadRulesOrExit(config);
    const [{ backtest, formatBacktest }, { unknownRule }, { isHumanChannel }, { SiteLabeler }, { listOf, siteInfoFromRecord }] = await Promise.all([
      import('./rules/backtest.js'),
      import('./rules/explain.js'),
      import('./notify/dispatch.js'),
      import('./labels.js'),
      import('./pipeline/plan.js'),
    ]);
    if (o.rule !== undefined) {
      const one = rules.find((r) => r.name === o.rule);
      if (!one) fail(`hostwatch rules backtest: ${unknownRule(o.rule!, rules)}`, EXIT_CONFIG);
      rules = [{ ...one, enabled: true }];
    }
    const router = await compileRouterOrExit(config);
    const store = await openDatabase(config);
    try {
      const now = Date.now();
      const since = now - o.since;
      const r = await reposOf(store);
      const sites = await r.snapshots.get(sitesSource.name, sitesSource.name);
      const known = sites ? listOf(sitesSource, JSON.parse(sites.body)).map(siteInfoFromRecord) : [];
      const human = new Set(config.channels.filter((c) => isHumanChannel(c.type)).map((c) => c.name));
      const result = await backtest(r.history.since(since), {
        rules,
        router,
        since,
        now,
        everyMs: (s) => config.sources[s.name]?.every_ms ?? s.defaultEveryMs,
        sites: known,
        labeler: new SiteLabeler(config.site_labels),
        incidents: {
          config: config.incidents,
          isHuman: (c) => human.has(c),
          watched: config.sites === 'all' ? known.length : config.sites.length,
        },
      });
      const header = `backtest since ${new Date(since).toISOString()}: ${rules.filter((r) => r.enabled).length} rules, ${result.entities} entities, ${result.snapshots} snapshots replayed, ${result.events.length} events`;
      printRows(formatBacktest(result, header));
    } finally {
      await store.close();
    }
  });

program
  .command('explain')
  .description('why an event exists (EVENT_ID), or why rule R sent nothing about subject S (--subject S --rule R)')
  .argument('[event-id]', 'an event id from the log, a feed or a webhook-id header')
  .option('-c, --config <file>', `${CONFIG_HELP}: its rules and storage`)
  .option('--subject <subject>', 'the subject an expected event is about, e.g. sites/12/health')
  .option('--rule <name>', 'the rule that should have sent it')
  .action(async (id: string | undefined, o: { config?: string; subject?: string; rule?: string }) => {
    if ((id === undefined) === (o.subject === undefined || o.rule === undefined)) {
      const given = id !== undefined ? 'an EVENT_ID and --subject/--rule were both given' : o.subject === undefined && o.rule === undefined ? 'nothing to explain was given' : `--${o.subject === undefined ? 'subject' : 'rule'} is missing`;
      fail(`hostwatch explain: ${given}: give an EVENT_ID, or --subject S and --rule R (not both)`, EXIT_CONFIG);
    }
    const config = await load(o.config, { secretsOptional: true, serverUnused: true });
    const rules = await loadRulesOrExit(config);
    const { explainEvent, explainWhyNot, unknownRule } = await import('./rules/explain.js');
    const store = await openDatabase(config);
    try {
      const [{ unroutedBecause }, { SiteDirectory }, { SiteLabeler }] = await Promise.all([
        import('./notify/routing.js'),
        import('./pipeline/site-directory.js'),
        import('./labels.js'),
      ]);
      const r = await reposOf(store);
      // The sites as the daemon's rules see them: the stored site list, with the config's labels.
      const directory = new SiteDirectory(new SiteLabeler(config.site_labels));
      await directory.load(r.snapshots);
      const deps: ExplainDeps = {
        ...r,
        site: (siteId) => directory.get(siteId),
        rules,
        now: Date.now(),
        retentionMs: config.history.retention_ms,
        unrouted: (e) => unroutedBecause(config.routes, config.channels, e),
      };
      if (id !== undefined) {
        const lines = await explainEvent(deps, id);
        if (!lines) fail(`hostwatch explain: no event with id ${id} in ${store.description}`, 1);
        printRows(lines);
      } else {
        if (!rules.some((r) => r.name === o.rule)) fail(`hostwatch explain: ${unknownRule(o.rule!, rules)}`, EXIT_CONFIG);
        printRows((await explainWhyNot(deps, o.subject!, o.rule!)).lines);
      }
    } finally {
      await store.close();
    }
  });

async function loadRulesOrExit(config: Config): Promise<CompiledRule[]> {
  const { RuleErrors, rulesFor } = await import('./rules/parse.js');
  try {
    return rulesFor(config);
  } catch (e) {
    if (e instanceof RuleErrors) fail(e.message, EXIT_CONFIG);
    throw e;
  }
}

async function compileRouterOrExit(config: Config): Promise<Router> {
  const { compileRouter, RouteError } = await import('./notify/routing.js');
  try {
    return compileRouter(config.routes, config.channels);
  } catch (e) {
    if (e instanceof RouteError) fail(`${config.file}: ${e.message}`, EXIT_CONFIG);
    throw e;
  }
}

/**
 * Open (and if needed migrate) the configured database; the daemon may be running on it
 * (these commands do not take the daemon's lock). With `mustExist` (reading history), a
 * missing SQLite file, or a PostgreSQL database without hostwatch's tables, is an error
 * rather than a new empty database; `readonly` opens it without migrating or writing.
 */
async function openDatabase(config: Config, mustExist = true, readonly = false): Promise<Store> {
  const storage = config.storage;
  if (mustExist && storage.engine === 'sqlite' && !storageExists(storage.path)) {
    fail(`hostwatch: no database at ${storage.path} (storage.path); \`hostwatch run\` creates it on its first poll`, 1);
  }
  try {
    return await openStore(storage, { now: Date.now, readonly, mustExist });
  } catch (e) {
    if (e instanceof SchemaMissingError) {
      fail(`hostwatch: no hostwatch database in ${describeStorage(storage)} (storage.url): ${e.message}; \`hostwatch run\` creates it on its first start`, 1);
    }
    // A connection failure already names the database.
    fail(`hostwatch: ${e instanceof StorageUnreachableError ? '' : `cannot open ${describeStorage(storage)}: `}${(e as Error).message}`, 1);
  }
}

/** The repositories over an open store (loaded with the store, not at start: they bring the query builder). */
async function reposOf(store: Store): Promise<Repos> {
  return (await import('./store/repos.js')).repos(store);
}

registerDeliveryCommands(program, { load, fail, openDatabase, duration, atLeastOne, configHelp: CONFIG_HELP });

program
  .command('cluster')
  .description('the cluster of instances on a PostgreSQL database (docs/cluster.md)')
  .command('status')
  .description('members, who holds what (entities, deliveries, the timers), lag and last heartbeats (read-only)')
  .option('-c, --config <file>', `${CONFIG_HELP}; its storage.url is read`)
  .option('--json', 'the status as one JSON document')
  .action(async (o: { config?: string; json?: boolean }) => {
    const config = await load(o.config, { secretsOptional: true, serverUnused: true });
    if (config.storage.engine !== 'postgres') {
      fail(
        `hostwatch cluster status: ${describeStorage(config.storage)} has no cluster: a SQLite file is used by one daemon at a time. A cluster needs PostgreSQL (storage.url; docs/cluster.md)`,
        EXIT_CONFIG,
      );
    }
    const store = await openDatabase(config, true);
    try {
      const r = await reposOf(store);
      const { ClusterRepo } = await import('./store/cluster-repo.js');
      const status = await readClusterStatus(new ClusterRepo(store), r.events, r.snapshots, Date.now());
      process.stdout.write(o.json ? `${JSON.stringify(status, null, 2)}\n` : `${clusterStatusLines(status).join('\n')}\n`);
    } finally {
      await store.close();
    }
  });

/**
 * Problems found after the config loaded (they need its rules), as its own errors are
 * written: FILE:LINE:COLUMN: PATH: MESSAGE, in file order.
 */
async function atTheirLines(file: string, problems: readonly UnknownEventName[]): Promise<string> {
  const [{ readFileSync }, { readYamlTree }, { formatConfigErrors, formatPath }] = await Promise.all([import('node:fs'), import('./config/yaml-tree.js'), import('./config/errors.js')]);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    // Not a file (a config built in code): the problems without positions.
    return problems.map((p) => `${file}: ${formatPath(p.path)}: ${p.message}`).join('\n');
  }
  // Only the positions are read: variables stand as they are written.
  const tree = readYamlTree(text, file, {}, { placeholder: () => '' });
  const errors = problems.map((p) => ({ file, ...tree.valueAt(p.path), path: formatPath(p.path), message: p.message }));
  errors.sort((a, b) => a.line - b.line || a.column - b.column);
  return formatConfigErrors(errors);
}

/** `1 channel`, `2 channels`, `0 channels`. */
function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** An event as one terminal line: its time, what the console channel prints, and its id (for explain and redeliver). */
function eventLine(e: HostwatchEvent): string {
  return `${e.time}  ${formatEventLine(e)}  ${e.id}`;
}

/**
 * The CloudEvents type `--type` names (resolveTypeFilter, as the API's `type`): an event
 * hostwatch can raise, or one the log still holds; else exit 2, naming the near miss.
 */
async function knownTypeOrExit(config: Config, text: string, store: Store): Promise<string> {
  let rules: CompiledRule[] = [];
  try {
    rules = (await import('./rules/parse.js')).rulesFor(config);
  } catch {
    // Broken rule files do not stop `events`; the catalog still names the built-in events.
  }
  const events = (await reposOf(store)).events;
  const r = await resolveTypeFilter(text, knownEventNames(rules), (type) => events.holdsType(type));
  if (r.ok) return r.type;
  fail(`hostwatch events: --type: ${r.message}`, EXIT_CONFIG);
}


program.parseAsync(process.argv).catch((e: unknown) => fail(`hostwatch: ${(e as Error).message}`, 1));
