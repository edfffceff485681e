import { join } from 'node:path';
import type { Logger } from 'pino';
import { ApiClient, clientOptionsOf } from './api/client.js';
import { formatPath } from './config/errors.js';
import type { ChannelConfig, Config } from './config/types.js';
import type { HostwatchEvent } from './events/types.js';
import { createLogger, secretScrubber, secretsOf } from './log.js';
import { RepeatedFailure } from './repeated-failure.js';
import type { Channel, SendResult } from './notify/channel.js';
import { ConsoleChannel } from './notify/channels/console.js';
import type { EmailChannel } from './notify/channels/email.js';
import type { SlackChannel } from './notify/channels/slack.js';
import { WebhookChannel } from './notify/channels/webhook.js';
import { discordProvider } from './notify/channels/discord.js';
import { HttpChannel, type Pacer, type Provider } from './notify/channels/http.js';
import { ntfyProvider } from './notify/channels/ntfy.js';
import { opsgenieProvider } from './notify/channels/opsgenie.js';
import { pagerDutyProvider } from './notify/channels/pagerduty.js';
import { summaryText, type ItemText } from './notify/channels/render.js';
import { teamsProvider } from './notify/channels/teams.js';
import { telegramProvider } from './notify/channels/telegram.js';
import { compileTemplate, templateText } from './notify/templates.js';
import { Dispatcher } from './notify/dispatch.js';
import { unknownEventNames, type UnknownEventName } from './notify/event-names.js';
import { RouteError } from './notify/routing.js';
import { DIGEST_GROUP } from './notify/grouping.js';
import { MaintenanceCalendar } from './notify/maintenance.js';
import { Notifier } from './notify/notifier.js';
import { OutboxWorker } from './notify/outbox-worker.js';
import { knownEventNames } from './events/catalog.js';
import { eventId, TYPE_PREFIX } from './events/envelope.js';
import { operatorEvent } from './events/operator.js';
import { packageVersion } from './paths.js';
import type { RequestBudget } from './api/budget.js';
import { Poller, type PollOutcome } from './pipeline/poller.js';
import { resolveRetiredAlerts } from './pipeline/retired-alerts.js';
import { rulesFor } from './rules/parse.js';
import type { CompiledRule } from './rules/types.js';
import { Scheduler, type ScheduledSource, type SchedulerDeps } from './scheduler/scheduler.js';
import { EventEmitter } from 'node:events';
import { Metrics } from './metrics.js';
import type { AppBusEvents, ServerContext } from './server/context.js';
import { apiRoutes } from './server/routes/api.js';
import { dashboardRoutes } from './server/routes/dashboard.js';
import { feedRoutes } from './server/routes/feed.js';
import { healthRoutes } from './server/routes/health.js';
import { metricsRoutes } from './server/routes/metrics.js';
import { silencesRoutes } from './server/routes/silences.js';
import { startServer } from './server/server.js';
import { Fetcher } from './sources/fetch.js';
import { isTopLevel } from './sources/registry.js';
import { enabledSources, pathsFor } from './sources/select.js';
import { Followups } from './scheduler/followups.js';
import { configPlan, describePlan, sourcePriorities } from './scheduler/budget-plan.js';
import { openStore, type Store } from './store/db.js';
import type { PruneResult } from './store/history-repo.js';
import { repos, type Repos } from './store/repos.js';
import { ClusterRepo } from './store/cluster-repo.js';
import { HEARTBEAT_EVERY_MS } from './store/daemon-repo.js';
import { DEFAULTS } from './config/parse.js';
import { hostname } from 'node:os';
import { SiteLabeler } from './labels.js';
import { alertSeverities } from './notify/incidents.js';
import { IncidentTracker } from './notify/incident-tracker.js';
import { Reevaluator } from './pipeline/reevaluate.js';
import { Timekeeper } from './scheduler/timekeeper.js';
import { Heartbeat } from './selfwatch/heartbeat.js';
import { StorageWatch } from './selfwatch/storage-watch.js';
import { Watchdog } from './selfwatch/watchdog.js';
import { configFingerprint, joinCluster, type Cluster } from './cluster/cluster.js';
import { clusterWorkClaims } from './cluster/work-claims.js';

