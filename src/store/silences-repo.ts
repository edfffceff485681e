import type BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import type { Silence } from '../notify/silences.js';
import { pick, prepare, qb } from './db.js';
import { COLUMNS } from './schema.js';

/**
 * The silences table and the events it held back (`events.silenced_by`). Read on every
 * event commit, so a silence written by another process (the CLI) applies at once.
 */
export class SilencesRepo {
  private readonly insertStmt;
  private readonly getStmt;
  private readonly expireStmt;
  private readonly activeStmt;
  private readonly recentStmt;
  private readonly markStmt;
  private readonly suppressedStmt;
  private readonly silencedByStmt;
  private readonly recentlySilencedStmt;

  constructor(sqlite: BetterSqlite3.Database) {
    this.insertStmt = prepare<Silence>(sqlite, (p) => qb.insertInto('silences').values(pick(p, COLUMNS.silences)));
    this.getStmt = prepare<{ id: string }>(sqlite, (p) => qb.selectFrom('silences').selectAll().where('id', '=', p.id));
    this.expireStmt = prepare<{ id: string; at: number }>(sqlite, (p) =>
      qb.updateTable('silences').set({ expired_at: p.at }).where('id', '=', p.id).where('expired_at', 'is', null).where('ends_at', '>', p.at),
    );
    this.activeStmt = prepare<{ now: number }>(sqlite, (p) =>
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
    this.recentStmt = prepare<{ now: number; since: number; limit: number }>(sqlite, (p) =>
      qb
        .selectFrom('silences')
        .selectAll()
        .where((eb) =>
          eb.or([
            eb.and([eb('expired_at', 'is', null), eb('ends_at', '>', p.now)]),
            eb(eb.fn.coalesce('expired_at', 'ends_at'), '>=', p.since),
          ]),
        )
        .orderBy('created_at', 'desc')
        .limit(p.limit),
    );
    this.markStmt = prepare<{ event_id: string; silence_id: string }>(sqlite, (p) =>
      qb.updateTable('events').set({ silenced_by: p.silence_id }).where('id', '=', p.event_id),
    );
    this.suppressedStmt = prepare<{ silence_id: string }>(sqlite, (p) =>
      qb
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where(sql<string>`silenced_by`, '=', p.silence_id),
    );
    this.silencedByStmt = prepare<{ event_id: string }>(sqlite, (p) =>
      qb
        .selectFrom('events')
        .select(sql<string | null>`silenced_by`.as('silenced_by'))
        .where('id', '=', p.event_id),
    );
    this.recentlySilencedStmt = prepare<{ limit: number }>(sqlite, (p) =>
      qb
        .selectFrom('events')
        .select(['id as event_id', sql<string>`silenced_by`.as('silence_id')])
        .where(sql<string | null>`silenced_by`, 'is not', null)
        .orderBy('seq', 'desc')
        .limit(p.limit),
    );
  }

  /** Store a new silence. */
  add(s: Silence): void {
    this.insertStmt.run(s);
  }

  /** One silence by id. */
  get(id: string): Silence | undefined {
    return this.getStmt.get({ id }) as Silence | undefined;
  }

  /** Expire a silence now; false when it was already over (expired or ended). */
  expire(id: string, at: number): boolean {
    return this.expireStmt.run({ id, at }).changes > 0;
  }

  /** Silences in force at `now`, oldest first (the order in which they are tried). */
  active(now: number): Silence[] {
    return this.activeStmt.all({ now }) as Silence[];
  }

  /** Active and pending silences, and those that ended at or after `since`; newest first. */
  recent(now: number, since: number, limit = 500): Silence[] {
    return this.recentStmt.all({ now, since, limit }) as Silence[];
  }

  /** Record that a stored event was held back by a silence (same transaction as the insert). */
  markSilenced(eventId: string, silenceId: string): void {
    this.markStmt.run({ event_id: eventId, silence_id: silenceId });
  }

  /** How many events a silence has held back. */
  suppressed(silenceId: string): number {
    return (this.suppressedStmt.get({ silence_id: silenceId }) as { n: number }).n;
  }

  /** The latest events held back by a silence, newest first. */
  recentlySilenced(limit: number): Array<{ event_id: string; silence_id: string }> {
    return this.recentlySilencedStmt.all({ limit }) as Array<{ event_id: string; silence_id: string }>;
  }

  /** The silence that held an event back; null when it was not silenced (undefined: no such event). */
  silencedBy(eventId: string): string | null | undefined {
    return (this.silencedByStmt.get({ event_id: eventId }) as { silenced_by: string | null } | undefined)?.silenced_by;
  }
}
