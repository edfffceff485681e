#!/usr/bin/env node
import { Command, InvalidArgumentError } from 'commander';
import { parseDuration } from './config/duration.js';
import { loadConfig } from './config/load.js';
import { ConfigErrors } from './config/errors.js';
import type { Config } from './config/types.js';
import { createApp, rulesFor, SOURCE_NAMES, type App } from './main.js';
import type { HostwatchEvent } from './events/types.js';
import { formatEventLine } from './notify/channels/console.js';
import { Dispatcher } from './notify/dispatch.js';
import { MaintenanceCalendar } from './notify/maintenance.js';
import { compileRouter, RouteError } from './notify/routing.js';
import { registerDeliveryCommands } from './notify/cli-commands.js';
import { RuleErrors } from './rules/parse.js';
import { eventType } from './events/envelope.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './paths.js';
import { runRuleTestFile } from './rules/rule-tests.js';
import { backtest, formatBacktest } from './rules/backtest.js';
import { explainEvent, explainWhyNot, unknownRule, type ExplainDeps } from './rules/explain.js';
import { describeStorage, openStore, type Store } from './store/db.js';
import { repos } from './store/repos.js';
import { listOf, siteInfoFromRecord } from './pipeline/plan.js';
import { sitesSource } from './sources/registry.js';
import { enabledSources, scopesFor } from './sources/select.js';

/** Exit codes: 0 ok, 1 runtime failure, 2 bad config, rules or arguments. */
const EXIT_CONFIG = 2;

function fail(message: string, code: number): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

async function load(file: string): Promise<Config> {
  try {
    return await loadConfig(file, process.env, { sourceNames: SOURCE_NAMES });
  } catch (e) {
    if (e instanceof ConfigErrors) fail(e.format(), EXIT_CONFIG);
    throw e;
  }
}

/** Build the app, mapping bad rules/routes/channels to exit code 2 with their messages. */
async function build(config: Config): Promise<App> {
  try {
    return await createApp(config);
  } catch (e) {
    if (e instanceof RuleErrors) fail(e.message, EXIT_CONFIG);
    // Named with its file, as `check` and `rules backtest` name it (invariant 8).
    if (e instanceof RouteError) fail(`${config.file}: ${e.message}`, EXIT_CONFIG);
    fail(`hostwatch: cannot start: ${(e as Error).message}`, 1);
  }
}

function onShutdown(stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`hostwatch: ${signal}, finishing in-flight work…\n`);
    stop().then(
      () => process.exit(0),
      (e) => fail(`hostwatch: error while stopping: ${(e as Error).message}`, 1),
    );
  };
  process.once('SIGTERM', () => handler('SIGTERM'));
  process.once('SIGINT', () => handler('SIGINT'));
}

function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be a whole number ≥ 0');
  return n;
}

function atLeastOne(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number ≥ 1');
  return n;
}

function duration(v: string): number {
  const ms = parseDuration(v);
  if (ms === null) throw new InvalidArgumentError('expected a duration like 30m, 1h, 2d or 1h30m');
  return ms;
}

function typeName(v: string): string {
  const t = eventType(v);
  if (t === null) throw new InvalidArgumentError('expected an event type like site.offline or hostwatch.site.offline');
  return t;
}

const program = new Command()
  .name('hostwatch')
  .description('Polls the Hosting Control API and turns changes into signed, durable events.')
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : EXIT_CONFIG));

program
  .command('run')
  .description('run the daemon in the foreground until SIGTERM/SIGINT')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .action(async (o: { config: string }) => {
    const app = await build(await load(o.config));
    onShutdown(() => app.stop());
    try {
      await app.start();
    } catch (e) {
      await app.stop();
      fail(`hostwatch: cannot start: ${(e as Error).message}`, (e as { code?: string }).code === 'server_config' ? EXIT_CONFIG : 1);
    }
  });

program
  .command('poll')
  .description('poll every enabled source once, deliver what is pending, and exit')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .option('--once', 'one full cycle (required: the daemon is `hostwatch run`)')
  .action(async (o: { config: string; once?: boolean }) => {
    if (!o.once) fail('hostwatch poll: pass --once (the continuous daemon is `hostwatch run`)', EXIT_CONFIG);
    const app = await build(await load(o.config));
    try {
      const { pending } = await app.runOnce();
      if (pending > 0) app.log.warn({ pending }, 'deliveries still pending after the drain timeout; they stay in the outbox');
    } finally {
      await app.stop();
    }
  });

