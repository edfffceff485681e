import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Selectable } from 'kysely';
import { nonKey, pick, prepare, qb } from './db.js';
import { COLUMNS, KEYS, type Database } from './schema.js';
import type { DueDelivery } from './events-repo.js';

export type ChannelStateRow = Selectable<Database['channel_state']>;

/** An event held back by maintenance or an inhibition. */
export interface HeldRow {
  id: string;
  rule: string;
  subject: string;
  status: string | null;
  body: string;
  held_by: string;
  held_outcome: string | null;
}

/** An event held back from delivery, as `hostwatch deliveries --held` shows it. */
export interface HeldView {
  time: number;
  id: string;
  type: string;
  subject: string;
  silenced_by: string | null;
  held_by: string | null;
  held_outcome: string | null;
}

/**
 * The delivery tables of migration 0004: groups (when each last went out), channel health,
 * inhibitions in force, and the events held back (events.held_by / held_outcome).
 */
export class DeliveryRepo {
  private readonly groupPendingStmt;
  private readonly groupSentStmt;
  private readonly putGroupStmt;
  private readonly groupRowsStmt;
  private readonly stateStmt;
  private readonly putStateStmt;
  private readonly inhibitionsStmt;
  private readonly startInhibitionStmt;
  private readonly endInhibitionStmt;
  private readonly holdStmt;
  private readonly heldStmt;
  private readonly outcomeStmt;
  private readonly flushStmt;
  private readonly disabledStmt;
  private readonly recentHeldStmt;
  private readonly retractStmt;

  constructor(sqlite: BetterSqlite3.Database) {
    this.groupPendingStmt = prepare<{ channel: string; group_key: string }>(sqlite, (p) =>
      qb
        .selectFrom('outbox')
        .select((eb) => eb.fn.min('next_attempt_at').as('at'))
        .where('channel', '=', p.channel)
        .where('group_key', '=', p.group_key)
        .where('state', '=', 'pending'),
    );
    this.groupSentStmt = prepare<{ channel: string; group_key: string }>(sqlite, (p) =>
      qb.selectFrom('delivery_groups').select('last_sent_at').where('channel', '=', p.channel).where('group_key', '=', p.group_key),
    );
    this.putGroupStmt = prepare<Database['delivery_groups']>(sqlite, (p) =>
      qb
        .insertInto('delivery_groups')
        .values(pick(p, COLUMNS.delivery_groups))
        .onConflict((oc) => oc.columns(KEYS.delivery_groups).doUpdateSet(pick(p, nonKey(COLUMNS.delivery_groups, KEYS.delivery_groups)))),
    );
    this.groupRowsStmt = prepare<{ channel: string; group_key: string; now: number; limit: number }>(sqlite, (p) =>
      qb
        .selectFrom('outbox')
        .innerJoin('events', 'events.id', 'outbox.event_id')
        .selectAll('outbox')
        .select('events.body')
        .where('outbox.channel', '=', p.channel)
        .where('outbox.group_key', '=', p.group_key)
        .where('outbox.state', '=', 'pending')
        .where('outbox.next_attempt_at', '<=', p.now)
        .orderBy('outbox.id')
        .limit(p.limit),
    );
    this.stateStmt = prepare<{ channel: string }>(sqlite, (p) => qb.selectFrom('channel_state').selectAll().where('channel', '=', p.channel));
    this.putStateStmt = prepare<ChannelStateRow>(sqlite, (p) =>
      qb
        .insertInto('channel_state')
        .values(pick(p, COLUMNS.channel_state))
        .onConflict((oc) => oc.columns(KEYS.channel_state).doUpdateSet(pick(p, nonKey(COLUMNS.channel_state, KEYS.channel_state)))),
    );
    this.disabledStmt = prepare<Record<string, never>>(sqlite, () =>
      qb.selectFrom('channel_state').selectAll().where('disabled_at', 'is not', null).orderBy('channel'),
    );
    this.inhibitionsStmt = prepare<{ site_id: number }>(sqlite, (p) => qb.selectFrom('inhibitions').select('source').where('site_id', '=', p.site_id));
    this.startInhibitionStmt = prepare<Database['inhibitions']>(sqlite, (p) =>
      qb.insertInto('inhibitions').values(pick(p, COLUMNS.inhibitions)).onConflict((oc) => oc.columns(KEYS.inhibitions).doNothing()),
    );
    this.endInhibitionStmt = prepare<{ source: string; site_id: number }>(sqlite, (p) =>
      qb.deleteFrom('inhibitions').where('source', '=', p.source).where('site_id', '=', p.site_id),
    );
    this.holdStmt = prepare<{ id: string; held_by: string; held_outcome: string | null }>(sqlite, (p) =>
      qb.updateTable('events').set({ held_by: p.held_by, held_outcome: p.held_outcome }).where('id', '=', p.id),
    );
    this.heldStmt = prepare<{ held_by: string }>(sqlite, (p) =>
      qb
        .selectFrom('events')
        .select(['id', 'rule', 'subject', 'status', 'body', sql<string>`held_by`.as('held_by'), sql<string | null>`held_outcome`.as('held_outcome')])
        .where(sql<string>`held_by`, '=', p.held_by)
        .where(sql<string | null>`held_outcome`, 'is', null)
        .orderBy('seq'),
    );
    this.outcomeStmt = prepare<{ id: string; held_outcome: string }>(sqlite, (p) =>
      qb.updateTable('events').set({ held_outcome: p.held_outcome }).where('id', '=', p.id),
    );
    this.recentHeldStmt = prepare<{ limit: number }>(sqlite, (p) =>
      qb
        .selectFrom('events')
        .select(['time', 'id', 'type', 'subject'])
        .select([sql<string | null>`silenced_by`.as('silenced_by'), sql<string | null>`held_by`.as('held_by'), sql<string | null>`held_outcome`.as('held_outcome')])
        .where((eb) => eb.or([eb(sql<string | null>`silenced_by`, 'is not', null), eb(sql<string | null>`held_by`, 'is not', null)]))
        .orderBy('seq', 'desc')
        .limit(p.limit),
    );
    this.flushStmt = prepare<{ now: number; digest: string }>(sqlite, (p) =>
      qb
        .updateTable('outbox')
        .set({ next_attempt_at: p.now })
        .where('state', '=', 'pending')
        .where('attempts', '=', 0)
        .where('group_key', 'is not', null)
        .where('group_key', '!=', p.digest)
        .where('next_attempt_at', '>', p.now),
    );
    this.retractStmt = prepare<{ event_id: string; channel: string }>(sqlite, (p) =>
      qb
        .deleteFrom('outbox')
        .where('event_id', '=', p.event_id)
        .where('channel', '=', p.channel)
        .where('state', '=', 'pending')
        .where('attempts', '=', 0),
    );
  }

