import { sql, type Selectable } from 'kysely';
import { nonKey, pick, statement, type Executor } from './sql.js';
import { COLUMNS, KEYS, type Database } from './schema.js';
import { inOrder, type DueDelivery } from './events-repo.js';

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

type Group = { channel: string; group_key: string };

const GROUP_PENDING = statement<Group, { at: number | null }>((qb, p) =>
  qb
    .selectFrom('outbox')
    .select((eb) => eb.fn.min('next_attempt_at').as('at'))
    .where('channel', '=', p.channel)
    .where('group_key', '=', p.group_key)
    .where('state', '=', 'pending'),
);
const GROUP_SENT = statement<Group, { last_sent_at: number }>((qb, p) =>
  qb.selectFrom('delivery_groups').select('last_sent_at').where('channel', '=', p.channel).where('group_key', '=', p.group_key),
);
const PUT_GROUP = statement<Database['delivery_groups']>((qb, p) =>
  qb
    .insertInto('delivery_groups')
    .values(pick(p, COLUMNS.delivery_groups))
    .onConflict((oc) => oc.columns(KEYS.delivery_groups).doUpdateSet(pick(p, nonKey(COLUMNS.delivery_groups, KEYS.delivery_groups)))),
);
const GROUP_ROWS = statement<Group & { now: number; limit: number }, DueDelivery>((qb, p) =>
  qb
    .selectFrom('outbox')
    .innerJoin('events', 'events.id', 'outbox.event_id')
    .selectAll('outbox')
    .select('events.body')
    .where('outbox.channel', '=', p.channel)
    .where('outbox.group_key', '=', p.group_key)
    .where('outbox.state', '=', 'pending')
    .where('outbox.next_attempt_at', '<=', p.now)
    .where(inOrder(p.now, true))
    .orderBy('outbox.id')
    .limit(p.limit),
);
const STATE = statement<{ channel: string }, ChannelStateRow>((qb, p) => qb.selectFrom('channel_state').selectAll().where('channel', '=', p.channel));
const PUT_STATE = statement<ChannelStateRow>((qb, p) =>
  qb
    .insertInto('channel_state')
    .values(pick(p, COLUMNS.channel_state))
    .onConflict((oc) => oc.columns(KEYS.channel_state).doUpdateSet(pick(p, nonKey(COLUMNS.channel_state, KEYS.channel_state)))),
);
const DISABLED = statement<Record<string, never>, ChannelStateRow>((qb) =>
  qb.selectFrom('channel_state').selectAll().where('disabled_at', 'is not', null).orderBy('channel'),
);
const INHIBITIONS = statement<{ site_id: number }, { source: string }>((qb, p) => qb.selectFrom('inhibitions').select('source').where('site_id', '=', p.site_id));
const START_INHIBITION = statement<Database['inhibitions']>((qb, p) =>
  qb.insertInto('inhibitions').values(pick(p, COLUMNS.inhibitions)).onConflict((oc) => oc.columns(KEYS.inhibitions).doNothing()),
);
const END_INHIBITION = statement<{ source: string; site_id: number }>((qb, p) =>
  qb.deleteFrom('inhibitions').where('source', '=', p.source).where('site_id', '=', p.site_id),
);
const HOLD = statement<{ id: string; held_by: string; held_outcome: string | null }>((qb, p) =>
  qb.updateTable('events').set({ held_by: p.held_by, held_outcome: p.held_outcome }).where('id', '=', p.id),
);
const HELD = statement<{ held_by: string }, HeldRow>((qb, p) =>
  qb
    .selectFrom('events')
    .select(['id', 'rule', 'subject', 'status', 'body', sql<string>`held_by`.as('held_by'), sql<string | null>`held_outcome`.as('held_outcome')])
    .where(sql<string>`held_by`, '=', p.held_by)
    .where(sql<string | null>`held_outcome`, 'is', null)
    .orderBy('seq'),
);
const OUTCOME = statement<{ id: string; held_outcome: string }>((qb, p) => qb.updateTable('events').set({ held_outcome: p.held_outcome }).where('id', '=', p.id));
const RECENT_HELD = statement<{ limit: number }, HeldView>((qb, p) =>
  qb
    .selectFrom('events')
    .select(['time', 'id', 'type', 'subject'])
    .select([sql<string | null>`silenced_by`.as('silenced_by'), sql<string | null>`held_by`.as('held_by'), sql<string | null>`held_outcome`.as('held_outcome')])
    .where((eb) => eb.or([eb(sql<string | null>`silenced_by`, 'is not', null), eb(sql<string | null>`held_by`, 'is not', null)]))
    .orderBy('seq', 'desc')
    .limit(p.limit),
);
const RETRACT = statement<{ event_id: string; channel: string }>((qb, p) =>
  qb.deleteFrom('outbox').where('event_id', '=', p.event_id).where('channel', '=', p.channel).where('state', '=', 'pending').where('attempts', '=', 0),
);
const FLUSH = statement<{ now: number; digest: string }>((qb, p) =>
  qb
    .updateTable('outbox')
    .set({ next_attempt_at: p.now })
    .where('state', '=', 'pending')
    .where('attempts', '=', 0)
    .where('group_key', 'is not', null)
    .where('group_key', '!=', p.digest)
    .where('next_attempt_at', '>', p.now),
);