program
  .command('check')
  .description('validate the config and the rules; print every error; exit 2 on any')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .action(async (o: { config: string }) => {
    const problems: string[] = [];
    let config: Config | null = null;
    try {
      config = await loadConfig(o.config, process.env, { sourceNames: SOURCE_NAMES });
    } catch (e) {
      if (!(e instanceof ConfigErrors)) throw e;
      problems.push(e.format());
    }
    let ruleCount = 0;
    if (config) {
      try {
        ruleCount = rulesFor(config).length;
      } catch (e) {
        if (!(e instanceof RuleErrors)) throw e;
        problems.push(e.message);
      }
      let calendar: MaintenanceCalendar | null = null;
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
    }
    if (problems.length) fail(problems.join('\n'), EXIT_CONFIG);
    process.stdout.write(`${config!.file}: OK (${ruleCount} rules, ${config!.channels.length} channels)\n`);
  });

program
  .command('scopes')
  .description('print the least-privilege API scopes for the enabled sources (one per line), for a read-only key')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .option('--why', 'also name the sources that need each scope')
  .action(async (o: { config: string; why?: boolean }) => {
    const config = await load(o.config);
    const lines = scopesFor(enabledSources(config)).map(({ scope, sources }) => (o.why ? `${scope.padEnd(18)} ${sources.join(', ')}` : scope));
    process.stdout.write(`${lines.join('\n')}\n`);
  });

program
  .command('events')
  .description('print the event log from the database, oldest first (read-only; the daemon need not run)')
  .requiredOption('-c, --config <file>', 'config file (YAML); its storage (path or url) is read')
  .option('--since <duration>', 'only events of the last DURATION (e.g. 30m, 1h, 2d)', duration)
  .option('--type <type>', 'only events of this type (site.offline or hostwatch.site.offline)', typeName)
  .option('--limit <n>', 'at most the newest N events', atLeastOne, 100)
  .option('--json', 'one CloudEvent JSON per line, exactly as stored')
  .action(async (o: { config: string; since?: number; type?: string; limit: number; json?: boolean }) => {
    const config = await load(o.config);
    let store: Store;
    try {
      // Read-only: it reads beside a running daemon and never writes (no migration, no lock).
      store = await openStore(config.storage, { now: Date.now, readonly: true });
    } catch (e) {
      fail(`hostwatch events: cannot open ${describeStorage(config.storage)}: ${(e as Error).message}`, 1);
    }
    try {
      const filter = { type: o.type ?? null, siteId: null, since: o.since === undefined ? null : Date.now() - o.since };
      const rows = await repos(store).events.latest(filter, o.limit + 1);
      for (const r of rows.slice(0, o.limit).reverse()) {
        const line = o.json ? r.body : eventLine(JSON.parse(r.body) as HostwatchEvent);
        process.stdout.write(`${line}\n`);
      }
      // On stderr, so `--json` output stays one event per line.
      if (rows.length > o.limit) process.stderr.write(`(the newest ${o.limit} shown; --limit N shows more)\n`);
    } finally {
      await store.close();
    }
  });

program
  .command('simulate')
  .description('run the Hosting Control API simulator alone')
  .option('--port <n>', 'port (0 = any free port)', positiveInt, 8787)
  .option('--seed <s>', 'world seed', positiveInt, 1)
  .option('--sites <n>', 'number of sites', positiveInt, 5)
  .option('--tick <ms>', 'advance the world every N ms (0 = never)', positiveInt, 5000)
  .action(async (o: { port: number; seed: number; sites: number; tick: number }) => {
    // Loaded on demand: `hostwatch run` does not carry the simulator in memory.
    const { startSimulator } = await import('./simulator/index.js');
    const sim = await startSimulator({ port: o.port, seed: o.seed, sites: o.sites, tickMs: o.tick || false });
    process.stdout.write(`simulator listening on ${sim.url}  (API key: sim-key; control: ${sim.url}/_sim/)\n`);
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
  .action((files: string[]) => {
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
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') fail(`${file}: no such file`, EXIT_CONFIG);
        throw e;
      }
    }
    process.stdout.write(`${passed} passed, ${failed} failed\n`);
    if (failed > 0) process.exit(1);
  });

