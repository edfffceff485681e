import { EventEmitter, setMaxListeners } from 'node:events';
import cron, { type ScheduledTask } from 'node-cron';
import type { Logger } from 'pino';
import type { PollOutcome, Poller } from '../pipeline/poller.js';
import { Semaphore } from '../semaphore.js';
import { entityOf, isTopLevel, sitesSource } from '../sources/registry.js';
import type { EnabledSource } from '../sources/select.js';
import type { SiteInfo, SourceDef } from '../sources/types.js';
import { Followups } from './followups.js';

/** A source with its effective interval (what `enabledSources` gives). */
export type ScheduledSource = EnabledSource;

export interface CycleSummary {
  source: string;
  startedAt: number;
  durationMs: number;
  outcomes: PollOutcome[];
}

/** Typed lifecycle events; tests wait on these instead of sleeping. */
export interface SchedulerEvents {
  'cycle:start': [{ source: string }];
  'cycle:end': [CycleSummary];
  'cycle:skipped': [{ source: string; reason: string }];
}

/**
 * Which due work this instance takes: the seam a cluster fills with leases claimed in the
 * database (cluster/work-claims.ts). Alone, an instance takes everything.
 */
export interface WorkClaims {
  /**
   * Of a cycle of `source` due at `dueAt`, the entities this instance polls: sites for a
   * per-site source, `[null]` (the account) for an account source.
   */
  claim(source: string, dueAt: number, entities: readonly (SiteInfo | null)[]): readonly (SiteInfo | null)[] | Promise<readonly (SiteInfo | null)[]>;
}

/** One instance alone: every due entity is its own. */
export const takeAll: WorkClaims = { claim: (_source, _dueAt, entities) => entities };

export interface SchedulerDeps {
  poller: Poller;
  /**
   * The enabled sources. Top-level ones are scheduled; per-record ones are read in their
   * parent's cycle (their `everyMs` is the slow schedule); views are the poller's business.
   */
  sources: readonly ScheduledSource[];
  /** Detail follow-ups and adaptive polling; must be the one the poller reports fetches to. */
  followups?: Followups;
  sites: 'all' | readonly number[];
  now: () => number;
  log: Logger;
  /** Polls of one source in flight at once (the API client limits requests further). */
  concurrency: number;
  /** Part of each interval over which per-site polls are spread (no burst at :00). */
  spreadFraction?: number;
  /** Called after each source cycle (writes the source-level poll state). */
  afterCycle?: (summary: CycleSummary) => void;
  /** Called on every heartbeat second, after the due sources started (the Timekeeper). */
  onTick?: () => void;
  /** Which due work this instance takes (default: all of it). */
  claims?: WorkClaims;
  /** Before a per-site cycle: read the site list another cluster member may have stored. */
  refreshSites?: () => Promise<void>;
}

/**
 * How many polls of one source run at once, for an API concurrency. More than the API's
 * concurrency: a poll that waits for its commit to be durable frees its fetch slot (see
 * runCycle), so with more polls in flight the fetches go on meanwhile, and the polls that
 * wait commit together (group commit). Fetches stay at `api.max_concurrency` per source.
 */
export function pollWorkers(concurrency: number): number {
  return concurrency * 4;
}

/**
 * Decides when each source runs. One node-cron heartbeat a second checks which sources
 * are due; a source never runs twice at once (a due source still running is skipped and
 * reported). Every source runs once at start (catch-up: a restart polls everything).
 */
export class Scheduler extends EventEmitter<SchedulerEvents> {
  private readonly nextRun = new Map<string, number>();
  private readonly inFlight = new Map<string, Promise<CycleSummary>>();
  private task: ScheduledTask | null = null;
  private readonly abort = new AbortController();
  private warnedMissing = new Set<number>();
  private readonly followups: Followups;
  private readonly topLevel: readonly ScheduledSource[];
  private readonly everyOf = new Map<string, number>();

