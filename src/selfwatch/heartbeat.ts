import type { Logger } from 'pino';
import { request } from 'undici';
import { proxyDispatcher } from '../outbound.js';
import type { HeartbeatConfig } from '../config/types.js';
import type { CycleSummary } from '../scheduler/scheduler.js';

/**
 * The heartbeat (config `heartbeat: { url, every }`): a GET to a dead man's switch service
 * (healthchecks.io style) every `every` while hostwatch's cycles succeed. When they stop
 * succeeding (the API unreachable, the database failing, the process stuck) the pings stop
 * and the service tells someone that hostwatch itself is down. The URL usually carries the
 * check's token: it is a secret, and never logged.
 */

/** What the heartbeat knows of recent cycles. */
export interface HeartbeatState {
  /** When the last cycle that read something ended (null: none yet). */
  lastGood: number | null;
  /** Sources whose latest cycle failed in every poll. */
  failing: ReadonlySet<string>;
}

/**
 * Whether the daemon is well enough to ping (pure): some cycle succeeded within `staleMs`,
 * and no source's latest cycle failed outright.
 */
export function heartbeatHealthy(state: HeartbeatState, now: number, staleMs: number): boolean {
  return state.lastGood !== null && now - state.lastGood <= staleMs && state.failing.size === 0;
}

/**
 * A cycle succeeded when it had no polls (nothing to read) or at least one poll that did
 * not fail, and did not fail as a whole: a cycle whose results could not be stored (a full
 * disk, the database down) is bad, whatever its polls read before. A source whose every
 * poll failed for a missing scope is not "down" (it has its own operator event,
 * source.scope_missing): it neither helps nor stops the heartbeat.
 */
export function cycleOutcome(s: Pick<CycleSummary, 'outcomes' | 'error'>): 'good' | 'bad' | 'neutral' {
  if (s.error !== undefined) return 'bad';
  if (s.outcomes.length === 0) return 'good';
  if (s.outcomes.some((o) => o.status !== 'failed')) return 'good';
  return s.outcomes.every((o) => o.error?.code === 'scope_missing') ? 'neutral' : 'bad';
}

export interface HeartbeatDeps {
  config: HeartbeatConfig;
  /** A cycle older than this no longer counts as "succeeding" (derived from the intervals). */
  staleMs: number;
  now: () => number;
  log: Logger;
}

/** Pings the heartbeat URL on a timer while cycles succeed. */
export class Heartbeat {
  private lastGood: number | null = null;
  private readonly failing = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private skipping = false;
  /** Pings sent successfully (for tests and metrics). */
  sent = 0;

  constructor(private readonly deps: HeartbeatDeps) {}

  /** Take the result of a finished cycle (from the scheduler's `cycle:end`). */
  observe(s: CycleSummary): void {
    const outcome = cycleOutcome(s);
    if (outcome === 'good') {
      this.lastGood = s.startedAt + s.durationMs;
      this.failing.delete(s.source);
    } else if (outcome === 'bad') {
      this.failing.add(s.source);
    }
  }

  /** Whether a ping would go now. */
  healthy(): boolean {
    return heartbeatHealthy({ lastGood: this.lastGood, failing: this.failing }, this.deps.now(), this.deps.staleMs);
  }

  /** Ping now if healthy. Never throws: a failed ping is logged (without the URL) and tried next time. */
  async beat(): Promise<'sent' | 'skipped' | 'failed'> {
    const log = this.deps.log;
    if (!this.healthy()) {
      if (!this.skipping) log.warn({ failing: [...this.failing] }, 'heartbeat withheld: cycles are not succeeding');
      this.skipping = true;
      return 'skipped';
    }
    if (this.skipping) log.info('heartbeat resumed: cycles succeed again');
    this.skipping = false;
    try {
      const res = await request(this.deps.config.url, {
        method: 'GET',
        dispatcher: proxyDispatcher(),
        headers: { 'user-agent': 'hostwatch-heartbeat' },
        headersTimeout: this.deps.config.timeout_ms,
        bodyTimeout: this.deps.config.timeout_ms,
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) {
        this.sent++;
        return 'sent';
      }
      log.warn({ status: res.statusCode }, 'heartbeat ping refused');
      return 'failed';
    } catch (e) {
      // The error text of a failed connection names the URL: only its code is logged.
      log.warn({ code: (e as { code?: string }).code ?? 'error' }, 'heartbeat ping failed');
      return 'failed';
    }
  }

  /** Ping every `every` until stopped. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.beat(), this.deps.config.every_ms);
    this.timer.unref();
  }

  /** Stop the timer. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
