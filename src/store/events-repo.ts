import type BetterSqlite3 from 'better-sqlite3';
import { pick, prepare, qb, type Prepared } from './db.js';
import type { Compilable, Selectable } from 'kysely';
import { COLUMNS, type Database } from './schema.js';
import type { HostwatchEvent } from '../events/types.js';

export type EventRow = Selectable<Database['events']>;
export type OutboxRow = Selectable<Database['outbox']>;
export type AttemptRow = Selectable<Database['delivery_attempts']>;

/** An outbox row to insert; group_key defaults to null (sent on its own). */
export type OutboxInsert = Omit<OutboxRow, 'id' | 'group_key'> & { group_key?: string | null };

/** A due outbox row joined with the event body it carries. */
export interface DueDelivery extends OutboxRow {
  body: string;
}

/** What the event feed and `hostwatch events` filter on; null means any. */
export interface EventFilter {
  /** The CloudEvents type, e.g. `hostwatch.site.offline` (see eventType). */
  type: string | null;
  siteId: number | null;
  /** Only events whose time is at or after this (epoch ms). */
  since: number | null;
}

/** One entry of the event log: its cursor and the CloudEvent exactly as stored. */
export interface LoggedEvent {
  seq: number;
  body: string;
}

/** An outbox row as operators see it: which event, where, and how its delivery went. */
export interface DeliveryView {
  event_id: string;
  type: string;
  subject: string;
  channel: string;
  state: OutboxRow['state'];
  attempts: number;
  last_error: string | null;
  next_attempt_at: number;
  updated_at: number;
  /** The outbox row's id (what `hostwatch redeliver` also accepts). */
  id: number;
  group_key: string | null;
  /** The status code of the last attempt (null: none yet, or no HTTP/SMTP answer). */
  last_status: number | null;
}


/**
 * One prepared statement per combination of optional filters, each built on first use:
 * a filter that is absent is left out of the SQL (so indexes stay usable) rather than
 * written as `(? IS NULL OR col = ?)`.
 */
class Variants<P extends Record<string, unknown>, F> {
  private readonly cache = new Map<string, Prepared<P>>();

  constructor(
    private readonly sqlite: BetterSqlite3.Database,
    private readonly build: (flags: F, p: { [K in keyof P]: P[K] }) => Compilable,
  ) {}

  get(flags: F): Prepared<P> {
    const key = JSON.stringify(flags);
    let stmt = this.cache.get(key);
    if (!stmt) {
      stmt = prepare<P>(this.sqlite, (p) => this.build(flags, p));
      this.cache.set(key, stmt);
    }
    return stmt;
  }
}

type LogParams = { after: number; type: string; site_id: number; since: number; limit: number };
type LogFlags = { type: boolean; site: boolean; since: boolean; newest: boolean };
type DeliveryParams = { channel: string; limit: number };
type RedeliverParams = { event_id: string; outbox_id: number; channel: string; now: number };

/** The `events` row of an event; `body` is its exact JSON (what is signed and sent). */
export function toEventRow(e: HostwatchEvent, body: string = JSON.stringify(e)): Omit<EventRow, 'seq'> {
  return {
    id: e.id,
    type: e.type,
    subject: e.subject,
    site_id: e.data.site_id,
    severity: e.data.severity,
    status: e.data.status ?? null,
    rule: e.data.rule,
    time: Date.parse(e.time),
    body,
  };
}

/** The event log, the outbox and the delivery attempts. */
export class EventsRepo {
  private readonly insertEvent;
  private readonly insertOutbox;
  private readonly dueStmt;
  private readonly updateOutbox;
  private readonly insertAttempt;
  private readonly pendingCountStmt;
  private readonly nextDueStmt;
  private readonly logStmts;
  private readonly deliveryStmts;
  private readonly outboxForEventStmt;
  private readonly oldestPendingStmt;
  private readonly lastSeqStmt;
  private readonly redeliverStmts;