/** Injection points for tests, the demo and benchmarks; production uses the defaults. */
export interface AppOptions {
  now?: () => number;
  random?: () => number;
  logDestination?: NodeJS.WritableStream;
  /** Where the console channel prints. */
  consoleWrite?: (line: string) => void;
  onEvents?: (events: HostwatchEvent[]) => void;
  onAttempt?: (info: { event: HostwatchEvent; channel: string; attempt: number; result: SendResult; state: string; durationMs: number }) => void;
  /** Replace or add channels by name (tests). */
  channels?: Channel[];
  /** How chat channels wait between messages (tests pass a recorder). */
  sleep?: (ms: number) => Promise<void>;
  /** Called after every poll of an entity (benchmarks time each entity's polls). */
  onPoll?: (source: string, outcome: PollOutcome) => void;
  /** What ticks the scheduler (benchmarks that scale time tick it faster); default every second. */
  ticker?: SchedulerDeps['ticker'];
  /**
   * When each API request may go (pace, 429 pause, priority order). Default: a LocalBudget
   * at api.max_requests_per_second; a cluster passes one budget its instances share.
   */
  budget?: RequestBudget;
  /** How long stop() waits for polls and sends in flight (default STOP_TIMEOUT_MS). */
  stopTimeoutMs?: number;
  /** How long the store must fail before storage.failing fires (default STORAGE_ALERT_AFTER_MS). */
  storageAlertAfterMs?: number;
  /** How often the daemon writes its liveness row (default HEARTBEAT_EVERY_MS; tests shorten it). */
  daemonBeatEveryMs?: number;
  /**
   * Open the store as a daemon (default true): on SQLite take the one-daemon lock of the
   * file (a second daemon refuses to start); on PostgreSQL join the database's cluster.
   */
  daemon?: boolean;
  /** The cluster's monotonic clock and member ids (tests); defaults: performance.now, randomUUID. */
  cluster?: { monotonic?: () => number; newId?: () => string };
}

/**
 * How long a stop waits for the polls and sends in flight before it closes anyway: well
 * inside the 60 s the service files give (docs/operations.md). What it cuts off is redone
 * after the next start: an outbox row stays pending until a send is recorded, and a poll
 * whose result was not committed changed nothing.
 */
export const STOP_TIMEOUT_MS = 30_000;

/** The wired program: every part, built once, plus the ways to run it. */
export interface App {
  config: Config;
  log: Logger;
  store: Store;
  client: ApiClient;
  rules: CompiledRule[];
  poller: Poller;
  scheduler: Scheduler;
  /** What fetches imply for later fetches (detail reads, adaptive polling); fed by the poller. */
  followups: Followups;
  /** Time-driven work: clock rules re-evaluated, platform incidents settled, the watchdog. */
  timekeeper: Timekeeper;
  /** The dead man's switch pinger (null without config `heartbeat`). */
  heartbeat: Heartbeat | null;
  worker: OutboxWorker;
  /** Decides and queues where stored events go; `publish` stores and dispatches one. */
  notifier: Notifier;
  metrics: Metrics;
  /** Live events for in-process consumers (SSE, the dashboard, tests). */
  bus: EventEmitter<AppBusEvents>;
  /** This daemon's cluster membership (PostgreSQL daemons; null on SQLite and for commands). */
  cluster: Cluster | null;
  scrub: (text: string) => string;
  /**
   * One full cycle of every enabled source, then deliver what is pending (bounded wait).
   * `polls` and `failed` count the polls of the cycle: all failed means nothing could be read.
   */
  runOnce(): Promise<{ pending: number; polls: number; failed: number }>;
  /** Start the daemon: scheduler, outbox worker and (if configured) the HTTP server. */
  start(): Promise<void>;
  /** The operator server's address, once started (null without `server.listen`). */
  serverUrl: string | null;
  /** Graceful stop: start no new poll or send, let those in flight finish (up to the stop timeout), close. */
  stop(): Promise<void>;
  /**
   * Delete change-log history, evidence and the records of deliveries that succeeded, older
   * than `history.retention` (the daemon runs this every `history.prune_every`).
   */
  pruneHistory(): Promise<PruneResult & { deliveries: number }>;
}

/** The config names events no rule sends (`inhibit:`, `incidents.alerts`): `run` refuses to start, as `check` reports them. */
export class UnknownEventNamesError extends RouteError {
  constructor(
    file: string,
    readonly problems: UnknownEventName[],
  ) {
    super(problems.map((u) => `${formatPath(u.path)}: ${u.message}`).join(`\n${file}: `));
  }
}

