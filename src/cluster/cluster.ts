import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ClusterConfig, Config } from '../config/types.js';
import type { CompiledRule } from '../rules/types.js';
import { secretsOf } from '../log.js';
import type { DeliveryClaims } from '../notify/outbox-worker.js';
import { ClusterRepo } from '../store/cluster-repo.js';
import type { Store } from '../store/db.js';
import type { RequestBudget } from '../api/budget.js';
import { BUDGET_CHANNEL, BudgetRepo } from '../store/budget-repo.js';
import { clusterClaims } from './delivery-claims.js';
import { SharedBudget } from './shared-budget.js';
import { Membership, TIMERS_LEASE } from './membership.js';

/**
 * An instance's cluster name when `cluster.instance` is not set: its host name, so a
 * restart on the same host is known as the same instance (and takes over its earlier run's
 * work at once). Several instances on one host need names of their own.
 */
export function defaultInstance(host = hostname()): string {
  return host.replace(/[^A-Za-z0-9._:-]/g, '-').slice(0, 63) || 'hostwatch';
}

/** The row of the API's request budget (one API, one key, shared by every member). */
const API_BUDGET = 'api';

/** This daemon as a member of the cluster of its PostgreSQL database (docs/cluster.md). */
export interface Cluster {
  /** This instance's name (cluster.instance, or the host name). */
  instance: string;
  membership: Membership;
  /** The outbox rows this member sends. */
  claims: DeliveryClaims;
  /** This member owns the timers now (the Timekeeper, retention pruning). */
  ownsTimers(): boolean;
  /** Call `wake` whenever any member commits events (LISTEN/NOTIFY), and after a reconnection. */
  onEventsCommitted(wake: () => void): Promise<void>;
  /**
   * The request budget the members share (api.max_requests_per_second for all of them, one
   * 429 pause), its pause announced on this member's connection.
   */
  requestBudget(maxRate: number, now: () => number): Promise<RequestBudget>;
  /** Leave the cluster (what this member held is free at once) and close its connection. */
  leave(): Promise<void>;
  /** Whether every live member runs this member's config (the same fingerprint). */
  configsAgree(): Promise<boolean>;
}

export interface JoinOptions {
  log: Logger;
  scrub: (text: string) => string;
  /** Default performance.now (goes on while the process is stopped, never jumps back). */
  monotonic?: () => number;
  newId?: () => string;
  /** The channel names of this member's config: it claims only their deliveries (undefined: every channel). */
  channels?: readonly string[];
  /** A fingerprint of this member's config (configFingerprint). */
  configHash?: string;
}

/**
 * A fingerprint of what a member's config makes it do (12 hex digits of a SHA-256): its
 * config without what may differ between members (the instance name, the HTTP server, the
 * log, the file's path, rule file paths, the storage and the heartbeat) and with the rules as
 * loaded; every secret is taken out first (a changed secret does not show). Members whose
 * fingerprints differ run different rules, channels, routes or settings.
 */
export function configFingerprint(config: Config, rules: readonly CompiledRule[]): string {
  // Not the storage (its URL holds a password, and its host may differ by member), the
  // heartbeat (often per instance), nor any secret: a fingerprint shown in the database and
  // the log must not let anyone test guesses of a secret.
  // `name` stays: it is every event's CloudEvents source, the same on every member.
  const { file: _file, server: _server, log: _log, rules: _paths, storage: _storage, heartbeat: _heartbeat, cluster, ...rest } = config;
  const loaded = rules.map((r) => [r.name, r.enabled, r.kind, r.source, r.event, r.severity, r.when, r.summarySource, r.params]);
  let text = JSON.stringify({ ...rest, cluster: { ...cluster, instance: null }, rules: loaded });
  for (const secret of secretsOf(config).filter((s) => s.length > 0).sort((a, b) => b.length - a.length)) text = text.split(JSON.stringify(secret).slice(1, -1)).join('[secret]');
  return createHash('sha256').update(text).digest('hex').slice(0, 12);
}