  constructor(private readonly deps: SchedulerDeps) {
    super();
    this.followups = deps.followups ?? new Followups(deps.sources.map((s) => s.def));
    this.topLevel = deps.sources.filter((s) => isTopLevel(s.def));
    for (const s of deps.sources) this.everyOf.set(s.def.name, s.everyMs);
    // Every staggered wait listens on this one signal (a pool per source, several sources).
    setMaxListeners(0, this.abort.signal);
  }

  /** Start the heartbeat; the site list first, then everything else. */
  start(): void {
    const now = this.deps.now();
    for (const s of this.topLevel) this.nextRun.set(s.def.name, now);
    // node-cron's own messages become log lines (stderr), never raw text on stdout.
    this.task = cron.schedule('* * * * * *', () => this.tick(), { name: 'hostwatch-heartbeat', noOverlap: true, logger: cronLogger(this.deps.log) });
    // A missed beat costs nothing (the next beat polls what is due), but a burst of them
    // means the event loop was blocked: one warning per minute at most, with the count.
    this.task.on('execution:missed', () => this.missedBeat());
    this.tick();
  }

  private missed = { count: 0, warnedAt: -Infinity };

  private missedBeat(): void {
    this.missed.count++;
    const now = this.deps.now();
    if (now - this.missed.warnedAt < 60_000) return;
    this.deps.log.warn({ missed: this.missed.count }, 'scheduler heartbeat missed: the event loop was blocked (a long poll or commit); due sources run on the next beat');
    this.missed = { count: 0, warnedAt: now };
  }

  /** Stop scheduling, cut staggered waits short and wait for polls in flight to finish. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.task?.stop();
    await this.task?.destroy();
    this.task = null;
    await Promise.allSettled(this.inFlight.values());
  }

  /** One full cycle of every source, the site list first, without stagger (`poll --once`). */
  async runAll(): Promise<CycleSummary[]> {
    const out: CycleSummary[] = [];
    const sites = this.topLevel.find((s) => s.def.name === sitesSource.name);
    if (sites) out.push(await this.runCycle(sites, false));
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
    return this.running ? (this.nextRun.get(name) ?? null) : null;
  }

  /** Is any source cycle in progress? */
  get busy(): boolean {
    return this.inFlight.size > 0;
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
    // The site list runs alone first so per-site sources see the current list.
    const sitesPending = this.inFlight.has(sitesSource.name);
    for (const s of this.topLevel) {
      const due = this.nextRun.get(s.def.name) ?? now;
      if (due > now) continue;
      if (this.inFlight.has(s.def.name)) {
        this.emit('cycle:skipped', { source: s.def.name, reason: 'previous cycle still running' });
        this.deps.log.warn({ source: s.def.name }, 'cycle skipped: the previous one is still running');
        this.nextRun.set(s.def.name, due + s.everyMs);
        continue;
      }
      if (s.def.per === 'site' && sitesPending) continue;
      this.nextRun.set(s.def.name, Math.max(due + s.everyMs, now));
      const p = this.runCycleWithDetails(s, true)
        .then((summaries) => summaries[0]!)
        .finally(() => this.inFlight.delete(s.def.name));
      this.inFlight.set(s.def.name, p);
      if (s.def.name === sitesSource.name) return; // others start on the next tick
    }
  }

  /**
   * Run one cycle of a source and of the detail sources it drives; the first summary is
   * the source's own, then one per enabled detail source.
   */
  async runCycleWithDetails(s: ScheduledSource, stagger: boolean): Promise<CycleSummary[]> {
    const children = this.followups.childrenOf(s.def);
    const details = new Map<string, PollOutcome[]>(children.map((c) => [c.name, []]));
    const startedAt = this.deps.now();
    for (const c of children) this.emit('cycle:start', { source: c.name });
    const own = await this.runCycle(s, stagger, details);
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
    if (!fast || !this.followups.isBusy(def)) return;
    const soon = this.deps.now() + fast.everyMs;
    const next = this.nextRun.get(def.name);
    if (next !== undefined && soon < next) this.nextRun.set(def.name, soon);
  }