// A delivered row's attempts, then the row, once its last attempt is older than `before`.
const PRUNE_ATTEMPTS = statement<{ before: number }>((qb, p) =>
  qb.deleteFrom('delivery_attempts').where('outbox_id', 'in', qb.selectFrom('outbox').select('id').where('state', '=', 'delivered').where('updated_at', '<', p.before)),
);
const PRUNE_DELIVERED = statement<{ before: number }>((qb, p) => qb.deleteFrom('outbox').where('state', '=', 'delivered').where('updated_at', '<', p.before));

/**
 * The delivery tables of migration 0004: groups (when each last went out), channel health,
 * inhibitions in force, and the events held back (events.held_by / held_outcome).
 */
export class DeliveryRepo {
  constructor(private readonly x: Executor) {}

  /**
   * Forget deliveries that succeeded before `before` (epoch ms): their outbox rows and
   * attempts (history.retention). Pending and dead rows stay, whatever their age: they are
   * work left, and `redeliver --dead` needs them. The events themselves stay (the event log
   * keeps every event). Returns the outbox rows removed.
   */
  async pruneDelivered(before: number): Promise<number> {
    await this.x.run(PRUNE_ATTEMPTS, { before });
    return this.x.run(PRUNE_DELIVERED, { before });
  }

  /** When a group's pending rows are due and when it last went out. */
  async group(channel: string, groupKey: string): Promise<{ pendingDue: number | null; lastSent: number | null }> {
    const pending = await this.x.get(GROUP_PENDING, { channel, group_key: groupKey });
    const sent = await this.x.get(GROUP_SENT, { channel, group_key: groupKey });
    return { pendingDue: pending?.at ?? null, lastSent: sent?.last_sent_at ?? null };
  }

  /** Record that a group's message went out. */
  async groupSent(channel: string, groupKey: string, at: number): Promise<void> {
    await this.x.run(PUT_GROUP, { channel, group_key: groupKey, last_sent_at: at });
  }

  /** The due pending rows of a group, oldest first, with their event bodies. */
  groupRows(channel: string, groupKey: string, now: number, limit: number): Promise<DueDelivery[]> {
    return this.x.all(GROUP_ROWS, { channel, group_key: groupKey, now, limit });
  }

  /** Make every waiting group (not digests) due now: `poll --once` delivers what it found. */
  flushGroups(now: number, digestKey: string): Promise<number> {
    return this.x.run(FLUSH, { now, digest: digestKey });
  }

  /** A channel's health row (undefined: never failed). */
  channelState(channel: string): Promise<ChannelStateRow | undefined> {
    return this.x.get(STATE, { channel });
  }

  /** Write a channel's health row. */
  async putChannelState(row: ChannelStateRow): Promise<void> {
    await this.x.run(PUT_STATE, row);
  }

  /** Channels disabled now. */
  disabledChannels(): Promise<ChannelStateRow[]> {
    return this.x.all(DISABLED, {});
  }

  /** Inhibition keys (source name) in force for a site. */
  async inhibitionSources(siteId: number): Promise<string[]> {
    return (await this.x.all(INHIBITIONS, { site_id: siteId })).map((r) => r.source);
  }

  /** An inhibiting alert started firing. */
  async startInhibition(row: Database['inhibitions']): Promise<void> {
    await this.x.run(START_INHIBITION, row);
  }

  /**
   * Take back an event's rows for these channels that were never tried (a platform
   * incident holds them for people); resolves with how many were taken back.
   */
  async retract(eventId: string, channels: readonly string[]): Promise<number> {
    let n = 0;
    for (const channel of channels) n += await this.x.run(RETRACT, { event_id: eventId, channel });
    return n;
  }

  /** An inhibiting alert resolved. */
  async endInhibition(source: string, siteId: number): Promise<void> {
    await this.x.run(END_INHIBITION, { source, site_id: siteId });
  }

  /** Mark a stored event as held back (`outcome` null while an inhibition may release it). */
  async hold(eventId: string, by: string, outcome: string | null): Promise<void> {
    await this.x.run(HOLD, { id: eventId, held_by: by, held_outcome: outcome });
  }

  /** Events still held by `by`, in storage order. */
  held(by: string): Promise<HeldRow[]> {
    return this.x.all(HELD, { held_by: by });
  }

  /** The latest events held back (silence, maintenance, inhibition), newest first. */
  recentHeld(limit: number): Promise<HeldView[]> {
    return this.x.all(RECENT_HELD, { limit });
  }

  /** What became of a held event: 'released' or 'dropped'. */
  async setHeldOutcome(eventId: string, outcome: 'released' | 'dropped' | 'suppressed'): Promise<void> {
    await this.x.run(OUTCOME, { id: eventId, held_outcome: outcome });
  }
}
