import type { Logger } from 'pino';
import { operatorEvent } from '../events/operator.js';
import type { HostwatchEvent } from '../events/types.js';
import type { Notifier } from '../notify/notifier.js';
import type { AlertRow } from '../store/alerts-repo.js';
import type { Store } from '../store/db.js';
import { repos, type Repos } from '../store/repos.js';

/** The rule and subject of the storage alert (one per instance). */
const RULE = 'storage-failing';
const SUBJECT = 'storage';

/** How long the store must fail before `storage.failing` fires (a lock released in a second is no news). */
export const STORAGE_ALERT_AFTER_MS = 30_000;
/** While the alert cannot be stored, how often storing it is tried again. */
const RETRY_MS = 10_000;
/** While the store fails, how often the log says so again. */
const REMIND_MS = 5 * 60_000;

export interface StorageWatchDeps {
  store: Pick<Store, 'problem' | 'transaction'>;
  notifier: Pick<Notifier, 'publishIn'>;
  instance: string;
  now: () => number;
  log: Logger;
  /** Removes secrets from the driver's message before it is stored. */
  scrub?: (text: string) => string;
  /** Default STORAGE_ALERT_AFTER_MS. */
  afterMs?: number;
}

/**
 * `storage.failing` (docs/events.md): the database refuses writes (a full disk, a lock held
 * elsewhere, a server that cannot be reached) or a statement found the file damaged. It
 * fires once that has lasted `afterMs` and resolves when writes go through again. Like every
 * event it is stored and delivered through the outbox, which the failing store may refuse:
 * storing it is tried again every 10 s (a full disk often has room for it once the log is
 * truncated), and an alert that could not be stored while it fired is stored once the store
 * works, firing and resolved together, so the outage is in the log and reaches the channels.
 * Meanwhile `/readyz` answers 503 with the reason and the log says it every 5 min.
 */
export class StorageWatch {
  /** When the store began to fail; null while it works. */
  private failingSince: number | null = null;
  /** The outage the alert is about: from its first failure until the resolution is stored. */
  private outage: { since: number; problem: string } | null = null;
  private remindedAt = 0;
  /** When the alert fired (in memory); null while it does not fire. */
  private firedAt: number | null = null;
  /** The store holds the alert firing (known once `checked`). */
  private stored = false;
  private checked = false;
  private triedAt = 0;

  constructor(private readonly deps: StorageWatchDeps) {}

  /** Look at the store; fire or resolve the alert when due. Returns the events it stored (to announce). */
  async tick(): Promise<HostwatchEvent[]> {
    const d = this.deps;
    const now = d.now();
    const found = d.store.problem();
    const problem = found === null ? null : (d.scrub?.(found) ?? found);
    if (problem !== null) {
      if (this.failingSince === null) {
        this.failingSince = now;
        this.remindedAt = now;
        d.log.error({ problem }, 'storage failing: the database cannot be written (or is damaged); /readyz answers 503 until it can');
      } else if (now - this.remindedAt >= REMIND_MS) {
        this.remindedAt = now;
        d.log.error({ problem, since: new Date(this.failingSince).toISOString() }, 'storage still failing');
      }
      this.outage = { since: this.outage?.since ?? this.failingSince, problem };
      if (this.firedAt === null && now - this.failingSince >= (d.afterMs ?? STORAGE_ALERT_AFTER_MS)) this.firedAt = now;
      if (this.firedAt === null || now - this.triedAt < RETRY_MS) return [];
      this.triedAt = now;
      const firedAt = this.firedAt;
      return this.write(async (r) => ((await this.firing(r)) ? [] : [await this.put(r, 'firing', firedAt)]));
    }
    if (this.failingSince !== null) {
      d.log.info({ since: new Date(this.failingSince).toISOString() }, 'storage works again');
      this.failingSince = null;
    }
    // Nothing fired, and no firing is left in the store by an earlier run: nothing to do.
    if (this.firedAt === null && this.checked && !this.stored) return [];
    const firedAt = this.firedAt;
    const events = await this.write(async (r) => {
      const out: HostwatchEvent[] = [];
      if (!(await this.firing(r))) {
        if (firedAt === null) return out;
        // It fired while nothing could be stored: stored now, so the outage is on record.
        out.push(await this.put(r, 'firing', firedAt));
      }
      out.push(await this.put(r, 'resolved', now));
      return out;
    });
    if (!this.stored) {
      this.firedAt = null;
      this.outage = null;
    }
    return events;
  }

  /** Whether the store holds this alert firing (from this run, or left by an earlier one); read once. */
  private async firing(r: Repos): Promise<boolean> {
    if (!this.checked) {
      this.stored = (await r.alerts.get(RULE, SUBJECT))?.status === 'firing';
      this.checked = true;
    }
    return this.stored;
  }

  /** Run `fn` in a transaction; its events once committed, or none when the store refuses. */
  private async write(fn: (r: Repos) => Promise<HostwatchEvent[]>): Promise<HostwatchEvent[]> {
    const before = { stored: this.stored, checked: this.checked };
    try {
      return await this.deps.store.transaction((tx) => fn(repos(tx)));
    } catch (e) {
      Object.assign(this, before);
      this.deps.log.debug({ err: String(e) }, 'storage.failing could not be stored yet');
      return [];
    }
  }

  /** Store the alert's firing or resolution (an event, its outbox rows, the alert row). */
  private async put(r: Repos, status: 'firing' | 'resolved', at: number): Promise<HostwatchEvent> {
    const d = this.deps;
    const prev: AlertRow | undefined = await r.alerts.get(RULE, SUBJECT);
    const seq = status === 'firing' ? (prev?.seq ?? 0) + 1 : (prev?.seq ?? 1);
    const outage = this.outage ?? { since: prev?.since ?? at, problem: 'the database failed' };
    const event = operatorEvent({
      rule: RULE,
      instance: d.instance,
      subject: SUBJECT,
      at,
      summary:
        status === 'firing'
          ? `hostwatch cannot use its database since ${new Date(outage.since).toISOString()}: ${outage.problem}`
          : `hostwatch's database works again (failing since ${new Date(outage.since).toISOString()}: ${outage.problem})`,
      alert: { seq, status },
      extra: { problem: outage.problem, failing_since: new Date(outage.since).toISOString() },
    });
    await d.notifier.publishIn(r, event);
    await r.alerts.put({ rule: RULE, subject: SUBJECT, site_id: null, status, seq, since: at, last_event_id: event.id, pending_since: null, clear_since: null, last_sent_at: at, repeats: 0 });
    this.stored = status === 'firing';
    return event;
  }
}