/**
 * Build every part from a validated config. Throws RuleErrors / MigrationError on bad input,
 * DatabaseInUseError when another daemon runs on the same database.
 */
export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const now = opts.now ?? Date.now;
  const random = opts.random ?? Math.random;
  const scrub = secretScrubber(secretsOf(config));
  const log = createLogger({ level: config.log.level, pretty: config.log.pretty, scrub, destination: opts.logDestination });
  const rules = rulesFor(config);
  const unknownEvents = unknownEventNames(config, rules);
  if (unknownEvents.length > 0) throw new UnknownEventNamesError(config.file, unknownEvents);
  const maintenance = new MaintenanceCalendar(config.maintenance);
  const dispatcher = new Dispatcher(config, maintenance, alertSeverities(rules));
  const store = await openStore(config.storage, {
    now,
    daemon: opts.daemon ?? true,
    // Our transactions never wait on the network: one idle for a lease is a frozen member's.
    ...((opts.daemon ?? true) ? { idleInTransactionMs: config.cluster.lease_ms } : {}),
    onError: (e) => log.warn({ err: scrub(String(e)) }, 'database connection lost (the pool replaces it)'),
    onMigrated: (names) => log.info({ migrations: names }, `database migrated: ${names.join(', ')}`),
  });
  let cluster: Cluster | null = null;
  try {
    // Every daemon on PostgreSQL is a member of its database's cluster (docs/cluster.md).
    if (store.engine === 'postgres' && (opts.daemon ?? true)) cluster = await joinCluster(config.cluster, store, { log, scrub, channels: config.channels.map((c) => c.name), configHash: configFingerprint(config, rules), ...opts.cluster });
    return await wire(config, opts, { now, random, scrub, log, rules, maintenance, dispatcher, store, cluster });
  } catch (e) {
    await cluster?.leave();
    await store.close();
    maintenance.close();
    throw e;
  }
}

/** The parts createApp built before it opened the store. */
interface Base {
  now: () => number;
  random: () => number;
  scrub: (text: string) => string;
  log: Logger;
  rules: CompiledRule[];
  maintenance: MaintenanceCalendar;
  dispatcher: Dispatcher;
  store: Store;
  cluster: Cluster | null;
}

