import { sql } from 'kysely';
import type { Silence } from '../notify/silences.js';
import { pick, statement, type Executor } from './sql.js';
import { COLUMNS } from './schema.js';

const INSERT = statement<Silence>((qb, p) => qb.insertInto('silences').values(pick(p, COLUMNS.silences)));
const GET = statement<{ id: string }, Silence>((qb, p) => qb.selectFrom('silences').selectAll().where('id', '=', p.id));
const EXPIRE = statement<{ id: string; at: number }>((qb, p) =>
  qb.updateTable('silences').set({ expired_at: p.at }).where('id', '=', p.id).where('expired_at', 'is', null).where('ends_at', '>', p.at),
);
const ACTIVE = statement<{ now: number }, Silence>((qb, p) =>
  qb
    .selectFrom('silences')
    .selectAll()
    .where('expired_at', 'is', null)
    .where('ends_at', '>', p.now)
    .where('starts_at', '<=', p.now)
    .orderBy('created_at')
    .orderBy('id'),
);
// Everything not over yet, plus what ended since `since`.
const RECENT = statement<{ now: number; since: number; limit: number }, Silence>((qb, p) =>
  qb
    .selectFrom('silences')
    .selectAll()
    .where((eb) =>
      eb.or([eb.and([eb('expired_at', 'is', null), eb('ends_at', '>', p.now)]), eb(eb.fn.coalesce('expired_at', 'ends_at'), '>=', p.since)]),
    )
    .orderBy('created_at', 'desc')
    .limit(p.limit),
);
const MARK = statement<{ event_id: string; silence_id: string }>((qb, p) => qb.updateTable('events').set({ silenced_by: p.silence_id }).where('id', '=', p.event_id));
const SUPPRESSED = statement<{ silence_id: string }, { n: number }>((qb, p) =>
  qb
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(sql<string>`silenced_by`, '=', p.silence_id),
);
const SILENCED_BY = statement<{ event_id: string }, { silenced_by: string | null }>((qb, p) =>
  qb.selectFrom('events').select(sql<string | null>`silenced_by`.as('silenced_by')).where('id', '=', p.event_id),
);
const RECENTLY_SILENCED = statement<{ limit: number }, { event_id: string; silence_id: string }>((qb, p) =>
  qb
    .selectFrom('events')
    .select(['id as event_id', sql<string>`silenced_by`.as('silence_id')])
    .where(sql<string | null>`silenced_by`, 'is not', null)
    .orderBy('seq', 'desc')
    .limit(p.limit),
);

/** Where a batch transaction keeps the active silences (Executor.memo). */
const ACTIVE_MEMO = 'silences:active';

/**
 * The silences table and the events it held back (`events.silenced_by`). Read on every
 * event commit, so a silence written by another process (the CLI) applies at once.
 */
export class SilencesRepo {
  constructor(private readonly x: Executor) {}

  /** Store a new silence. */
  async add(s: Silence): Promise<void> {
    this.x.memo?.delete(ACTIVE_MEMO);
    await this.x.run(INSERT, s);
  }

  /** One silence by id. */
  get(id: string): Promise<Silence | undefined> {
    return this.x.get(GET, { id });
  }

  /** Expire a silence now; false when it was already over (expired or ended). */
  async expire(id: string, at: number): Promise<boolean> {
    this.x.memo?.delete(ACTIVE_MEMO);
    return (await this.x.run(EXPIRE, { id, at })) > 0;
  }

  /**
   * Silences in force at `now`, oldest first (the order in which they are tried). In a batch
   * transaction they are read once (Executor.memo): a batch is one moment, and each of its
   * events is matched against the same silences. A silence added or expired by a unit of the
   * batch (the API's, which shares batches with polls) makes the next unit read them again.
   */
  async active(now: number): Promise<readonly Silence[]> {
    const known = this.x.memo?.get(ACTIVE_MEMO) as readonly Silence[] | undefined;
    if (known) return known;
    const rows = await this.x.all(ACTIVE, { now });
    this.x.memo?.set(ACTIVE_MEMO, rows);
    return rows;
  }

  /** Active and pending silences, and those that ended at or after `since`; newest first. */
  recent(now: number, since: number, limit = 500): Promise<Silence[]> {
    return this.x.all(RECENT, { now, since, limit });
  }

  /** Record that a stored event was held back by a silence (same transaction as the insert). */
  async markSilenced(eventId: string, silenceId: string): Promise<void> {
    await this.x.run(MARK, { event_id: eventId, silence_id: silenceId });
  }

  /** How many events a silence has held back. */
  async suppressed(silenceId: string): Promise<number> {
    return (await this.x.get(SUPPRESSED, { silence_id: silenceId }))?.n ?? 0;
  }

  /** The latest events held back by a silence, newest first. */
  recentlySilenced(limit: number): Promise<Array<{ event_id: string; silence_id: string }>> {
    return this.x.all(RECENTLY_SILENCED, { limit });
  }

  /** The silence that held an event back; null when it was not silenced (undefined: no such event). */
  async silencedBy(eventId: string): Promise<string | null | undefined> {
    return (await this.x.get(SILENCED_BY, { event_id: eventId }))?.silenced_by;
  }
}
