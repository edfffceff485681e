import { EventEmitter, setMaxListeners } from 'node:events';
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import { priorityRank, type Priority, type Ticket } from '../api/budget.js';
import type { PollOutcome, Poller } from '../pipeline/poller.js';
import { Semaphore } from '../semaphore.js';
import { entityOf, isTopLevel, sitesSource } from '../sources/registry.js';
import type { EnabledSource } from '../sources/select.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import type { BudgetPlan } from './budget-plan.js';
import { Followups, type DetailTarget } from './followups.js';

/** A source with its configured interval (what `enabledSources` gives). */
export type ScheduledSource = EnabledSource;

export interface CycleSummary {
  source: string;
  startedAt: number;
  durationMs: number;
  outcomes: PollOutcome[];
  /**
   * Why the cycle failed as a whole (a poll's result or its failure could not be stored: the
   * database failing; or a bug), when it did: its outcomes are then only those before.
   */
  error?: string;
}

/** Typed lifecycle events; tests wait on these instead of sleeping. */
export interface SchedulerEvents {
  'cycle:start': [{ source: string }];
  'cycle:end': [CycleSummary];
  /** A cycle started after its time because the previous one was still handing out polls. */
  'cycle:late': [{ source: string; lateMs: number }];
  /** The request budget was planned again (at start, and when the number of sites changed). */
  'budget:plan': [BudgetPlan];
}

/**
 * Which due work this instance takes: the seam a cluster fills with leases claimed in the
 * database. Alone, an instance takes everything.
 */
export interface WorkClaims {
  /**
   * Of a cycle of `source` due at `dueAt`, the entities this instance polls: sites for a
   * per-site source, `[null]` (the account) for an account source.
   */
  claim(source: string, dueAt: number, entities: readonly (SiteInfo | null)[]): readonly (SiteInfo | null)[] | Promise<readonly (SiteInfo | null)[]>;
  /**
   * Whether what the last claim of `source` took is still this instance's, asked before each
   * poll of the cycle: a member paused past its lease (SIGSTOP, a frozen VM) must not go on
   * polling entities the others have taken since. Left out: always (one instance alone).
   */
  stillHeld?(source: string): boolean;
  /**
   * The cycle of `source` that the last claim was for is done: what it polled only to give
   * back (a share grown too large) is given back now. Left out: nothing to do.
   */
  cycleDone?(source: string): void | Promise<void>;
}

/** One instance alone: every due entity is its own. */
export const takeAll: WorkClaims = { claim: (_source, _dueAt, entities) => entities };

/** Where a source is in its work, for the dashboard and the metrics. */
export interface SourceProgress {
  name: string;
  priority: Priority;
  /** The interval it runs at: the configured one, stretched when the budget is short. */
  effectiveEveryMs: number;
  stretch: number;
  /** The cycle handing out polls now (entities polled of those claimed), or null. */
  cycle: { done: number; total: number; startedAt: number } | null;
  /**
   * True once the catch-up handed out every entity's first poll and a cycle since start
   * polled the source (not only queued its polls: at a short budget they may wait long).
   */
  caughtUp: boolean;
  /**
   * How far behind its schedule the source is (0 when on time): the next poll's slot or the
   * next cycle overdue, or the time past one interval since a cycle last polled it (since
   * it first came due, when none has yet).
   */
  lagMs: number;
}

