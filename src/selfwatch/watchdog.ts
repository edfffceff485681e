import { alertEventId, alertId, alertRepeatId, envelope } from '../events/envelope.js';
import type { HostwatchEvent } from '../events/types.js';
import type { Notifier } from '../notify/notifier.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { repos } from '../store/repos.js';

/** The rule name and subject of the watchdog alert. */
export const WATCHDOG_RULE = 'hostwatch-watchdog';
export const WATCHDOG_SUBJECT = 'hostwatch/watchdog';
export const WATCHDOG_EVENT = 'hostwatch.watchdog';

export interface WatchdogDeps {
  everyMs: number;
  store: Store;
  notifier: Pick<Notifier, 'publishIn'>;
  instance: string;
  now: () => number;
}

/**
 * `hostwatch.watchdog` (config `watchdog`): an alert that always fires, re-sent every
 * `every` while the daemon runs, like Alertmanager's Watchdog. A receiver that alerts on
 * its absence learns that hostwatch, or the path to the receiver, is down. It never
 * resolves: its silence is the signal. Its state is an alerts row, so a restart goes on
 * with the same firing and the next repeat number.
 */
export class Watchdog {
  /** Nothing can be due before this (from the row last read): no transaction each tick. */
  private nextDueAt = -Infinity;

  constructor(private readonly deps: WatchdogDeps) {}

  /** Fire, or re-send when `every` has passed since the last send, in one transaction; null when nothing is due. */
  async tick(): Promise<HostwatchEvent | null> {
    if (this.deps.now() < this.nextDueAt) return null;
    const done = await this.deps.store.transaction(async (tx) => {
      const r = repos(tx);
      const row = await r.alerts.get(WATCHDOG_RULE, WATCHDOG_SUBJECT);
      const e = this.due(row);
      if (!e) return { event: null, row };
      await this.deps.notifier.publishIn(r, e.event);
      await r.alerts.put(e.row);
      return e;
    });
    // Checked again in the transaction when the time comes (another member may have sent).
    if (done.row?.status === 'firing') this.nextDueAt = (done.row.last_sent_at ?? done.row.since) + this.deps.everyMs;
    return done.event;
  }

  /** The event to send and the row to write now, or null when nothing is due. */
  private due(row: AlertRow | undefined): { event: HostwatchEvent; row: AlertRow } | null {
    const d = this.deps;
    const now = d.now();
    const firing = row?.status === 'firing';
    if (firing && now - (row.last_sent_at ?? row.since) < d.everyMs) return null;
    const seq = firing ? row.seq : (row?.seq ?? 0) + 1;
    const repeats = firing ? row.repeats + 1 : 0;
    const id = firing ? alertRepeatId(WATCHDOG_RULE, WATCHDOG_SUBJECT, seq, repeats) : alertEventId(WATCHDOG_RULE, WATCHDOG_SUBJECT, seq, 'firing');
    const at = new Date(now);
    const e = envelope({
      id,
      instance: d.instance,
      subject: WATCHDOG_SUBJECT,
      time: at,
      data: {
        name: WATCHDOG_EVENT,
        severity: 'info',
        status: 'firing',
        summary: `hostwatch ${d.instance} is running (watchdog: always firing, re-sent every ${Math.round(d.everyMs / 60_000)} min)`,
        site_id: null,
        domain: null,
        changes: [],
        rule: WATCHDOG_RULE,
        // Re-sends fold into one alert on pagers (dedup_key, alias), as rule re-sends do.
        alert_id: alertId(WATCHDOG_RULE, WATCHDOG_SUBJECT, seq),
        observed_at: at.toISOString(),
        every_seconds: Math.round(d.everyMs / 1000),
        ...(repeats > 0 ? { repeat: repeats } : {}),
      },
    });
    return {
      event: e,
      row: {
        rule: WATCHDOG_RULE,
        subject: WATCHDOG_SUBJECT,
        site_id: null,
        status: 'firing',
        seq,
        since: firing ? row.since : now,
        last_event_id: id,
        pending_since: null,
        clear_since: null,
        last_sent_at: now,
        repeats,
      },
    };
  }
}
