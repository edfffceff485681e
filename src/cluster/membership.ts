import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { ClusterRepo } from '../store/cluster-repo.js';

/** The named lease of the timers: the Timekeeper, retention pruning (one owner in a cluster). */
export const TIMERS_LEASE = 'timers';

/** Typed lifecycle events; tests wait on these instead of sleeping. */
export interface MembershipEvents {
  /** Joined the cluster (at start, and again after a lease ran out) under a new member id. */
  joined: [{ id: string }];
  /** The lease ran out before it was renewed: everything held under `id` is void. */
  lost: [{ id: string }];
  /** A named lease was taken (true) or lost (false). */
  lease: [{ name: string; held: boolean; token: number }];
}

export interface MembershipDeps {
  /** The cluster tables, on a connection of the membership's own (not the busy pool). */
  repo: ClusterRepo;
  /** This instance's name (cluster.instance). */
  instance: string;
  pid: number;
  host: string;
  leaseMs: number;
  /** Named leases this member competes for (TIMERS_LEASE). */
  leases: readonly string[];
  /** A clock that never jumps back and goes on while the process is stopped (performance.now). */
  monotonic: () => number;
  /** A new member id (a run of an instance; a new one after a lease ran out). */
  newId: () => string;
  log: Logger;
  scrub: (text: string) => string;
  /** Whether a process of this host runs (default: signal 0). */
  pidAlive?: (pid: number) => boolean;
  /** The channel names of this member's config (it claims only their deliveries); undefined: every channel. */
  channels?: readonly string[];
  /** A fingerprint of this member's config (configFingerprint), shown to the other members. */
  configHash?: string;
}

/** Whether a process of this host runs: signal 0 reaches it (EPERM: it runs as another user). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * This instance as a member of the cluster. It joins under a new id, renews its lease every
 * third of `cluster.lease`, and competes for the named leases. Whether it is live is judged
 * on its own monotonic clock, counted from the moment it *sent* its last successful renewal:
 * the database judged the lease later, so the member always believes itself dead before the
 * others may. A member paused (SIGSTOP) or cut off past its lease finds its renewal refused
 * (the database's clock says the lease ran out) and joins again under a new id: what it held
 * under the old one was taken over, and every claim made under it is void.
 */
export class Membership extends EventEmitter<MembershipEvents> {
  private memberId = '';
  /** Monotonic time until which the lease is surely held. */
  private validUntil = -Infinity;
  private readonly held = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private beating: Promise<void> | null = null;
  private stopped = false;
  /** Why the last heartbeat failed (scrubbed): the reason a join is refused with. */
  private lastError: string | null = null;

  constructor(private readonly deps: MembershipDeps) {
    super();
  }

  /** The current member id ('' before the first join). */
  get id(): string {
    return this.memberId;
  }

  /** The member id is registered and its lease has at least `marginMs` left (by the local clock). */
  live(marginMs = 0): boolean {
    return this.memberId !== '' && this.remainingMs() > marginMs;
  }

  /** How long the lease surely lasts without another renewal (negative: it ran out). */
  remainingMs(): number {
    return this.validUntil - this.deps.monotonic();
  }

  /** The margin work must leave before starting something it must finish under the lease. */
  get marginMs(): number {
    return this.deps.leaseMs / 4;
  }

  /** This member holds the named lease now (and is live with the margin). */
  holds(name: string): boolean {
    return this.held.has(name) && this.live(this.marginMs);
  }

  /** Join, take what named leases are free, and renew every third of the lease until left. */
  async start(): Promise<void> {
    await this.beat();
    if (!this.live()) throw new Error(`could not join the cluster: ${this.lastError ?? 'the database did not answer'}`);
    const every = Math.max(100, Math.floor(this.deps.leaseMs / 3));
    this.timer = setInterval(() => void this.beat(), every);
    this.timer.unref();
  }