export interface SchedulerDeps {
  poller: Poller;
  /**
   * The enabled sources. Top-level ones are scheduled; detail sources are read in their
   * parent's cycle (their `everyMs` is the slow schedule); views are the poller's business.
   */
  sources: readonly ScheduledSource[];
  /** Detail follow-ups and adaptive polling; must be the one the poller reports fetches to. */
  followups?: Followups;
  sites: 'all' | readonly number[];
  now: () => number;
  log: Logger;
  /** Polls of one cycle in flight at once (the API client's budget paces requests further). */
  concurrency: number;
  /** Part of each interval over which per-site polls are spread (no burst at :00). */
  spreadFraction?: number;
  /** Called after each source cycle (writes the source-level poll state). */
  afterCycle?: (summary: CycleSummary) => void;
  /**
   * The request budget for a number of sites: effective intervals and priorities. Without
   * it every source runs at its configured interval, at normal priority (the site list critical).
   */
  plan?: (sites: number) => BudgetPlan;
  /** Which due work this instance takes (default: all of it). */
  claims?: WorkClaims;
  /** Before a per-site cycle: read the site list another cluster member may have stored. */
  refreshSites?: () => Promise<void>;
  /** How staggered polls wait for their slot (tests may inject). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * Calls `tick` on a schedule until stopped, and `missed` when a beat could not run (the
   * event loop was blocked). Default: a node-cron task every second. A benchmark that runs
   * time k times faster passes one k times faster.
   */
  ticker?: Ticker;
  /** Called on every heartbeat second, after the due sources started (the Timekeeper). */
  onTick?: () => void;
}

/** What ticks the scheduler: `tick` on every beat, `missed` for a beat that could not run. */
export type Ticker = (tick: () => void, missed: () => void) => { stop(): Promise<void> };

/** The default heartbeat: node-cron, every second, never two ticks at once. */
function everySecond(log: Logger): Ticker {
  return (tick, missed) => {
    // node-cron's own messages become log lines (stderr), never raw text on stdout.
    const task: ScheduledTask = cron.schedule('* * * * * *', tick, { name: 'hostwatch-heartbeat', noOverlap: true, logger: cronLogger(log) });
    task.on('execution:missed', missed);
    return {
      async stop() {
        await task.stop();
        await task.destroy();
      },
    };
  };
}

/** What the scheduler keeps per top-level source. */
interface SourceState {
  source: ScheduledSource;
  priority: Priority;
  effectiveEveryMs: number;
  nextRun: number;
  /** The cycle still handing out polls (the next one waits for it), or null. */
  dispatching: { done: number; total: number; startedAt: number; nextSlot: () => number } | null;
  /** Entities of this source being polled now (site id, or -1 for the account). */
  inFlight: Set<number>;
  caughtUp: boolean;
  /**
   * When a cycle that polled something last ended (null: none since start). A cycle whose
   * every poll was passed over (still in flight from the last one: waiting for the request
   * budget) does not count.
   */
  polledAt: number | null;
  /** When the source first came due in this run (its schedule's start). */
  dueSince: number | null;
  /** Came due while the previous cycle was still handing out polls. */
  late: boolean;
  /** Cycles not finished yet (a straggler's cycle may end after the next one started). */
  running: Set<Promise<CycleSummary[]>>;
}

const ACCOUNT = -1;

/**
 * How many polls of one source run at once, for an API concurrency. More than the API's
 * concurrency: a poll that waits for its commit to be durable frees its fetch slot (see
 * runCycle), so with more polls in flight the fetches go on meanwhile, and the polls that
 * wait commit together (group commit). Fetches stay at `api.max_concurrency` per source.
 * Eight times: with four, a first cycle's batch took in nearly every poll of the three
 * sources, and the fetches stopped while its log was synced (docs/benchmarks.md, run 23).
 */
export function pollWorkers(concurrency: number): number {
  // At most 256 (as four times the largest `api.max_concurrency`, 64, was): each poll waiting
  // for its commit holds its reply.
  return Math.min(concurrency * 8, 256);
}

/**
 * The ticket of an account-wide poll: served with the critical ones. The budget plan keeps
 * such a source's interval (it never stretches: one request whatever the number of sites),
 * and at its own level its one request would wait behind a catch-up of thousands of
 * per-site polls of the levels above it: `jobs` and `cron_list` went unread for over 20
 * minutes after a start at 1,000 sites. Its details keep the source's own level.
 */
function accountTicket(t: Ticket): Ticket {
  return { ...t, priority: priorityRank('critical') };
}