/** Everything that needs the open store. */
async function wire(config: Config, opts: AppOptions, base: Base): Promise<App> {
  const { now, random, scrub, log, rules, maintenance, dispatcher, store, cluster } = base;
  // The timers (the Timekeeper, retention) run on one member of a cluster; alone, here.
  const ownsTimers = (): boolean => cluster?.ownsTimers() ?? true;
  // Reads outside a transaction; every write goes through store.transaction.
  const { snapshots, alerts, events } = repos(store);
  const metrics = new Metrics(
    {
      outbox: events,
      sources: () => snapshots.sourceStates(),
      onReadError: (e) => log.warn({ err: scrub(String(e)) }, 'metrics: the database cannot be read; its gauges are left out of /metrics and hostwatch_storage_up is 0 until it can'),
    },
    now,
    { version: packageVersion() },
  );
  if (cluster) metrics.clusterMember(cluster.instance, () => ({ member: cluster.membership.live(), timers: cluster.ownsTimers() }));
  const client = new ApiClient({
    // Replies are scrubbed of every configured secret before anything is stored.
    ...clientOptionsOf(config.api, secretsOf(config)),
    // A cluster's members share one pace and one 429 pause (docs/cluster.md).
    budget: opts.budget ?? (await cluster?.requestBudget(config.api.max_requests_per_second, now)),
    now,
    random,
    onResponse: ({ status, code }) => metrics.apiResponse(status, code),
  });
  const channels = new Map<string, Channel>();
  const libraries = await channelLibraries(config.channels);
  // One pacer per endpoint, shared by the channels that send to it.
  const pacers = new Map<string, Pacer>();
  for (const c of config.channels) channels.set(c.name, buildChannel(c, now, opts, libraries, pacers, log, scrub));
  for (const c of opts.channels ?? []) channels.set(c.name, c);
  const bus = new EventEmitter<AppBusEvents>();
  bus.setMaxListeners(1000);
  const announce = (added: HostwatchEvent[]): void => {
    worker.kick();
    metrics.stored(added);
    bus.emit('events', added);
    opts.onEvents?.(added);
  };
  // The tracker and the notifier know each other: incidents hold events, and ending one
  // releases them through the notifier.
  let incidents: IncidentTracker | null = null;
  const notifier = new Notifier({
    store,
    dispatcher,
    log,
    now,
    // Turned off, no incident can hold an event: no second round of decisions to ask.
    ...(config.incidents.enabled ? { incidents: async (r: Repos) => (incidents ? incidents.active(r) : new Set<string>()) } : {}),
  });
  const worker = new OutboxWorker({
    store,
    claims: cluster?.claims,
    disableAfterMs: config.delivery.disable_after_ms,
    onChannelDisabled: async ({ channel, reason, count }) => {
      // An operator event: stored, and delivered to the channels still working.
      const e = operatorEvent({
        rule: 'channel-disabled',
        instance: config.name,
        subject: `channels/${channel}`,
        at: now(),
        id: eventId('channel-disabled', channel, count),
        summary: `channel ${channel} is disabled: ${reason}`,
        extra: { channel, reason },
      });
      try {
        if (await notifier.publish(e)) announce([e]);
      } catch (err) {
        log.error({ err: scrub(String(err)), event: e.id }, 'could not store the channel.disabled event');
      }
    },
    channels,
    retryScheduleMs: config.delivery.retry_schedule_ms,
    concurrency: config.delivery.concurrency,
    now,
    random,
    log,
    scrub,
    onAttempt: (info) => {
      metrics.delivery(info.channel, info.state);
      bus.emit('delivery', {
        eventId: info.event.id,
        channel: info.channel,
        attempt: info.attempt,
        state: info.state,
        statusCode: info.result.statusCode,
        error: info.result.ok ? null : scrub(info.result.error),
      });
      opts.onAttempt?.(info);
    },
  });
  const scheduled: ScheduledSource[] = enabledSources(config);
  const followups = new Followups(scheduled.map((s) => s.def));
  const priorities = sourcePriorities(scheduled, rules, config);
  const fetcher = new Fetcher(client, {
    options: (name, siteId) => ({ paths: pathsFor(config, name, siteId) }),
    stored: async (ref) => {
      const row = await snapshots.get(ref.source.name, ref.entity);
      return row === undefined ? undefined : (JSON.parse(row.body) as unknown);
    },
    onOldestFirst: (source) =>
      log.warn({ source: source.name, endpoint: source.path }, 'this list is served oldest first, not newest first as assumed (A31): it is read whole at every poll'),
  });
  incidents = new IncidentTracker({
    config: config.incidents,
    rules,
    store,
    notifier,
    heldChannels: (alert) => [...dispatcher.incidentHolds(alert)],
    // Called only once the poller below exists (from its commits and the timekeeper).
    watched: (): number => poller.watchedCount(),
    isWatched: (id): boolean => poller.isWatched(id),
    domainOf: (id): string | null => poller.site(id)?.domain ?? null,
    instance: config.name,
    now,
    log,
  });
  // Alerts of rules removed or disabled since would fire forever: resolved first (which ends
  // the inhibitions they started), with the tracker in place (a resolution it covers is held).
  // In a cluster whose members run different configs (a rolling change), a rule this member
  // lacks may run on another: not before every live member runs this config.
  const agreed = cluster === null || (await cluster.configsAgree().catch(() => false));
  if (!agreed) log.info('the cluster members run different configs: alerts of rules missing here are left alone until they all run the same config');
  const retired = agreed ? await resolveRetiredAlerts({ store, rules, notifier, instance: config.name, now, log }) : [];
  if (retired.length > 0) announce(retired);
  // One joined read, not one per firing alert (a round trip each on PostgreSQL).
  const firing = (await alerts.firingWithEvents()).flatMap((a) => (a.site_id === null || a.body === null ? [] : [JSON.parse(a.body) as HostwatchEvent]));
  await notifier.resumeInhibitions(firing);
  const poller: Poller = await Poller.open({
    labeler: new SiteLabeler(config.site_labels),
    incidents,
    fetcher,
    sources: scheduled.map((s) => s.def),
    onFetched: (ref, data) => followups.observe(ref, data),
    instance: config.name,
    client,
    store,
    rules,
    notifier,
    now,
    log,
    scrub,
    sites: config.sites,
    sitesMax: config.sites_max,
    degraded: config.degraded,
    maxEvents: (name) => config.sources[name]?.max_events ?? DEFAULTS.maxEventsPerPoll,
    onPoll: (source, o) => {
      metrics.poll(source, o, o.durationMs ?? 0);
      opts.onPoll?.(source, o);
    },
    onEvents: announce,
  });
  const timekeeper = new Timekeeper({
    reevaluator: new Reevaluator({ poller, rules, sources: scheduled.map((s) => s.def), now, log }),
    incidents,
    watchdog: config.watchdog ? new Watchdog({ everyMs: config.watchdog.every_ms, store, notifier, instance: config.name, now }) : undefined,
    storage: new StorageWatch({ store, notifier, instance: config.name, now, log, scrub, afterMs: opts.storageAlertAfterMs }),
    onEvents: announce,
    log,
  });
  // A cycle older than two of the slowest of (the heartbeat, the quickest source) no
  // longer counts as succeeding: the pings stop when cycles stop.
  const quickest = Math.min(...scheduled.filter((s) => isTopLevel(s.def)).map((s) => s.everyMs));
  const heartbeat = config.heartbeat
    ? new Heartbeat({ config: config.heartbeat, staleMs: 2 * Math.max(config.heartbeat.every_ms, quickest), now, log })
    : null;
  const scheduler = new Scheduler({
    poller,
    sources: scheduled,
    followups,
    sites: config.sites,
    concurrency: config.api.max_concurrency,
    now,
    log,
    plan: (sites) => configPlan(config, scheduled, priorities, sites),
    ticker: opts.ticker,
    afterCycle: (s) => {
      const failed = s.outcomes.filter((o) => o.status === 'failed').length;
      // A cycle that failed as a whole said so already ('cycle failed'), and is not done.
      if (s.error === undefined) log.info({ source: s.source, polls: s.outcomes.length, failed, ms: s.durationMs }, 'cycle done');
      heartbeat?.observe(s);
    },
    onTick: () => {
      if (ownsTimers()) void timekeeper.tick();
    },
    // In a cluster each due entity is polled by the one member that holds its lease.
    claims: cluster ? clusterWorkClaims(store, cluster.membership, (source, ids) => poller.handedOver(source, ids), log) : undefined,
    refreshSites: cluster ? () => poller.refreshSites() : undefined,
  });

  // The daemon's heartbeat row: one per instance of a cluster (they share config.name).
  const daemonName = cluster?.instance ?? config.name;
  metrics.watchScheduling(scheduler, client.budget);
  const eventNames = knownEventNames(rules);
  metrics.known({
    channels: config.channels.map((c) => c.name),
    eventTypes: eventNames.map((name) => `${TYPE_PREFIX}${name}`),
    sources: scheduled.map((s) => s.def.name),
  });
  let loggedPlan = '';
  scheduler.on('budget:plan', (plan) => {
    const lines = describePlan(plan, config.api.max_requests_per_second);
    const text = lines.join('\n');
    if (text === loggedPlan) return;
    loggedPlan = text;
    // Said once at start and again whenever the number of sites changes what fits.
    log[plan.short ? 'warn' : 'info'](
      {
        sites: plan.sites,
        needed_per_hour: Math.round(plan.neededPerHour),
        allowed_per_hour: plan.allowedPerHour,
        stretched: Object.fromEntries(plan.sources.filter((p) => p.stretch > 1).map((p) => [p.name, `${Math.round(p.everyMs / 1000)}s→${Math.round(p.effectiveEveryMs / 1000)}s`])),
      },
      text,
    );
  });

  let stopped = false;
  let pruneTimer: NodeJS.Timeout | null = null;
  let heartbeatTimer: NodeJS.Timeout | null = null;
  let server: { url: string; close: () => Promise<void> } | null = null;
  const app: App = {
    config,
    log,
    store,
    client,
    rules,
    poller,
    scheduler,
    followups,
    timekeeper,
    heartbeat,
    worker,
    notifier,
    metrics,
    bus,
    cluster,
    scrub,
    async runOnce() {
      const outcomes = (await scheduler.runAll()).flatMap((c) => c.outcomes);
      // Time passed since the last run: clock rules are judged on what is stored now.
      if (ownsTimers()) await timekeeper.tick({ force: true });
      if (heartbeat) await heartbeat.beat();
      // One cycle, then exit: groups waiting for group_wait go now (digests keep their hour),
      // also those of events raised while draining (a channel.disabled).
      const flush = () => store.transaction((tx) => repos(tx).delivery.flushGroups(now(), DIGEST_GROUP));
      const pending = await worker.drain(config.delivery.drain_timeout_ms, undefined, flush);
      return { pending, polls: outcomes.length, failed: outcomes.filter((o) => o.status === 'failed').length };
    },
    serverUrl: null,
    async pruneHistory() {
      const before = now() - config.history.retention_ms;
      const removed = await store.transaction(async (tx) => {
        const r = repos(tx);
        return { ...(await r.history.prune(before)), deliveries: await r.delivery.pruneDelivered(before) };
      });
      // Members gone for longer than the history is kept are forgotten too.
      if (cluster) await new ClusterRepo(store).pruneMembers(config.history.retention_ms);
      if (removed.changeLog + removed.evidence + removed.deliveries > 0) log.info(removed, 'history pruned');
      return removed;
    },
    async start() {
      if (config.server.listen) {
        const ctx: ServerContext = { config, store, events, alerts, snapshots, scheduler, sources: scheduled, metrics, bus, now, log, eventNames, pace: () => client.budget.state() };
        server = await startServer({
          listen: config.server.listen,
          token: config.server.token,
          allowedHosts: config.server.allowed_hosts,
          routes: [
            ...healthRoutes({
              databaseReady: () => store.ready(),
              // /readyz answers anyone: the driver's text, scrubbed as StorageWatch scrubs it.
              databaseProblem: () => {
                const p = store.problem();
                return p === null ? null : scrub(p);
              },
              schedulerRunning: () => scheduler.running,
              polling: () => ({ fresh: now() - poller.lastSuccessAt <= config.server.not_ready_after_ms, lastSuccessAt: poller.lastSuccessAt }),
              cluster: cluster
                ? () => ({ member: cluster.membership.live(), instance: cluster.instance, memberId: cluster.membership.id, timers: cluster.ownsTimers() })
                : undefined,
            }),
            ...metricsRoutes(metrics),
            ...feedRoutes(ctx),
            ...apiRoutes(ctx),
            ...silencesRoutes(ctx),
            ...dashboardRoutes(ctx),
          ],
          onError: (e) => log.error({ err: scrub(String(e)) }, 'server error'),
        });
        app.serverUrl = server.url;
      }
      log.info(
        { sources: scheduled.map((s) => `${s.def.name}/${s.everyMs / 1000}s${priorities.has(s.def.name) ? `/${priorities.get(s.def.name)}` : ''}`), channels: [...channels.keys()], rules: rules.length },
        'hostwatch started',
      );
      if (server) log.info({ url: server.url }, 'server listening: the dashboard at /, and /livez /readyz /metrics /api/events');
      worker.start();
      scheduler.start();
      // Any member's commit of events wakes this instance's live feed (LISTEN/NOTIFY).
      await cluster?.onEventsCommitted(() => bus.emit('events', []));
      // A sign of life in the database, for commands on it (`redeliver` says whether anyone sends now).
      const startedAt = now();
      // While the store fails this would fail every few seconds: said once, and once more when
      // it works again.
      const beatFailure = new RepeatedFailure(
        log,
        'could not write the daemon liveness record (daemon_heartbeat, which redeliver and cluster status read); said once until it works again',
        'the daemon liveness record is written again',
      );
      const beat = (): Promise<void> =>
        store.transaction((tx) => repos(tx).daemon.beat({ instance: daemonName, pid: process.pid, host: hostname(), started_at: startedAt, seen_at: now(), stopped_at: null })).then(
          () => beatFailure.worked(),
          (e: unknown) => beatFailure.failed(scrub(String(e))),
        );
      await beat();
      heartbeatTimer = setInterval(() => void beat(), opts.daemonBeatEveryMs ?? HEARTBEAT_EVERY_MS);
      heartbeatTimer.unref();
      heartbeat?.start();
      // History is pruned at start and then on a schedule, so the database stays bounded.
      // On one member of a cluster (the timers' owner).
      const prune = async (): Promise<void> => {
        if (ownsTimers()) await app.pruneHistory().catch((e: unknown) => log.error({ err: scrub(String(e)) }, 'history prune failed'));
      };
      await prune();
      pruneTimer = setInterval(() => void prune(), config.history.prune_every_ms);
      pruneTimer.unref();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (pruneTimer) clearInterval(pruneTimer);
      if (heartbeatTimer) {
        clearInterval(heartbeatTimer);
        await store.transaction((tx) => repos(tx).daemon.stopped(daemonName, now())).catch((e: unknown) => log.error({ err: scrub(String(e)) }, 'could not record in the daemon liveness record that this daemon stopped'));
      }
      heartbeat?.stop();
      // Both at once: no new poll and no new send starts from here; what is in flight may
      // finish within the stop timeout, and is abandoned after it.
      let timer: NodeJS.Timeout | undefined;
      const timeUp = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), opts.stopTimeoutMs ?? STOP_TIMEOUT_MS)));
      if (!(await settledBefore(timeUp, [scheduler.stop(), worker.stop()]))) {
        log.warn(
          { stop_timeout_ms: opts.stopTimeoutMs ?? STOP_TIMEOUT_MS, polling: scheduler.busy },
          'stop timeout reached: polls and sends still in flight are abandoned (unsent outbox rows stay pending and go out after the next start)',
        );
      }
      await server?.close();
      await settledBefore(timeUp, [...[...channels.values()].map((c) => c.close?.()), client.close()]);
      clearTimeout(timer);
      maintenance.close();
      // After the last send is recorded: what this member still claims is free at once.
      await cluster?.leave();
      await store.close();
      log.info('hostwatch stopped');
    },
  };
  return app;
}