  constructor(sqlite: BetterSqlite3.Database) {
    this.insertEvent = prepare<Omit<EventRow, 'seq'>>(sqlite, (p) =>
      qb.insertInto('events').values(pick(p, COLUMNS.events)).onConflict((oc) => oc.column('id').doNothing()),
    );
    this.insertOutbox = prepare<Omit<OutboxRow, 'id'>>(sqlite, (p) =>
      qb.insertInto('outbox').values(pick(p, COLUMNS.outbox)).onConflict((oc) => oc.columns(['event_id', 'channel']).doNothing()),
    );
    this.dueStmt = prepare<{ now: number; limit: number }>(sqlite, (p) =>
      qb
        .selectFrom('outbox')
        .innerJoin('events', 'events.id', 'outbox.event_id')
        .selectAll('outbox')
        .select('events.body')
        .where('outbox.state', '=', 'pending')
        .where('outbox.next_attempt_at', '<=', p.now)
        .orderBy('outbox.id')
        .limit(p.limit),
    );
    this.updateOutbox = prepare<Pick<OutboxRow, 'id' | 'state' | 'attempts' | 'next_attempt_at' | 'last_error' | 'updated_at'>>(
      sqlite,
      (p) =>
        qb
          .updateTable('outbox')
          .set({
            state: p.state,
            attempts: p.attempts,
            next_attempt_at: p.next_attempt_at,
            last_error: p.last_error,
            updated_at: p.updated_at,
          })
          .where('id', '=', p.id),
    );
    this.insertAttempt = prepare<Omit<AttemptRow, 'id'>>(sqlite, (p) => qb.insertInto('delivery_attempts').values(pick(p, COLUMNS.delivery_attempts)));
    this.pendingCountStmt = prepare<{ state: OutboxRow['state'] }>(sqlite, (p) =>
      qb.selectFrom('outbox').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', p.state),
    );
    this.nextDueStmt = prepare<{ state: OutboxRow['state'] }>(sqlite, (p) =>
      qb.selectFrom('outbox').select((eb) => eb.fn.min('next_attempt_at').as('at')).where('state', '=', p.state),
    );
    this.logStmts = new Variants<LogParams, LogFlags>(sqlite, (f, p) =>
      qb
        .selectFrom('events')
        .select(['seq', 'body'])
        .$if(!f.newest, (q) => q.where('seq', '>', p.after))
        .$if(f.type, (q) => q.where('type', '=', p.type))
        .$if(f.site, (q) => q.where('site_id', '=', p.site_id))
        .$if(f.since, (q) => q.where('time', '>=', p.since))
        .orderBy('seq', f.newest ? 'desc' : 'asc')
        .limit(p.limit),
    );
    this.deliveryStmts = new Variants<DeliveryParams, { failed: boolean; channel: boolean }>(sqlite, (f, p) =>
      qb
        .selectFrom('outbox')
        .innerJoin('events', 'events.id', 'outbox.event_id')
        .select(['outbox.event_id', 'events.type', 'events.subject', 'outbox.channel', 'outbox.state', 'outbox.attempts'])
        .select(['outbox.last_error', 'outbox.next_attempt_at', 'outbox.updated_at', 'outbox.id', 'outbox.group_key'])
        .select((eb) =>
          eb
            .selectFrom('delivery_attempts')
            .select('delivery_attempts.status_code')
            .whereRef('delivery_attempts.outbox_id', '=', 'outbox.id')
            .orderBy('delivery_attempts.id', 'desc')
            .limit(1)
            .as('last_status'),
        )
        // Failed: dead-lettered, or waiting to retry after at least one failed attempt.
        .$if(f.failed, (q) =>
          q.where((eb) => eb.or([eb('outbox.state', '=', 'dead'), eb.and([eb('outbox.state', '=', 'pending'), eb('outbox.attempts', '>=', 1)])])),
        )
        .$if(f.channel, (q) => q.where('outbox.channel', '=', p.channel))
        .orderBy('outbox.id', 'desc')
        .limit(p.limit),
    );
    this.redeliverStmts = new Variants<RedeliverParams, { kind: 'event' | 'outbox' | 'dead'; channel: boolean }>(sqlite, (f, p) =>
      qb
        .updateTable('outbox')
        .set({ state: 'pending', attempts: 0, next_attempt_at: p.now, updated_at: p.now })
        .$if(f.kind === 'event', (q) => q.where('event_id', '=', p.event_id))
        .$if(f.kind === 'outbox', (q) => q.where('id', '=', p.outbox_id))
        .$if(f.kind === 'dead', (q) => q.where('state', '=', 'dead'))
        .$if(f.channel, (q) => q.where('channel', '=', p.channel)),
    );
    this.lastSeqStmt = prepare<Record<string, never>>(sqlite, () => qb.selectFrom('events').select((eb) => eb.fn.max('seq').as('seq')));
    this.oldestPendingStmt = prepare<{ state: OutboxRow['state'] }>(sqlite, (p) =>
      qb.selectFrom('outbox').select((eb) => eb.fn.min('created_at').as('at')).where('state', '=', p.state),
    );
    this.outboxForEventStmt = prepare<{ event_id: string }>(sqlite, (p) =>
      qb.selectFrom('outbox').selectAll().where('event_id', '=', p.event_id).orderBy('channel'),
    );
  }