/**
 * Decides when each source runs. One node-cron heartbeat a second checks which sources are
 * due. At start every source runs once without stagger (the catch-up): the request budget
 * serves critical sources first, the rest as it allows. After that each source runs at its
 * effective interval (stretched when the budget is short, least important first), its
 * per-site polls spread over part of it. A cycle that runs late delays the next one only
 * until it has handed out its last poll: the next starts then, never skipped; a poll still
 * in flight (one slow entity) holds up neither its cycle nor the next, which passes over it.
 */
export class Scheduler extends EventEmitter<SchedulerEvents> {
  private readonly state = new Map<string, SourceState>();
  private task: { stop(): Promise<void> } | null = null;
  private readonly abort = new AbortController();
  private warnedMissing = new Set<number>();
  private readonly followups: Followups;
  private readonly topLevel: readonly ScheduledSource[];
  private readonly everyOf = new Map<string, number>();
  private readonly claims: WorkClaims;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private plan: BudgetPlan | null = null;
  private plannedSites = -1;

  constructor(private readonly deps: SchedulerDeps) {
    super();
    this.followups = deps.followups ?? new Followups(deps.sources.map((s) => s.def));
    this.topLevel = deps.sources.filter((s) => isTopLevel(s.def));
    for (const s of deps.sources) this.everyOf.set(s.def.name, s.everyMs);
    this.claims = deps.claims ?? takeAll;
    this.sleep = deps.sleep ?? abortableSleep;
    for (const s of this.topLevel) {
      this.state.set(s.def.name, {
        source: s,
        priority: s.def.name === sitesSource.name ? 'critical' : 'normal',
        effectiveEveryMs: s.everyMs,
        nextRun: 0,
        dispatching: null,
        inFlight: new Set(),
        caughtUp: false,
        polledAt: null,
        dueSince: null,
        late: false,
        running: new Set(),
      });
    }
    // Every staggered wait listens on this one signal (a pool per cycle, several sources).
    setMaxListeners(0, this.abort.signal);
    this.replan();
  }

  /** Start the heartbeat; the site list first, then everything else at once (the catch-up). */
  start(): void {
    const now = this.deps.now();
    for (const st of this.state.values()) {
      st.nextRun = now;
      st.dueSince = now;
    }
    // Said at start: what the budget allows for the sites known so far (none known yet: said
    // once the site list is read, rather than "0 sites … every interval is met").
    if (this.plan && this.plan.sites > 0) this.emit('budget:plan', this.plan);
    this.task = (this.deps.ticker ?? everySecond(this.deps.log))(
      () => this.tick(),
      () => this.missedBeat(),
    );
    this.tick();
  }

  private missed = { count: 0, warnedAt: -Infinity };

  /**
   * A missed beat costs nothing (the next beat polls what is due), but a burst of them
   * means the event loop was blocked: one warning per minute at most, with the count.
   */
  private missedBeat(): void {
    this.missed.count++;
    const now = this.deps.now();
    if (now - this.missed.warnedAt < 60_000) return;
    this.deps.log.warn({ missed: this.missed.count }, 'scheduler heartbeat missed: the event loop was blocked (a long poll or commit) or the process was paused (SIGSTOP, a frozen VM); due sources run on the next beat');
    this.missed = { count: 0, warnedAt: now };
  }

  /** Stop scheduling, cut waits short and wait for polls in flight to finish. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.task?.stop();
    this.task = null;
    await Promise.allSettled([...this.state.values()].flatMap((st) => [...st.running]));
  }

  /** One full cycle of every source, the site list first, without stagger (`poll --once`). */
  async runAll(): Promise<CycleSummary[]> {
    const out: CycleSummary[] = [];
    const sites = this.topLevel.find((s) => s.def.name === sitesSource.name);
    if (sites) out.push(...(await this.runCycleWithDetails(sites, false)));
    this.replan();
    const rest = this.topLevel.filter((s) => s.def.name !== sitesSource.name);
    for (const summaries of await Promise.all(rest.map((s) => this.runCycleWithDetails(s, false)))) out.push(...summaries);
    return out;
  }

