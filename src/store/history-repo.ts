import type BetterSqlite3 from 'better-sqlite3';
import { pick, prepare, qb } from './db.js';
import { COLUMNS, type Database } from './schema.js';

export type ChangeLogRow = Omit<Database['change_log'], 'id'>;
export type EvidenceRow = Database['event_evidence'];

/** An event as `explain` reads it. */
export interface StoredEvent {
  id: string;
  body: string;
  time: number;
  silenced_by: string | null;
  /** Held back by a maintenance window or an inhibition (docs/routing.md), and what became of it. */
  held_by: string | null;
  held_outcome: string | null;
}

/** The columns of a `StoredEvent`. */
const STORED_EVENT = ['id', 'body', 'time', 'silenced_by', 'held_by', 'held_outcome'] as const;

/** How many rows one prune removed, per table. */
export interface PruneResult {
  changeLog: number;
  evidence: number;
}

/**
 * The history the trust tools need: the change log (every stored snapshot version, per
 * source and entity) and the evidence of each rule-made event. Both are pruned by age.
 */
export class HistoryRepo {
  private readonly addStmt;
  private readonly pastStmt;
  private readonly evidencePut;
  private readonly evidenceGet;
  private readonly pruneLog;
  private readonly pruneEvidence;
  private readonly entityStmt;
  private readonly lastVersionStmt;
  private readonly eventStmt;
  private readonly lastEventStmt;

  constructor(private readonly sqlite: BetterSqlite3.Database) {
    this.addStmt = prepare<ChangeLogRow>(sqlite, (p) => qb.insertInto('change_log').values(pick(p, COLUMNS.change_log)));
    this.pastStmt = prepare<{ source: string; entity: string; at: number }>(sqlite, (p) =>
      qb
        .selectFrom('change_log')
        .select(['source', 'entity', 'site_id', 'version', 'at', 'body'])
        .where('source', '=', p.source)
        .where('entity', '=', p.entity)
        .where('at', '<=', p.at)
        .orderBy('at', 'desc')
        .orderBy('id', 'desc')
        .limit(1),
    );
    this.entityStmt = prepare<{ source: string; entity: string }>(sqlite, (p) =>
      qb
        .selectFrom('change_log')
        .select(['source', 'entity', 'site_id', 'version', 'at', 'body'])
        .where('source', '=', p.source)
        .where('entity', '=', p.entity)
        .orderBy('at')
        .orderBy('id'),
    );
    this.lastVersionStmt = prepare<{ source: string; entity: string }>(sqlite, (p) =>
      qb
        .selectFrom('change_log')
        .select((eb) => eb.fn.max('version').as('v'))
        .where('source', '=', p.source)
        .where('entity', '=', p.entity),
    );
    this.eventStmt = prepare<{ id: string }>(sqlite, (p) => qb.selectFrom('events').select(STORED_EVENT).where('id', '=', p.id));
    this.lastEventStmt = prepare<{ rule: string; subject: string }>(sqlite, (p) =>
      qb.selectFrom('events').select(STORED_EVENT).where('rule', '=', p.rule).where('subject', '=', p.subject).orderBy('seq', 'desc').limit(1),
    );
    this.evidencePut = prepare<EvidenceRow>(sqlite, (p) =>
      qb
        .insertInto('event_evidence')
        .values(pick(p, COLUMNS.event_evidence))
        .onConflict((oc) => oc.column('event_id').doNothing()),
    );
    this.evidenceGet = prepare<{ event_id: string }>(sqlite, (p) =>
      qb.selectFrom('event_evidence').selectAll().where('event_id', '=', p.event_id),
    );
    // The newest version of each entity is kept whatever its age: it is the state a replay
    // starts from, and there is only one per entity, so the table stays bounded.
    const pruneLog = sqlite.prepare(
      `DELETE FROM change_log WHERE at < ? AND id NOT IN (SELECT max(id) FROM change_log GROUP BY source, entity)`,
    );
    this.pruneLog = { run: (p: { before: number }) => pruneLog.run(p.before) };
    this.pruneEvidence = prepare<{ before: number }>(sqlite, (p) => qb.deleteFrom('event_evidence').where('at', '<', p.before));
  }

  /** Append one snapshot version (call inside the poll's transaction). */
  add(row: ChangeLogRow): void {
    this.addStmt.run(row);
  }

  /** The newest version of an entity stored at or before `at` (a rule's `window` reads this). */
  at(source: string, entity: string, at: number): ChangeLogRow | undefined {
    return this.pastStmt.get({ source, entity, at }) as ChangeLogRow | undefined;
  }

  /** Every stored version of one entity, oldest first. */
  ofEntity(source: string, entity: string): ChangeLogRow[] {
    return this.entityStmt.all({ source, entity }) as ChangeLogRow[];
  }

  /**
   * Every version since `since` (plus, per entity, the last one before it, so a replay
   * starts from the state the entity was in), in time order. Iterated, not loaded whole.
   */
  *since(since: number, sources: readonly string[] | null = null): IterableIterator<ChangeLogRow> {
    const filter = sources ? `AND source IN (${sources.map(() => '?').join(', ')})` : '';
    const stmt = this.sqlite.prepare(
      `SELECT c.source, c.entity, c.site_id, c.version, c.at, c.body FROM change_log c
       WHERE (c.at >= ? OR c.id = (SELECT p.id FROM change_log p WHERE p.source = c.source AND p.entity = c.entity
                                     AND p.at < ? ORDER BY p.at DESC, p.id DESC LIMIT 1)) ${filter}
       ORDER BY c.at, c.id`,
    );
    yield* stmt.iterate(since, since, ...(sources ?? [])) as IterableIterator<ChangeLogRow>;
  }

  /** Store what a rule saw for an event (call inside the event's transaction). */
  putEvidence(row: EvidenceRow): void {
    this.evidencePut.run(row);
  }

  /** The evidence stored with an event, if any. */
  evidence(eventId: string): EvidenceRow | undefined {
    return this.evidenceGet.get({ event_id: eventId }) as EvidenceRow | undefined;
  }

  /** A stored event with its silence, by id (`hostwatch explain`). */
  event(id: string): StoredEvent | undefined {
    return this.eventStmt.get({ id }) as StoredEvent | undefined;
  }

  /**
   * The highest version the change log holds for an entity (null: never stored). A site that
   * leaves the site list loses its snapshots; when it comes back its versions go on from
   * here, so change-event ids (rule, subject, version) are never reused.
   */
  lastVersion(source: string, entity: string): number | null {
    return (this.lastVersionStmt.get({ source, entity }) as { v: number | null }).v;
  }

  /** The newest stored event of a rule about a subject. */
  lastEventOf(rule: string, subject: string): StoredEvent | undefined {
    return this.lastEventStmt.get({ rule, subject }) as StoredEvent | undefined;
  }

  /**
   * Delete change-log rows and evidence older than `before` (epoch ms), in one transaction;
   * the newest change-log row of each entity stays.
   */
  prune(before: number): PruneResult {
    return this.sqlite.transaction(() => ({
      changeLog: this.pruneLog.run({ before }).changes,
      evidence: this.pruneEvidence.run({ before }).changes,
    }))();
  }
}
