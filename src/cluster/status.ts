import type { ClusterRepo, Holdings, MemberRow } from '../store/cluster-repo.js';
import type { EventsRepo } from '../store/events-repo.js';
import type { SnapshotsRepo } from '../store/snapshots-repo.js';

/** Members whose lease ended longer ago than this are left out of `cluster status`. */
export const STATUS_SINCE_MS = 3_600_000;

/** One member as `hostwatch cluster status` shows it. */
export interface MemberStatus {
  instance: string;
  member_id: string;
  host: string;
  pid: number;
  state: 'live' | 'left' | 'dead';
  /**
   * How a member that is not live ended: `stopped` (a clean stop: state left),
   * `replaced` (its process was gone and its next run took its work over at once: state
   * dead), `lease_ran_out` (dead); null while live.
   */
  ended: 'stopped' | 'replaced' | 'lease_ran_out' | null;
  started_at: string;
  last_heartbeat_at: string;
  /** How long ago the last heartbeat was (ms, on the database's clock). */
  heartbeat_lag_ms: number;
  /** How long its lease still runs (negative: ran out that long ago). */
  lease_left_ms: number;
  /** Entities it polls and pending deliveries it has claimed. */
  entities: number;
  deliveries: number;
  /** The named leases it holds (`timers`). */
  leases: string[];
  /** The fingerprint of its config (null: a member from before it was recorded); live members that differ run different configs. */
  config: string | null;
}

/** What `hostwatch cluster status` prints. */
export interface ClusterStatus {
  members: MemberStatus[];
  leases: Array<{ name: string; holder: string | null; instance: string | null; token: number; since: string }>;
  /**
   * Delivery lag: the pending rows (due now, or waiting for a retry or a group's wait), how
   * late the oldest due one is (ms; 0 when none is due), and when the next one is due
   * (ms from now; 0 when one is due now; null when none is pending).
   */
  outbox: { pending: number; oldest_due_lag_ms: number; next_due_in_ms: number | null };
  /** Poll lag: how long ago the stalest source had its last successful cycle (ms; null: none yet). */
  polls: { stalest_source: string | null; lag_ms: number | null };
}

/** Read the cluster's state: members, who holds what, lag, last heartbeats. */
export async function readClusterStatus(cluster: ClusterRepo, events: EventsRepo, snapshots: SnapshotsRepo, appNow: number): Promise<ClusterStatus> {
  const members = await cluster.members(STATUS_SINCE_MS);
  const leases = await cluster.leases();
  const held = await cluster.holdings();
  const dbNow = members[0]?.now ?? appNow;
  const count = (id: string, kind: Holdings['kind']): number => held.find((h) => h.holder === id && h.kind === kind)?.n ?? 0;
  const instanceOf = new Map(members.map((m) => [m.id, m.instance]));
  const nextDue = await events.nextDue();
  const sources = await snapshots.sourceStates();
  let stalest: { source: string; at: number } | null = null;
  for (const s of sources) if (s.last_success_at !== null && (stalest === null || s.last_success_at < stalest.at)) stalest = { source: s.source, at: s.last_success_at };
  return {
    members: members.map((m) => memberStatus(m, dbNow, count(m.id, 'entities'), count(m.id, 'deliveries'), leases.filter((l) => l.holder === m.id).map((l) => l.name))),
    leases: leases.map((l) => ({ name: l.name, holder: l.holder, instance: l.holder ? (instanceOf.get(l.holder) ?? null) : null, token: l.token, since: iso(l.since) })),
    outbox: {
      pending: await events.count('pending'),
      oldest_due_lag_ms: nextDue === null ? 0 : Math.max(0, appNow - nextDue),
      next_due_in_ms: nextDue === null ? null : Math.max(0, nextDue - appNow),
    },
    polls: { stalest_source: stalest?.source ?? null, lag_ms: stalest ? Math.max(0, appNow - stalest.at) : null },
  };
}

function memberStatus(m: MemberRow & { live: boolean }, now: number, entities: number, deliveries: number, leases: string[]): MemberStatus {
  return {
    instance: m.instance,
    member_id: m.id,
    host: m.host,
    pid: m.pid,
    // A run whose process died counts as dead, also when its next run made it leave at once.
    state: m.live ? 'live' : m.left_at !== null && m.ended !== 'replaced' ? 'left' : 'dead',
    ended: m.live ? null : m.ended === 'replaced' ? 'replaced' : m.left_at !== null ? 'stopped' : 'lease_ran_out',
    started_at: iso(m.started_at),
    last_heartbeat_at: iso(m.heartbeat_at),
    heartbeat_lag_ms: now - m.heartbeat_at,
    lease_left_ms: m.lease_until - now,
    entities,
    deliveries,
    leases,
    config: m.config_hash,
  };
}

/** The status as terminal lines: one per member, then the leases and the lag. */
export function clusterStatusLines(s: ClusterStatus): string[] {
  const lines: string[] = [];
  const live = s.members.filter((m) => m.state === 'live').length;
  lines.push(`members: ${live} live${s.members.length > live ? `, ${s.members.length - live} gone in the last hour` : ''}`);
  for (const m of s.members) {
    const lease =
      m.state === 'live'
        ? `lease ${secs(m.lease_left_ms)} left`
        : m.ended === 'stopped'
          ? 'left cleanly'
          : m.ended === 'replaced'
            ? `its process was gone; its next run took its work over ${secs(-m.lease_left_ms)} ago`
            : `lease ran out ${secs(-m.lease_left_ms)} ago`;
    const holds = [`${m.entities} entities`, `${m.deliveries} deliveries`, ...m.leases].join(', ');
    lines.push(`  ${m.instance.padEnd(20)} ${m.state.padEnd(4)}  pid ${m.pid} on ${m.host}  heartbeat ${secs(m.heartbeat_lag_ms)} ago, ${lease}  holds ${holds}  config ${m.config ?? 'unknown'}  (member ${m.member_id})`);
  }
  const configs = new Set(s.members.filter((m) => m.state === 'live' && m.config !== null).map((m) => m.config));
  if (configs.size > 1) lines.push(`configs differ: the live members run ${configs.size} different configs (expected during a rolling change; docs/cluster.md)`);
  for (const l of s.leases) lines.push(`lease ${l.name}: ${l.holder ? `${l.instance ?? 'a member gone'} (token ${l.token}, since ${l.since})` : 'free'}`);
  lines.push(outboxLine(s.outbox));
  lines.push(s.polls.stalest_source === null ? 'polls: none succeeded yet' : `polls: the stalest source (${s.polls.stalest_source}) last succeeded ${secs(s.polls.lag_ms!)} ago`);
  return lines;
}

/** The outbox's line: nothing pending, rows due (and how late), or rows that wait (and until when). */
function outboxLine(o: ClusterStatus['outbox']): string {
  if (o.pending === 0 || o.next_due_in_ms === null) return 'outbox: nothing pending';
  if (o.next_due_in_ms > 0) return `outbox: ${o.pending} pending, none due yet (the next in ${secs(o.next_due_in_ms)})`;
  return `outbox: ${o.pending} pending, the oldest due ${secs(o.oldest_due_lag_ms)} ago`;
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