  /** Started and not stopped. */
  get running(): boolean {
    return this.task !== null && !this.abort.signal.aborted;
  }

  /** When a source is next due (epoch ms); null when it is not scheduled or the scheduler is not running. */
  nextRunOf(name: string): number | null {
    return this.running ? (this.state.get(name)?.nextRun ?? null) : null;
  }

  /** Is any source cycle in progress? */
  get busy(): boolean {
    return [...this.state.values()].some((st) => st.running.size > 0);
  }

  /** The request budget as last planned (null before the first plan). */
  budgetPlan(): BudgetPlan | null {
    return this.plan;
  }

  /** Where every scheduled source is in its work. */
  progress(): SourceProgress[] {
    const now = this.deps.now();
    return [...this.state.values()].map((st) => {
      const d = st.dispatching;
      return {
        name: st.source.def.name,
        priority: st.priority,
        effectiveEveryMs: st.effectiveEveryMs,
        stretch: st.effectiveEveryMs / st.source.everyMs,
        cycle: d ? { done: d.done, total: d.total, startedAt: d.startedAt } : null,
        caughtUp: st.caughtUp && st.polledAt !== null,
        // Behind schedule: the next poll's slot has passed, or the next cycle is overdue, or
        // no cycle has polled it for longer than its interval.
        lagMs: Math.max(
          d ? Math.max(0, now - d.nextSlot()) : this.running ? Math.max(0, now - st.nextRun) : 0,
          this.running && (st.polledAt ?? st.dueSince) !== null ? Math.max(0, now - (st.polledAt ?? st.dueSince)! - st.effectiveEveryMs) : 0,
        ),
      };
    });
  }

  /** Plan the budget for the current number of sites (again when it changed). */
  private replan(): void {
    if (!this.deps.plan) return;
    const sites = this.watchedSites().length;
    if (sites === this.plannedSites && this.plan) return;
    this.plannedSites = sites;
    this.plan = this.deps.plan(sites);
    for (const p of this.plan.sources) {
      const st = this.state.get(p.name);
      if (!st) continue;
      // A shorter effective interval applies from now; a longer one from the next cycle.
      if (st.dispatching === null && st.nextRun > 0) st.nextRun = Math.min(st.nextRun, st.nextRun - st.effectiveEveryMs + p.effectiveEveryMs);
      st.effectiveEveryMs = p.effectiveEveryMs;
      st.priority = p.priority;
    }
    this.emit('budget:plan', this.plan);
  }

  private tick(): void {
    this.startDue();
    try {
      this.deps.onTick?.();
    } catch (e) {
      this.deps.log.error({ err: String(e) }, 'tick failed');
    }
  }

  private startDue(): void {
    const now = this.deps.now();
    const sitesSt = this.state.get(sitesSource.name);
    // The site list runs alone first so per-site sources see the current list.
    const sitesPending = sitesSt !== undefined && sitesSt.running.size > 0;
    for (const st of this.byPriority()) {
      if (st.nextRun > now) continue;
      if (st.dispatching) {
        // Late: it starts as soon as the current one has handed out its polls.
        st.late = true;
        continue;
      }
      const def = st.source.def;
      if (def.per === 'site' && sitesPending) continue;
      const due = st.nextRun;
      if (st.late) {
        st.late = false;
        this.emit('cycle:late', { source: def.name, lateMs: now - due });
        this.deps.log.info({ source: def.name, late_ms: now - due }, 'cycle starts late: the previous one ran past its interval');
      }
      // The next one is due an interval after this one was due; if it is already past, it
      // starts right after this one has handed out its polls (never skipped). After the
      // catch-up (every entity at once) the first staggered cycle starts early by its spread,
      // so no entity waits longer than an interval for its second poll.
      st.nextRun = Math.max(due + st.effectiveEveryMs - (st.caughtUp ? 0 : this.spreadOf(st.source, st.effectiveEveryMs)), now);
      this.track(st, this.runCycleWithDetails(st.source, st.caughtUp, due));
      if (def.name === sitesSource.name && !st.caughtUp) return; // the others start on the next tick
    }
  }