/** Wait for every promise to settle, or for `timeUp`; true when all settled first. */
function settledBefore(timeUp: Promise<false>, work: readonly (Promise<unknown> | undefined)[]): Promise<boolean> {
  return Promise.race([Promise.allSettled(work).then(() => true as const), timeUp]);
}

/** The channels built on a client library of their own (nodemailer, @slack/webhook), loaded when configured. */
interface ChannelLibraries {
  EmailChannel?: typeof EmailChannel;
  SlackChannel?: typeof SlackChannel;
}

/**
 * Load the channel modules with a client library of their own only when the config has
 * such a channel: a daemon without email does not carry nodemailer's few MB in memory.
 */
async function channelLibraries(channels: readonly ChannelConfig[]): Promise<ChannelLibraries> {
  const has = (type: ChannelConfig['type']): boolean => channels.some((c) => c.type === type);
  return {
    ...(has('email') ? { EmailChannel: (await import('./notify/channels/email.js')).EmailChannel } : {}),
    ...(has('slack') ? { SlackChannel: (await import('./notify/channels/slack.js')).SlackChannel } : {}),
  };
}

/**
 * Build the channel a config names. Templates are parsed once here; a render error is
 * logged. `scrub` removes secrets from providers' answers before channels cut them.
 */
function buildChannel(
  c: ChannelConfig,
  now: () => number,
  opts: AppOptions,
  libraries: ChannelLibraries,
  pacers: Map<string, Pacer>,
  log?: Logger,
  scrub?: (text: string) => string,
): Channel {
  const text = 'template' in c && typeof c.template === 'string' ? channelText(c.name, c.template, log) : summaryText;
  // The endpoint: everything of the channel but its name and how it words, groups and waits.
  const { name: _name, template: _template, digest: _digest, timeout_ms: _timeout, ...endpoint } = c as ChannelConfig & Record<string, unknown>;
  const shared = { pacers, key: JSON.stringify(endpoint) };
  const http = (provider: Provider) => new HttpChannel(c.name, c.type, provider, 'timeout_ms' in c ? c.timeout_ms : 10_000, { now, sleep: opts.sleep, scrub, shared });
  switch (c.type) {
    case 'webhook':
      return new WebhookChannel(c, now, scrub);
    case 'console':
      return new ConsoleChannel(c, opts.consoleWrite);
    case 'slack':
      return new libraries.SlackChannel!(c, { now, sleep: opts.sleep, text, scrub, shared });
    case 'email':
      return new libraries.EmailChannel!(c);
    case 'teams':
      return http(teamsProvider(c, text));
    case 'discord':
      return http(discordProvider(c, text));
    case 'pagerduty':
      return http(pagerDutyProvider(c, text));
    case 'opsgenie':
      return http(opsgenieProvider(c, text));
    case 'telegram':
      return http(telegramProvider(c, text));
    case 'ntfy':
      return http(ntfyProvider(c, text));
  }
}

/** What a channel's template says for an event; a render error falls back to the summary and is logged. */
function channelText(channel: string, template: string, log: Logger | undefined): ItemText {
  return templateText(compileTemplate(template), (error, e) => log?.warn({ channel, event_id: e.id, error }, 'channel template failed; the summary was sent instead'));
}
