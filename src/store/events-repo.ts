import type BetterSqlite3 from 'better-sqlite3';
import { pick, prepare, qb } from './db.js';
import type { Selectable } from 'kysely';
import { COLUMNS, type Database } from './schema.js';

export type EventRow = Selectable<Database['events']>;
export type OutboxRow = Selectable<Database['outbox']>;
export type AttemptRow = Selectable<Database['delivery_attempts']>;

/** A due outbox row joined with the event body it carries. */
export interface DueDelivery extends OutboxRow {
  body: string;
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
  private readonly listStmt;
  private readonly outboxForEventStmt;
  private readonly oldestPendingStmt;

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
    this.listStmt = prepare<{ after: number; limit: number }>(sqlite, (p) =>
      qb.selectFrom('events').selectAll().where('seq', '>', p.after).orderBy('seq').limit(p.limit),
    );
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
  enqueue(row: Omit<OutboxRow, 'id'>): void {
    this.insertOutbox.run(row);
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

  /** Events after a cursor (seq), oldest first. */
  list(after: number, limit: number): EventRow[] {
    return this.listStmt.all({ after, limit }) as EventRow[];
  }

  /** The outbox rows of one event. */
  outboxFor(eventId: string): OutboxRow[] {
    return this.outboxForEventStmt.all({ event_id: eventId }) as OutboxRow[];
  }
}