  /** How long a staggered cycle of a source spreads its polls over. */
  private spreadOf(s: ScheduledSource, everyMs: number): number {
    return s.def.per === 'account' ? 0 : everyMs * (this.deps.spreadFraction ?? 0.5);
  }

  /** Sources in the order the budget serves them: the site list, then priority, then shorter interval. */
  private byPriority(): SourceState[] {
    const first = (st: SourceState): number => (st.source.def.name === sitesSource.name ? 0 : 1);
    return [...this.state.values()].sort(
      (a, b) => first(a) - first(b) || priorityRank(a.priority) - priorityRank(b.priority) || a.effectiveEveryMs - b.effectiveEveryMs,
    );
  }

  private track(st: SourceState, p: Promise<CycleSummary[]>): void {
    const tracked = p.finally(() => st.running.delete(tracked));
    st.running.add(tracked);
    void tracked.catch(() => undefined);
  }

  /**
   * Run one cycle of a source and of the detail sources it drives; the first summary is
   * the source's own, then one per enabled detail source.
   */
  async runCycleWithDetails(s: ScheduledSource, stagger: boolean, dueAt?: number): Promise<CycleSummary[]> {
    const children = this.followups.childrenOf(s.def);
    const details = new Map<string, PollOutcome[]>(children.map((c) => [c.name, []]));
    const startedAt = this.deps.now();
    for (const c of children) this.emit('cycle:start', { source: c.name });
    const own = await this.runCycle(s, stagger, details, dueAt);
    const out = [own];
    for (const c of children) {
      const outcomes = details.get(c.name)!;
      try {
        await this.deps.poller.finishCycle(c, outcomes);
      } catch (e) {
        this.deps.log.error({ source: c.name, err: String(e) }, 'cycle failed');
      }
      const summary = { source: c.name, startedAt, durationMs: this.deps.now() - startedAt, outcomes };
      this.deps.afterCycle?.(summary);
      this.emit('cycle:end', summary);
      out.push(summary);
    }
    return out;
  }

  /** Adaptive polling: a source with `fast` that saw a busy record is due again after `fast.everyMs`. */
  private adapt(def: SourceDef): void {
    const fast = def.fast;
    const st = this.state.get(def.name);
    if (!fast || !st || !this.followups.isBusy(def)) return;
    const soon = this.deps.now() + fast.everyMs;
    if (st.nextRun > 0 && soon < st.nextRun) st.nextRun = soon;
  }

  /** The ticket of a poll: its source's priority, due by `slot` plus an interval (earliest first). */
  private ticket(def: SourceDef, slot: number): Ticket {
    const st = this.state.get(def.name);
    const priority = priorityRank(st?.priority ?? (def.name === sitesSource.name ? 'critical' : 'normal'));
    return { priority, deadline: slot + (st?.effectiveEveryMs ?? def.defaultEveryMs), signal: this.abort.signal };
  }

  /** The details of `parent` under one parent entity that are due, read one by one. */
  private async pollDetails(parent: SourceDef, site: SiteInfo | null, out: Map<string, PollOutcome[]>, ticket: Ticket): Promise<void> {
    const parentRef = entityOf(parent, site);
    let directory: Map<number, SiteInfo> | null = null;
    for (const child of this.followups.childrenOf(parent)) {
      const everyMs = this.everyOf.get(child.name) ?? child.defaultEveryMs;
      for (const t of this.followups.due(child, parentRef, this.deps.now(), everyMs)) {
        if (this.abort.signal.aborted) return;
        const where = site ?? this.siteOf(t, (directory ??= this.directory()));
        if (where === undefined) {
          // A site gone from the list (or not watched): nothing to read, and nothing left to see go.
          if (Followups.isGone(t)) this.followups.done(child, parentRef, t.key, t.sig, this.deps.now());
          continue;
        }
        const o = await this.deps.poller.poll(child, where, child.per === 'site' ? undefined : t.key, { fromEmpty: t.isNew, ticket });
        if (o.error?.code === 'aborted') return;
        out.get(child.name)?.push(o);
        if (o.status !== 'failed') this.followups.done(child, parentRef, t.key, t.sig, this.deps.now());
        // A missing scope fails every detail alike: stop at the first.
        if (o.error?.code === 'scope_missing') break;
      }
    }
  }