  /** The details of `parent`'s records under one parent entity that are due, read one by one. */
  private async pollDetails(parent: SourceDef, site: SiteInfo | null, out: Map<string, PollOutcome[]>): Promise<void> {
    const parentRef = entityOf(parent, site);
    for (const child of this.followups.childrenOf(parent)) {
      const everyMs = this.everyOf.get(child.name) ?? child.defaultEveryMs;
      for (const t of this.followups.due(child, parentRef, this.deps.now(), everyMs)) {
        if (this.abort.signal.aborted) return;
        const o = await this.deps.poller.poll(child, site, t.key, { fromEmpty: t.isNew });
        out.get(child.name)?.push(o);
        if (o.status !== 'failed') this.followups.done(child, parentRef, t.key, t.sig, this.deps.now());
        // A missing scope fails every detail alike: stop at the first.
        if (o.error?.code === 'scope_missing') break;
      }
    }
  }

  /** Run one cycle of a source: one poll for the account, or one per watched site. */
  async runCycle(s: ScheduledSource, stagger: boolean, details?: Map<string, PollOutcome[]>): Promise<CycleSummary> {
    const startedAt = this.deps.now();
    this.emit('cycle:start', { source: s.def.name });
    const outcomes: PollOutcome[] = [];
    try {
      const claims = this.deps.claims ?? takeAll;
      if (s.def.per === 'account') {
        // In a cluster the account is polled by one member: the one that holds its lease.
        if ((await claims.claim(s.def.name, startedAt, [null])).length > 0) {
          const o = await this.deps.poller.poll(s.def, null);
          outcomes.push(o);
          if (details && o.status !== 'failed') await this.pollDetails(s.def, null, details);
        }
      } else {
        await this.deps.refreshSites?.();
        const sites = (await claims.claim(s.def.name, startedAt, this.watchedSites())).filter((x): x is SiteInfo => x !== null);
        const spread = stagger ? s.everyMs * (this.deps.spreadFraction ?? 0.5) : 0;
        const step = sites.length > 0 ? spread / sites.length : 0;
        let next = 0;
        // Every site of a cycle would get the same 403: stop at the first one.
        let blocked = false;
        // At most `concurrency` of this source's polls fetch at once; the others wait for
        // their commit (a slot is freed when a poll's fetch is over).
        const fetching = new Semaphore(this.deps.concurrency);
        const worker = async (): Promise<void> => {
          while (!blocked && !this.abort.signal.aborted) {
            const i = next++;
            if (i >= sites.length) return;
            const wait = startedAt + i * step - this.deps.now();
            if (wait > 0) await sleep(wait, this.abort.signal);
            const release = await fetching.acquire();
            if (blocked || this.abort.signal.aborted) {
              release();
              return;
            }
            let o: PollOutcome;
            // Stopped as soon as the fetch says so, before the next poll takes the slot.
            const afterFetch = (error: { code: string } | null): void => {
              if (error?.code === 'scope_missing') blocked = true;
              release();
            };
            try {
              o = await this.deps.poller.poll(s.def, sites[i]!, undefined, { afterFetch });
            } finally {
              release();
            }
            outcomes.push(o);
            if (o.error?.code === 'scope_missing') blocked = true;
            else if (details && o.status !== 'failed') await this.pollDetails(s.def, sites[i]!, details);
          }
        };
        // A bounded pool, not one promise per site: memory stays flat with 10,000 sites.
        const pool = Math.max(1, Math.min(pollWorkers(this.deps.concurrency), sites.length));
        await Promise.all(Array.from({ length: pool }, worker));
      }
      await this.deps.poller.finishCycle(s.def, outcomes);
    } catch (e) {
      // poll() does not throw for API failures; this is a bug or a database error.
      this.deps.log.error({ source: s.def.name, err: String(e) }, 'cycle failed');
    }
    this.adapt(s.def);
    const summary = { source: s.def.name, startedAt, durationMs: this.deps.now() - startedAt, outcomes };
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

function sleep(ms: number, signal: AbortSignal): Promise<void> {
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