  /** When a group's pending rows are due and when it last went out. */
  group(channel: string, groupKey: string): { pendingDue: number | null; lastSent: number | null } {
    const pending = (this.groupPendingStmt.get({ channel, group_key: groupKey }) as { at: number | null }).at;
    const sent = this.groupSentStmt.get({ channel, group_key: groupKey }) as { last_sent_at: number } | undefined;
    return { pendingDue: pending, lastSent: sent?.last_sent_at ?? null };
  }

  /** Record that a group's message went out. */
  groupSent(channel: string, groupKey: string, at: number): void {
    this.putGroupStmt.run({ channel, group_key: groupKey, last_sent_at: at });
  }

  /** The due pending rows of a group, oldest first, with their event bodies. */
  groupRows(channel: string, groupKey: string, now: number, limit: number): DueDelivery[] {
    return this.groupRowsStmt.all({ channel, group_key: groupKey, now, limit }) as DueDelivery[];
  }

  /** Make every waiting group (not digests) due now: `poll --once` delivers what it found. */
  flushGroups(now: number, digestKey: string): number {
    return this.flushStmt.run({ now, digest: digestKey }).changes;
  }

  /** A channel's health row (undefined: never failed). */
  channelState(channel: string): ChannelStateRow | undefined {
    return this.stateStmt.get({ channel }) as ChannelStateRow | undefined;
  }

  /** Write a channel's health row. */
  putChannelState(row: ChannelStateRow): void {
    this.putStateStmt.run(row);
  }

  /** Channels disabled now. */
  disabledChannels(): ChannelStateRow[] {
    return this.disabledStmt.all({}) as ChannelStateRow[];
  }

  /** Inhibition keys (source name) in force for a site. */
  inhibitionSources(siteId: number): string[] {
    return (this.inhibitionsStmt.all({ site_id: siteId }) as Array<{ source: string }>).map((r) => r.source);
  }

  /** An inhibiting alert started firing. */
  startInhibition(row: Database['inhibitions']): void {
    this.startInhibitionStmt.run(row);
  }

  /**
   * Take back an event's rows for these channels that were never tried (a platform
   * incident holds them for people); returns how many were taken back.
   */
  retract(eventId: string, channels: readonly string[]): number {
    let n = 0;
    for (const channel of channels) n += this.retractStmt.run({ event_id: eventId, channel }).changes;
    return n;
  }

  /** An inhibiting alert resolved. */
  endInhibition(source: string, siteId: number): void {
    this.endInhibitionStmt.run({ source, site_id: siteId });
  }

  /** Mark a stored event as held back (`outcome` null while an inhibition may release it). */
  hold(eventId: string, by: string, outcome: string | null): void {
    this.holdStmt.run({ id: eventId, held_by: by, held_outcome: outcome });
  }

  /** Events still held by `by`, in storage order. */
  held(by: string): HeldRow[] {
    return this.heldStmt.all({ held_by: by }) as HeldRow[];
  }

  /** The latest events held back (silence, maintenance, inhibition), newest first. */
  recentHeld(limit: number): HeldView[] {
    return this.recentHeldStmt.all({ limit }) as HeldView[];
  }

  /** What became of a held event: 'released' or 'dropped'. */
  setHeldOutcome(eventId: string, outcome: 'released' | 'dropped' | 'suppressed'): void {
    this.outcomeStmt.run({ id: eventId, held_outcome: outcome });
  }
}