  /** The watched site a detail target belongs to (null: the account; undefined: not watched or unknown). */
  private siteOf(t: DetailTarget, directory: Map<number, SiteInfo>): SiteInfo | null | undefined {
    if (t.siteId === null) return null;
    return directory.get(t.siteId);
  }

  private directory(): Map<number, SiteInfo> {
    return new Map(this.watchedSites().map((s) => [s.id, s]));
  }

  /**
   * Run one cycle of a source: one poll for the account, or one per watched site. `dueAt`:
   * a scheduled cycle (it tracks the source's progress and in-flight entities); without it,
   * a one-off cycle (`runAll`) that leaves the schedule alone.
   */
  async runCycle(s: ScheduledSource, stagger: boolean, details?: Map<string, PollOutcome[]>, dueAt?: number): Promise<CycleSummary> {
    const startedAt = this.deps.now();
    const st = dueAt === undefined ? undefined : this.state.get(s.def.name);
    this.emit('cycle:start', { source: s.def.name });
    const outcomes: PollOutcome[] = [];
    const every = this.state.get(s.def.name)?.effectiveEveryMs ?? s.everyMs;
    // How many entities this cycle had to poll (none: in a cluster, others hold them all).
    let claimed = -1;
    let error: string | undefined;
    try {
      if (s.def.per !== 'account') await this.deps.refreshSites?.();
      const all: (SiteInfo | null)[] = s.def.per === 'account' ? [null] : this.watchedSites();
      const entities = await this.claims.claim(s.def.name, dueAt ?? startedAt, all);
      claimed = entities.length;
      const spread = stagger ? this.spreadOf(s, every) : 0;
      const step = entities.length > 0 ? spread / entities.length : 0;
      const slotOf = (i: number): number => startedAt + i * step;
      let next = 0;
      let started = 0;
      const dispatch = { done: 0, total: entities.length, startedAt, nextSlot: () => slotOf(started) };
      if (st) st.dispatching = dispatch;
      const handedOut = (): void => {
        started++;
        if (st && st.dispatching === dispatch && started >= entities.length) {
          st.dispatching = null;
          // The catch-up is over once every entity had its first poll handed out.
          st.caughtUp = true;
          // Late already: the next cycle starts now, not at the next heartbeat.
          if (st.nextRun <= this.deps.now() && this.running) {
            st.late = true;
            setImmediate(() => this.running && this.startDue());
          }
        }
      };
      if (entities.length === 0 && st) st.dispatching = null;
      // Every site of a cycle would get the same 403: stop at the first one.
      let blocked = false;
      let lapsed = false;
      const giveUp = (): void => {
        next = entities.length;
        if (st?.dispatching === dispatch) st.dispatching = null;
      };
      // At most `concurrency` of this cycle's polls fetch at once; the others wait for their
      // commit (a slot is freed when a poll's fetch is over).
      const fetching = new Semaphore(this.deps.concurrency);
      const worker = async (): Promise<void> => {
        while (!this.abort.signal.aborted) {
          const i = next;
          if (i >= entities.length) return;
          if (blocked) return giveUp();
          next++;
          const entity = entities[i]!;
          const wait = slotOf(i) - this.deps.now();
          if (wait > 0) await this.sleep(wait, this.abort.signal);
          if (this.abort.signal.aborted) return;
          const id = entity?.id ?? ACCOUNT;
          // Still being polled by the last cycle (one slow entity): pass over it, it is not held up by us nor we by it.
          if (st?.inFlight.has(id)) {
            handedOut();
            continue;
          }
          st?.inFlight.add(id);
          const release = await fetching.acquire();
          try {
            if (this.abort.signal.aborted) return;
            if (blocked) return giveUp();
            if (this.claims.stillHeld?.(s.def.name) === false) {
              // The claim ran out while this cycle waited (a pause past the lease): what is
              // left of it is the others' now, at their next cycle.
              if (!lapsed) this.deps.log.warn({ source: s.def.name, polled: dispatch.done, left: entities.length - i }, 'the cluster lease ran out during this cycle; its other polls are left to the members that hold them now');
              lapsed = true;
              return giveUp();
            }
            handedOut();
            // Stopped as soon as the fetch says so, before the next poll takes the slot.
            const afterFetch = (error: { code: string } | null): void => {
              if (error?.code === 'scope_missing') blocked = true;
              release();
            };
            const ticket = this.ticket(s.def, slotOf(i));
            const o = await this.deps.poller.poll(s.def, entity, undefined, { ticket: entity === null ? accountTicket(ticket) : ticket, afterFetch });
            release();
            if (o.error?.code === 'aborted') return;
            outcomes.push(o);
            dispatch.done++;
            if (o.error?.code === 'scope_missing') blocked = true;
            else if (details && o.status !== 'failed') await this.pollDetails(s.def, entity, details, ticket);
          } finally {
            release();
            st?.inFlight.delete(id);
          }
        }
      };
      // A bounded pool, not one promise per site: memory stays flat with 10,000 sites.
      const pool = Math.max(1, Math.min(pollWorkers(this.deps.concurrency), entities.length));
      await Promise.all(Array.from({ length: pool }, worker));
      if (st?.dispatching === dispatch) st.dispatching = null;
      await this.deps.poller.finishCycle(s.def, outcomes);
      await this.claims.cycleDone?.(s.def.name);
    } catch (e) {
      if (st) st.dispatching = null;
      // poll() does not throw for API failures; this is a bug or a database error.
      error = String(e);
      this.deps.log.error({ source: s.def.name, err: error }, 'cycle failed');
    }
    if (st && !this.abort.signal.aborted) st.caughtUp = true;
    if (st && (outcomes.length > 0 || claimed === 0)) st.polledAt = this.deps.now();
    if (s.def.name === sitesSource.name) this.replan();
    this.adapt(s.def);
    const summary: CycleSummary = { source: s.def.name, startedAt, durationMs: this.deps.now() - startedAt, outcomes, ...(error !== undefined ? { error } : {}) };
    this.deps.afterCycle?.(summary);
    this.emit('cycle:end', summary);
    return summary;
  }

  private watchedSites(): SiteInfo[] {
    const known = this.deps.poller.sites();
    if (this.deps.sites === 'all') return known;
    const byId = new Map(known.map((s) => [s.id, s]));
    const out: SiteInfo[] = [];
    for (const id of this.deps.sites) {
      const s = byId.get(id);
      if (s) out.push(s);
      else if (known.length > 0 && !this.warnedMissing.has(id)) {
        this.warnedMissing.add(id);
        this.deps.log.warn({ site_id: id }, 'configured site is not in the site list; skipping it');
      }
    }
    return out;
  }
}

/** node-cron's logger interface, writing to our log (its default prints coloured text to the console). */
export function cronLogger(log: Logger): { info(m: string): void; warn(m: string): void; error(m: string | Error, e?: Error): void; debug(m: string | Error, e?: Error): void } {
  const text = (m: string | Error, e?: Error): string => `node-cron: ${String(m)}${e ? `: ${String(e)}` : ''}`;
  return {
    info: (m) => log.debug(text(m)),
    warn: (m) => log.warn(text(m)),
    error: (m, e) => log.error(text(m, e)),
    debug: (m, e) => log.debug(text(m, e)),
  };
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
