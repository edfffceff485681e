import { pick, statement, variants, type Executor } from './sql.js';
import { sql, type ExpressionBuilder, type RawBuilder, type Selectable } from 'kysely';
import { COLUMNS, type Database } from './schema.js';
import type { HostwatchEvent } from '../events/types.js';

export type EventRow = Selectable<Database['events']>;
export type OutboxRow = Selectable<Database['outbox']>;
export type AttemptRow = Selectable<Database['delivery_attempts']>;

/** An outbox row to insert; group_key defaults to null (sent on its own). */
export type OutboxInsert = Omit<OutboxRow, 'id' | 'group_key' | 'claimed_by' | 'claim_token' | 'order_key'> & { group_key?: string | null; order_key?: string | null };

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
  /**
   * A pending row's first earlier row of the same alert (rule and subject) on its channel,
   * still pending: this one is sent not before it (with it, in one grouped message), whatever
   * its own due time (channels.md, "Order"). Null when nothing is ahead of it.
   */
  waits_behind: number | null;
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

type AttemptUpdate = Pick<OutboxRow, 'id' | 'state' | 'attempts' | 'next_attempt_at' | 'last_error' | 'updated_at' | 'claim_token'>;

const INSERT_EVENT = statement<Omit<EventRow, 'seq'>>((qb, p) =>
  qb.insertInto('events').values(pick(p, COLUMNS.events)).onConflict((oc) => oc.column('id').doNothing()),
);
const INSERT_OUTBOX = statement<Omit<OutboxRow, 'id' | 'claimed_by' | 'claim_token'>>((qb, p) =>
  qb.insertInto('outbox').values(pick(p, COLUMNS.outbox)).onConflict((oc) => oc.columns(['event_id', 'channel']).doNothing()),
);
/** The order key of an event's outbox rows: its rule and subject (an alert's firings and resolutions). */
export function orderKey(e: HostwatchEvent): string {
  return `${e.data.rule}\u001f${e.subject}`;
}

/**
 * A pending row goes only when no earlier row of its channel and order key is pending: a
 * firing that waits for its retry holds back its resolution on that channel (and a pager gets
 * its trigger before its resolve). `group`: in a read of a group's message, an earlier row of
 * the same group that is due now is not in the way (it goes in the same message, before it).
 * Used by every read of due rows (one instance, the cluster's claims, groups).
 */
export function inOrder(now: number, group: boolean, heldElsewhere: RawBuilder<boolean> | null = null) {
  // In a cluster, not an earlier row that another live member holds: it goes in that member's message.
  const mine = heldElsewhere === null ? sql`` : sql` AND NOT ${heldElsewhere}`;
  const sameMessage = group ? sql` AND NOT (earlier.group_key IS NOT DISTINCT FROM outbox.group_key AND earlier.next_attempt_at <= ${now}${mine})` : sql``;
  return sql<boolean>`NOT EXISTS (SELECT 1 FROM outbox AS earlier WHERE earlier.state = 'pending' AND earlier.channel = outbox.channel
    AND earlier.order_key = outbox.order_key AND earlier.id < outbox.id${sameMessage})`;
}