/**
 * Join the cluster of a PostgreSQL store: a connection of the membership's own (heartbeats
 * never wait behind busy pooled connections; LISTEN needs a lasting session), the member
 * row, and the timers' lease if it is free. Rejects when the database cannot be reached.
 */
export async function joinCluster(config: ClusterConfig, store: Store, opts: JoinOptions): Promise<Cluster> {
  const { PostgresStore, PostgresSession, EVENTS_CHANNEL } = await import('../store/postgres.js');
  if (!(store instanceof PostgresStore)) throw new Error('a cluster needs PostgreSQL (storage.url)');
  const instance = config.instance ?? defaultInstance();
  const host = hostname();
  // A statement of the heartbeat must fail well before the lease could run out.
  const timeoutMs = Math.max(500, Math.min(10_000, Math.floor(config.lease_ms / 3)));
  const session = new PostgresSession(store.url, `hostwatch ${instance} ${process.pid}@${host}`, timeoutMs, (e) =>
    opts.log.warn({ err: opts.scrub(String(e)) }, 'the cluster connection failed (it reconnects)'),
  );
  const membership = new Membership({
    repo: new ClusterRepo(session),
    instance,
    pid: process.pid,
    host,
    leaseMs: config.lease_ms,
    leases: [TIMERS_LEASE],
    monotonic: opts.monotonic ?? (() => performance.now()),
    newId: opts.newId ?? randomUUID,
    log: opts.log,
    scrub: opts.scrub,
    channels: opts.channels,
    configHash: opts.configHash,
  });
  try {
    await membership.start();
    // A warning only: a failed read here must not keep the member from starting.
    await warnOfOtherConfigs(new ClusterRepo(session), membership.id, opts).catch((e: unknown) =>
      opts.log.warn({ err: opts.scrub(String(e)) }, 'could not compare the configs of the cluster members'),
    );
  } catch (e) {
    await membership.leave();
    await session.close();
    throw e;
  }
  return {
    instance,
    membership,
    claims: clusterClaims(store, membership, opts.channels ?? null),
    ownsTimers: () => membership.holds(TIMERS_LEASE),
    onEventsCommitted: (wake) => session.listen(EVENTS_CHANNEL, () => wake()),
    async requestBudget(maxRate, now) {
      const repo = new BudgetRepo(store);
      await repo.init(API_BUDGET, maxRate);
      const budget = new SharedBudget({ repo, name: API_BUDGET, maxRate, now, sleep: (ms) => new Promise((r) => setTimeout(r, ms)), log: opts.log, scrub: opts.scrub });
      await session.listen(BUDGET_CHANNEL, (payload) => budget.heard(payload));
      return budget;
    },
    async leave() {
      await membership.leave();
      await session.close();
    },
    async configsAgree() {
      return (await otherConfigs(new ClusterRepo(session), membership.id, opts.configHash)).length === 0;
    },
  };
}

/** The live members that run another config than `mine` (none when it is not known). */
async function otherConfigs(repo: ClusterRepo, me: string, mine: string | undefined) {
  if (mine === undefined) return [];
  return (await repo.members(0)).filter((m) => m.live && m.id !== me && m.config_hash !== null && m.config_hash !== mine);
}

/**
 * Say so when the live members run different configs (fingerprints): during a rolling config
 * change that is expected for a while; left so, members differ in what they fire and send.
 */
async function warnOfOtherConfigs(repo: ClusterRepo, me: string, opts: JoinOptions): Promise<void> {
  const others = await otherConfigs(repo, me, opts.configHash);
  if (others.length === 0) return;
  opts.log.warn(
    { config: opts.configHash, others: others.map((m) => ({ instance: m.instance, config: m.config_hash })) },
    'cluster members run different configs (name, rules, channels, routes or settings; secrets are not compared): expected during a rolling change; until all run the same one, a channel only some members have is sent by those members, and rules differ by member (docs/cluster.md)',
  );
}