rulesCmd
  .command('backtest')
  .description('replay the stored change log through the current rules: what would have fired, when, per rule and channel')
  .requiredOption('-c, --config <file>', 'config file (YAML): its rules, routes, channels and storage')
  .option('--since <duration>', 'how far back to replay (e.g. 7d, 30d)', duration, 30 * 86_400_000)
  .option('--rule <name>', 'only this rule (evaluated even if it is disabled, to try it before turning it on)')
  .action(async (o: { config: string; since: number; rule?: string }) => {
    const config = await load(o.config);
    let rules = loadRulesOrExit(config);
    if (o.rule !== undefined) {
      const one = rules.find((r) => r.name === o.rule);
      if (!one) fail(`hostwatch rules backtest: ${unknownRule(o.rule!, rules)}`, EXIT_CONFIG);
      rules = [{ ...one, enabled: true }];
    }
    const router = compileRouterOrExit(config);
    const store = await openDatabase(config);
    try {
      const now = Date.now();
      const since = now - o.since;
      const r = repos(store);
      const sites = await r.snapshots.get(sitesSource.name, sitesSource.name);
      const result = await backtest(r.history.since(since), {
        rules,
        router,
        since,
        now,
        everyMs: (s) => config.sources[s.name]?.every_ms ?? s.defaultEveryMs,
        sites: sites ? listOf(sitesSource, JSON.parse(sites.body)).map(siteInfoFromRecord) : [],
      });
      const header = `backtest since ${new Date(since).toISOString()}: ${rules.filter((r) => r.enabled).length} rules, ${result.entities} entities, ${result.snapshots} snapshots replayed, ${result.events.length} events`;
      for (const line of formatBacktest(result, header)) process.stdout.write(`${line}\n`);
    } finally {
      await store.close();
    }
  });

program
  .command('explain')
  .description('why an event exists (EVENT_ID), or why rule R sent nothing about subject S (--subject S --rule R)')
  .argument('[event-id]', 'an event id from the log, a feed or a webhook-id header')
  .requiredOption('-c, --config <file>', 'config file (YAML): its rules and storage')
  .option('--subject <subject>', 'the subject an expected event is about, e.g. sites/12/health')
  .option('--rule <name>', 'the rule that should have sent it')
  .action(async (id: string | undefined, o: { config: string; subject?: string; rule?: string }) => {
    if ((id === undefined) === (o.subject === undefined || o.rule === undefined)) {
      fail('hostwatch explain: give an EVENT_ID, or --subject S and --rule R (not both)', EXIT_CONFIG);
    }
    const config = await load(o.config);
    const rules = loadRulesOrExit(config);
    const store = await openDatabase(config);
    try {
      const deps: ExplainDeps = { ...repos(store), rules, now: Date.now() };
      if (id !== undefined) {
        const lines = await explainEvent(deps, id);
        if (!lines) fail(`hostwatch explain: no event with id ${id} in ${store.description}`, 1);
        for (const line of lines) process.stdout.write(`${line}\n`);
      } else {
        if (!rules.some((r) => r.name === o.rule)) fail(`hostwatch explain: ${unknownRule(o.rule!, rules)}`, EXIT_CONFIG);
        for (const line of (await explainWhyNot(deps, o.subject!, o.rule!)).lines) process.stdout.write(`${line}\n`);
      }
    } finally {
      await store.close();
    }
  });

function loadRulesOrExit(config: Config): ReturnType<typeof rulesFor> {
  try {
    return rulesFor(config);
  } catch (e) {
    if (e instanceof RuleErrors) fail(e.message, EXIT_CONFIG);
    throw e;
  }
}

function compileRouterOrExit(config: Config): ReturnType<typeof compileRouter> {
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
 * missing SQLite file is an error rather than a new empty database.
 */
async function openDatabase(config: Config, mustExist = true): Promise<Store> {
  const storage = config.storage;
  if (mustExist && storage.engine === 'sqlite' && storage.path !== ':memory:' && !existsSync(storage.path)) {
    fail(`hostwatch: no database at ${storage.path} (storage.path); the daemon creates it on its first poll`, 1);
  }
  try {
    return await openStore(storage, { now: Date.now });
  } catch (e) {
    fail(`hostwatch: cannot open ${describeStorage(storage)}: ${(e as Error).message}`, 1);
  }
}

registerDeliveryCommands(program, { load, fail, openDatabase, duration, atLeastOne });

/** An event as one terminal line: its time, then what the console channel prints. */
function eventLine(e: HostwatchEvent): string {
  return `${e.time}  ${formatEventLine(e)}`;
}

program.parseAsync(process.argv).catch((e: unknown) => fail(`hostwatch: ${(e as Error).message}`, 1));
