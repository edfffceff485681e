import { createTask, type ScheduledTask } from 'node-cron';
import type { CelProgram } from '../cel.js';
import type { MaintenanceConfig } from '../config/types.js';
import type { HostwatchEvent } from '../events/types.js';
import { zoneOffsetMs } from './grouping.js';
import { compileMatch, matches, routeBindings } from './routing.js';

const MINUTE = 60_000;

interface CompiledWindow {
  cfg: MaintenanceConfig;
  starts: ScheduledTask;
  sites: ReadonlySet<number>;
  test: CelProgram | null;
}

/**
 * Recurring maintenance windows (config `maintenance`): a window opens at each time its
 * cron `schedule` matches in its time zone and stays open for `duration`. While open, the
 * events it covers (its `sites`, its `match`) are stored but not delivered, like a silence.
 */
export class MaintenanceCalendar {
  private readonly windows: CompiledWindow[];
  private cachedMinute = -1;
  private cachedOpen: CompiledWindow[] = [];

  constructor(configs: readonly MaintenanceConfig[]) {
    this.windows = configs.map((cfg, i) => ({
      cfg,
      // node-cron's matcher, never started: it only answers "does this minute match". It is
      // asked about wall-clock minutes of the window's zone, written as UTC (startsAt).
      starts: createTask(cfg.schedule, () => undefined, { timezone: 'UTC', name: `maintenance-${cfg.name}` }),
      sites: new Set(cfg.sites),
      test: compileMatch(`maintenance[${i}].match`, cfg.match),
    }));
  }

  /** Names of the windows open at `now`. */
  open(now: number): string[] {
    return this.openWindows(now).map((w) => w.cfg.name);
  }

  /** The first open window that covers the event, or null. */
  covering(e: HostwatchEvent, now: number): string | null {
    const open = this.openWindows(now);
    if (open.length === 0) return null;
    const bindings = routeBindings(e);
    for (const w of open) {
      if (w.sites.size > 0 && (e.data.site_id === null || !w.sites.has(e.data.site_id))) continue;
      if (matches(w.test, bindings)) return w.cfg.name;
    }
    return null;
  }

  /** Stop node-cron's bookkeeping of the matchers. */
  close(): void {
    for (const w of this.windows) void w.starts.destroy();
  }

  // A window is open when one of its start minutes lies in (now - duration, now]. The
  // answer only changes at a minute boundary, so it is computed once per minute.
  private openWindows(now: number): CompiledWindow[] {
    if (this.windows.length === 0) return [];
    const minute = Math.floor(now / MINUTE);
    if (minute !== this.cachedMinute) {
      this.cachedMinute = minute;
      this.cachedOpen = this.windows.filter((w) => {
        const span = Math.ceil(w.cfg.duration_ms / MINUTE);
        for (let m = 0; m < span; m++) {
          const start = (minute - m) * MINUTE;
          if (start + w.cfg.duration_ms > now && startsAt(start, w.cfg.timezone ?? 'UTC', (wall) => w.starts.match(wall))) return true;
        }
        return false;
      });
    }
    return this.cachedOpen;
  }
}

/**
 * Does a window whose cron schedule `matches` (asked about wall-clock minutes of `zone`,
 * written as UTC dates) start at the minute `t`? As cron does across a DST change: when
 * the clocks go forward, the wall minutes skipped (02:00–02:59 in Europe/Berlin) start at
 * the first minute after the jump; when they go back, a wall minute shown a second time
 * (the second 02:30) is no second start, so a window is not lost in spring nor open an hour
 * longer in autumn.
 */
export function startsAt(t: number, zone: string, matches: (wall: Date) => boolean): boolean {
  const wall = t + zoneOffsetMs(t, zone);
  const before = t - MINUTE + zoneOffsetMs(t - MINUTE, zone);
  for (let skipped = before + MINUTE; skipped < wall; skipped += MINUTE) if (matches(new Date(skipped))) return true;
  if (!matches(new Date(wall))) return false;
  // Shown before, if the clocks went back by 30 min, 1 h or 2 h since (the shifts zones use).
  for (const back of [30, 60, 120]) {
    const earlier = t - back * MINUTE;
    if (earlier + zoneOffsetMs(earlier, zone) === wall) return false;
  }
  return true;
}