// The oldest due rows, at most `per_channel` of each channel (numbered by a window over
// the due rows: a backlog of one channel does not fill the read).
const DUE = statement<{ now: number; limit: number; per_channel: number }, DueDelivery>(
  (_qb, p) => sql`
    SELECT o.id, o.event_id, o.channel, o.state, o.attempts, o.next_attempt_at, o.last_error, o.created_at, o.updated_at,
      o.group_key, o.claimed_by, o.claim_token, e.body
    FROM (
      SELECT outbox.*, ROW_NUMBER() OVER (PARTITION BY outbox.channel ORDER BY outbox.id) AS n
      FROM outbox WHERE outbox.state = 'pending' AND outbox.next_attempt_at <= ${p.now} AND ${inOrder(p.now, false)}
    ) AS o
    JOIN events AS e ON e.id = o.event_id
    WHERE o.n <= ${p.per_channel}
    ORDER BY o.id
    LIMIT ${p.limit}`,
);
const UPDATE_OUTBOX = statement<AttemptUpdate>((qb, p) =>
  qb
    .updateTable('outbox')
    .set({ state: p.state, attempts: p.attempts, next_attempt_at: p.next_attempt_at, last_error: p.last_error, updated_at: p.updated_at, claimed_by: null })
    .where('id', '=', p.id)
    // The fence: only under the claim the row was sent under (a cluster member that lost
    // its claim records nothing; alone, the token stays 0).
    .where('claim_token', '=', p.claim_token),
);
const POSTPONE = statement<Pick<OutboxRow, 'id' | 'claim_token' | 'next_attempt_at' | 'updated_at'>>((qb, p) =>
  qb
    .updateTable('outbox')
    .set({ next_attempt_at: p.next_attempt_at, updated_at: p.updated_at, claimed_by: null })
    .where('id', '=', p.id)
    .where('state', '=', 'pending')
    .where('claim_token', '=', p.claim_token),
);
const INSERT_ATTEMPT = statement<Omit<AttemptRow, 'id'>>((qb, p) => qb.insertInto('delivery_attempts').values(pick(p, COLUMNS.delivery_attempts)));
const COUNT = statement<{ state: OutboxRow['state'] }, { n: number }>((qb, p) =>
  qb.selectFrom('outbox').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', p.state),
);
// Not the rows held back behind an earlier one of their key (inOrder): those come due with it.
// In due order along the outbox_due index, stopping at the first row not held back (a MIN
// with that condition would look at every pending row, as many as a backlog holds).
const NEXT_DUE = statement<{ state: OutboxRow['state'] }, { at: number | null }>((qb, p) =>
  qb.selectFrom('outbox').select('next_attempt_at as at').where('state', '=', p.state).where(inOrder(0, false)).orderBy('next_attempt_at').limit(1),
);
const LOG = variants<LogParams, LogFlags, LoggedEvent>((qb, f, p) =>
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
/** A failed delivery: dead-lettered, or waiting to retry after at least one failed attempt. */
const failedDelivery = (eb: ExpressionBuilder<Database, 'outbox'>) =>
  eb.or([eb('outbox.state', '=', 'dead'), eb.and([eb('outbox.state', '=', 'pending'), eb('outbox.attempts', '>=', 1)])]);
const FAILED_COUNT = variants<{ channel: string }, { channel: boolean }, { n: number | string }>((qb, f, p) =>
  qb
    .selectFrom('outbox')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where(failedDelivery)
    .$if(f.channel, (q) => q.where('outbox.channel', '=', p.channel)),
);
const DELIVERIES = variants<DeliveryParams, { failed: boolean; pending: boolean; channel: boolean }, DeliveryView>((qb, f, p) =>
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
    // The order the outbox worker keeps (inOrder above): the first earlier pending row of the
    // same rule and subject on the channel (in one grouped message with it, or before it).
    .select((eb) =>
      eb
        .selectFrom('outbox as earlier')
        .select((e) => e.fn.min<number>('earlier.id').as('id'))
        .where('earlier.state', '=', 'pending')
        .whereRef('earlier.channel', '=', 'outbox.channel')
        .whereRef('earlier.order_key', '=', 'outbox.order_key')
        .whereRef('earlier.id', '<', 'outbox.id')
        .where('outbox.state', '=', 'pending')
        .as('waits_behind'),
    )
    .$if(f.failed, (q) => q.where(failedDelivery))
    // Pending: still to send (due now, waiting to retry, or in a group's wait).
    .$if(f.pending, (q) => q.where('outbox.state', '=', 'pending'))
    .$if(f.channel, (q) => q.where('outbox.channel', '=', p.channel))
    .orderBy('outbox.id', 'desc')
    .limit(p.limit),
);
const REDELIVER = variants<RedeliverParams, { kind: 'event' | 'outbox' | 'dead'; channel: boolean }>((qb, f, p) =>
  qb
    .updateTable('outbox')
    // A new claim token: an attempt in flight when the row was sent again records nothing over it.
    .set((eb) => ({ state: 'pending', attempts: 0, next_attempt_at: p.now, updated_at: p.now, claimed_by: null, claim_token: eb('claim_token', '+', 1) }))
    .$if(f.kind === 'event', (q) => q.where('event_id', '=', p.event_id))
    .$if(f.kind === 'outbox', (q) => q.where('id', '=', p.outbox_id))
    .$if(f.kind === 'dead', (q) => q.where('state', '=', 'dead'))
    .$if(f.channel, (q) => q.where('channel', '=', p.channel)),
);
const LAST_SEQ = statement<Record<string, never>, { seq: number | null }>((qb) => qb.selectFrom('events').select((eb) => eb.fn.max('seq').as('seq')));
const OLDEST_PENDING = statement<{ state: OutboxRow['state'] }, { at: number | null }>((qb, p) =>
  qb.selectFrom('outbox').select((eb) => eb.fn.min('created_at').as('at')).where('state', '=', p.state),
);
const OUTBOX_FOR_EVENT = statement<{ event_id: string }, OutboxRow>((qb, p) =>
  qb.selectFrom('outbox').selectAll().where('event_id', '=', p.event_id).orderBy('channel'),
);

/** The event log, the outbox and the delivery attempts. */
export class EventsRepo {
  constructor(private readonly x: Executor) {}

  /**
   * Append an event (inside a transaction); a second insert of the same id is ignored
   * (resolves false). Inserts commit in `seq` order on every engine (the batch's lock on
   * PostgreSQL, the one writer on SQLite); orderEvents announces them (Executor.orderEvents).
   */
  async addEvent(row: Omit<EventRow, 'seq'>): Promise<boolean> {
    await this.x.orderEvents();
    return (await this.x.run(INSERT_EVENT, row)) > 0;
  }

  /** Queue an event for a channel (idempotent per event and channel). */
  async enqueue(row: OutboxInsert): Promise<void> {
    await this.x.run(INSERT_OUTBOX, { ...row, group_key: row.group_key ?? null, order_key: row.order_key ?? null });
  }

  /**
   * Send again (`hostwatch redeliver`): the chosen rows become pending, due now, with a
   * fresh retry schedule; their attempt history stays. Same event id, so receivers can
   * deduplicate. Resolves with how many rows were requeued.
   */
  redeliver(target: { eventId: string } | { outboxId: number } | { dead: true }, channel: string | null, now: number): Promise<number> {
    const stmt = REDELIVER({ kind: 'eventId' in target ? 'event' : 'outboxId' in target ? 'outbox' : 'dead', channel: channel !== null });
    return this.x.run(stmt, {
      event_id: 'eventId' in target ? target.eventId : '',
      outbox_id: 'outboxId' in target ? target.outboxId : 0,
      channel: channel ?? '',
      now,
    });
  }

  /**
   * Pending deliveries whose time has come, oldest first. (Cluster members claim them
   * instead: ClusterRepo.claimDue.)
   */
  due(now: number, limit: number, perChannel = limit): Promise<DueDelivery[]> {
    return this.x.all(DUE, { now, limit, per_channel: perChannel });
  }

  /**
   * Record the outcome of one attempt and the row's new state (in the caller's
   * transaction), and end its claim. Resolves false, writing nothing, when the row is no
   * longer under the claim token it was sent under (another cluster member took it over).
   */
  async recordAttempt(update: AttemptUpdate, attempt: Omit<AttemptRow, 'id'>): Promise<boolean> {
    if ((await this.x.run(UPDATE_OUTBOX, update)) === 0) return false;
    await this.x.run(INSERT_ATTEMPT, attempt);
    return true;
  }

  /**
   * A pending row not sent (a provider's rate limit held it back) waits until
   * `next_attempt_at`: no attempt is counted or recorded, its claim ends. False, writing
   * nothing, when the row is no longer under that claim.
   */
  async postpone(p: Pick<OutboxRow, 'id' | 'claim_token' | 'next_attempt_at' | 'updated_at'>): Promise<boolean> {
    return (await this.x.run(POSTPONE, p)) > 0;
  }

  /** How many outbox rows are in a state. */
  async count(state: OutboxRow['state']): Promise<number> {
    return (await this.x.get(COUNT, { state }))?.n ?? 0;
  }

  /** When the earliest pending row becomes due (null when none is pending). */
  async nextDue(): Promise<number | null> {
    return (await this.x.get(NEXT_DUE, { state: 'pending' as const }))?.at ?? null;
  }

  /** When the oldest pending row was queued (null when none is pending). */
  async oldestPendingCreatedAt(): Promise<number | null> {
    return (await this.x.get(OLDEST_PENDING, { state: 'pending' as const }))?.at ?? null;
  }

  /** Events after a cursor (seq) that match a filter, oldest first. */
  list(after: number, filter: EventFilter, limit: number): Promise<LoggedEvent[]> {
    return this.x.all(LOG(logFlags(filter, false)), logParams(filter, after, limit));
  }

  /** The cursor of the newest event (0 when the log is empty). */
  async lastSeq(): Promise<number> {
    return (await this.x.get(LAST_SEQ, {}))?.seq ?? 0;
  }

  /** The newest `limit` events that match a filter, newest first. */
  latest(filter: EventFilter, limit: number): Promise<LoggedEvent[]> {
    return this.x.all(LOG(logFlags(filter, true)), logParams(filter, 0, limit));
  }

  /** Whether the log holds an event of this CloudEvents type (a type filter's last resort: resolveTypeFilter). */
  async holdsType(type: string): Promise<boolean> {
    return (await this.latest({ type, siteId: null, since: null }, 1)).length > 0;
  }

  /** How many deliveries have failed (as `deliveries` with `failed`), of one channel or all. */
  async failedCount(channel: string | null): Promise<number> {
    return Number((await this.x.get(FAILED_COUNT({ channel: channel !== null }), { channel: channel ?? '' }))?.n ?? 0);
  }

  /** Recent outbox rows, newest first; `failed` keeps dead rows and rows waiting to retry, `pending` the rows still to send. */
  deliveries(filter: { failed: boolean; pending?: boolean; channel: string | null }, limit: number): Promise<DeliveryView[]> {
    return this.x.all(DELIVERIES({ failed: filter.failed, pending: filter.pending === true, channel: filter.channel !== null }), { channel: filter.channel ?? '', limit });
  }

  /** The outbox rows of one event. */
  outboxFor(eventId: string): Promise<OutboxRow[]> {
    return this.x.all(OUTBOX_FOR_EVENT, { event_id: eventId });
  }
}

function logFlags(f: EventFilter, newest: boolean): LogFlags {
  return { type: f.type !== null, site: f.siteId !== null, since: f.since !== null, newest };
}

// Absent filters are not in the statement's SQL, so their placeholder values are never bound.
function logParams(f: EventFilter, after: number, limit: number): LogParams {
  return { after, type: f.type ?? '', site_id: f.siteId ?? 0, since: f.since ?? 0, limit };
}