  /**
   * One heartbeat: join (first time, or after the lease ran out) or renew, then take or keep
   * the named leases. Never throws: a failed renewal lets the lease run out by itself.
   */
  beat(): Promise<void> {
    this.beating ??= this.doBeat().finally(() => (this.beating = null));
    return this.beating;
  }

  private async doBeat(): Promise<void> {
    if (this.stopped) return;
    const d = this.deps;
    const sent = d.monotonic();
    try {
      if (this.memberId === '' || !(await d.repo.renew(this.memberId, d.leaseMs))) {
        if (this.memberId !== '') this.lose();
        else await this.replaceEarlierRun();
        const id = d.newId();
        await d.repo.join({ id, instance: d.instance, pid: d.pid, host: d.host, channels: d.channels, configHash: d.configHash }, d.leaseMs);
        this.memberId = id;
        this.validUntil = sent + d.leaseMs;
        d.log.info({ member: id, instance: d.instance, lease_ms: d.leaseMs }, 'joined the cluster');
        this.emit('joined', { id });
      } else {
        this.validUntil = sent + d.leaseMs;
      }
      for (const name of d.leases) {
        const lease = await d.repo.takeLease(name, this.memberId);
        const mine = lease.holder === this.memberId;
        if (mine && this.held.get(name) !== lease.token) {
          this.held.set(name, lease.token);
          d.log.info({ lease: name, token: lease.token }, 'took the lease');
          this.emit('lease', { name, held: true, token: lease.token });
        } else if (!mine && this.held.delete(name)) {
          d.log.warn({ lease: name, holder: lease.holder }, 'lost the lease');
          this.emit('lease', { name, held: false, token: lease.token });
        }
      }
    } catch (e) {
      // The lease runs out by itself if this goes on: the member stops sending and ticking.
      this.lastError = d.scrub(String(e));
      d.log.warn({ err: d.scrub(String(e)), lease_left_ms: Math.round(this.remainingMs()) }, 'cluster heartbeat failed');
    }
  }

  /**
   * A restart after a crash: the member of the earlier run of this instance (same name,
   * same host, its process gone, or our own pid in a restarted container) still looks live
   * until its lease runs out, holding its entities and claims. It is dead for sure, so it
   * leaves now and the new run takes its work at once. A live process of the same name is
   * left alone (names should be unique: said in the log).
   */
  private async replaceEarlierRun(): Promise<void> {
    const d = this.deps;
    const alive = d.pidAlive ?? pidAlive;
    for (const m of await d.repo.namesakes(d.instance, d.host)) {
      if (m.pid === d.pid || !alive(m.pid)) {
        await d.repo.leave(m.id, 'replaced');
        d.log.info({ member: m.id, pid: m.pid }, 'the earlier run of this instance is gone: its work is taken over at once');
      } else {
        d.log.warn({ member: m.id, pid: m.pid, instance: d.instance }, 'another live process uses this cluster.instance name on this host; give each instance its own name');
      }
    }
  }

  /** The lease ran out: nothing held under the old id is ours any more. */
  private lose(): void {
    const id = this.memberId;
    this.deps.log.warn({ member: id }, 'the cluster lease ran out (paused or cut off from the database); joining again as a new member');
    this.validUntil = -Infinity;
    for (const [name, token] of this.held) this.emit('lease', { name, held: false, token });
    this.held.clear();
    this.emit('lost', { id });
  }

  /** A clean stop: leave the cluster, so the others take what this member held at once. */
  async leave(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    const id = this.memberId;
    this.validUntil = -Infinity;
    this.held.clear();
    if (id === '') return;
    try {
      await this.deps.repo.leave(id);
      this.deps.log.info({ member: id }, 'left the cluster');
    } catch (e) {
      this.deps.log.warn({ err: this.deps.scrub(String(e)) }, 'could not leave the cluster cleanly; the others take over when the lease runs out');
    }
  }
}