  /** Append an event; a second insert of the same id is ignored (returns false). */
  addEvent(row: Omit<EventRow, 'seq'>): boolean {
    return this.insertEvent.run(row).changes > 0;
  }

  /** Queue an event for a channel (idempotent per event and channel). */
  enqueue(row: OutboxInsert): void {
    this.insertOutbox.run({ ...row, group_key: row.group_key ?? null });
  }

  /**
   * Send again (`hostwatch redeliver`): the chosen rows become pending, due now, with a
   * fresh retry schedule; their attempt history stays. Same event id, so receivers can
   * deduplicate. Returns how many rows were requeued.
   */
  redeliver(target: { eventId: string } | { outboxId: number } | { dead: true }, channel: string | null, now: number): number {
    const stmt = this.redeliverStmts.get({ kind: 'eventId' in target ? 'event' : 'outboxId' in target ? 'outbox' : 'dead', channel: channel !== null });
    const params = {
      event_id: 'eventId' in target ? target.eventId : '',
      outbox_id: 'outboxId' in target ? target.outboxId : 0,
      channel: channel ?? '',
      now,
    };
    return stmt.run(params).changes;
  }

  /** Pending deliveries whose time has come, oldest first. */
  due(now: number, limit: number): DueDelivery[] {
    return this.dueStmt.all({ now, limit }) as DueDelivery[];
  }

  /** Record the outcome of one attempt and the row's new state, atomically. */
  recordAttempt(
    update: Pick<OutboxRow, 'id' | 'state' | 'attempts' | 'next_attempt_at' | 'last_error' | 'updated_at'>,
    attempt: Omit<AttemptRow, 'id'>,
  ): void {
    this.updateOutbox.run(update);
    this.insertAttempt.run(attempt);
  }

  /** How many outbox rows are in a state. */
  count(state: OutboxRow['state']): number {
    return (this.pendingCountStmt.get({ state }) as { n: number }).n;
  }

  /** When the earliest pending row becomes due (null when none is pending). */
  nextDue(): number | null {
    return (this.nextDueStmt.get({ state: 'pending' as const }) as { at: number | null }).at;
  }

  /** When the oldest pending row was queued (null when none is pending). */
  oldestPendingCreatedAt(): number | null {
    return (this.oldestPendingStmt.get({ state: 'pending' as const }) as { at: number | null }).at;
  }

  /** Events after a cursor (seq) that match a filter, oldest first. */
  list(after: number, filter: EventFilter, limit: number): LoggedEvent[] {
    return this.logStmts.get(logFlags(filter, false)).all(logParams(filter, after, limit)) as LoggedEvent[];
  }

  /** The cursor of the newest event (0 when the log is empty). */
  lastSeq(): number {
    return (this.lastSeqStmt.get({}) as { seq: number | null }).seq ?? 0;
  }

  /** The newest `limit` events that match a filter, newest first. */
  latest(filter: EventFilter, limit: number): LoggedEvent[] {
    return this.logStmts.get(logFlags(filter, true)).all(logParams(filter, 0, limit)) as LoggedEvent[];
  }

  /** Recent outbox rows, newest first; `failed` keeps dead rows and rows waiting to retry. */
  deliveries(filter: { failed: boolean; channel: string | null }, limit: number): DeliveryView[] {
    const stmt = this.deliveryStmts.get({ failed: filter.failed, channel: filter.channel !== null });
    return stmt.all({ channel: filter.channel ?? '', limit }) as DeliveryView[];
  }

  /** The outbox rows of one event. */
  outboxFor(eventId: string): OutboxRow[] {
    return this.outboxForEventStmt.all({ event_id: eventId }) as OutboxRow[];
  }
}

function logFlags(f: EventFilter, newest: boolean): LogFlags {
  return { type: f.type !== null, site: f.siteId !== null, since: f.since !== null, newest };
}

// Absent filters are not in the statement's SQL, so their placeholder values are never bound.
function logParams(f: EventFilter, after: number, limit: number): LogParams {
  return { after, type: f.type ?? '', site_id: f.siteId ?? 0, since: f.since ?? 0, limit };
}
