import { sql } from 'kysely';
import { pick, statement, variants, type Executor } from './sql.js';
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

type Entity = { source: string; entity: string };
const ROW = ['source', 'entity', 'site_id', 'version', 'at', 'body'] as const;

const ADD = statement<ChangeLogRow>((qb, p) => qb.insertInto('change_log').values(pick(p, COLUMNS.change_log)));
const AT = statement<Entity & { at: number }, ChangeLogRow>((qb, p) =>
  qb
    .selectFrom('change_log')
    .select(ROW)
    .where('source', '=', p.source)
    .where('entity', '=', p.entity)
    .where('at', '<=', p.at)
    .orderBy('at', 'desc')
    .orderBy('id', 'desc')
    .limit(1),
);
const OF_ENTITY = statement<Entity, ChangeLogRow>((qb, p) =>
  qb.selectFrom('change_log').select(ROW).where('source', '=', p.source).where('entity', '=', p.entity).orderBy('at').orderBy('id'),
);
const LAST_VERSION = statement<Entity, { v: number | null }>((qb, p) =>
  qb.selectFrom('change_log').select((eb) => eb.fn.max('version').as('v')).where('source', '=', p.source).where('entity', '=', p.entity),
);
const EVENT = statement<{ id: string }, StoredEvent>((qb, p) => qb.selectFrom('events').select(STORED_EVENT).where('id', '=', p.id));
const LAST_EVENT = statement<{ rule: string; subject: string }, StoredEvent>((qb, p) =>
  qb.selectFrom('events').select(STORED_EVENT).where('rule', '=', p.rule).where('subject', '=', p.subject).orderBy('seq', 'desc').limit(1),
);
const PUT_EVIDENCE = statement<EvidenceRow>((qb, p) =>
  qb
    .insertInto('event_evidence')
    .values(pick(p, COLUMNS.event_evidence))
    .onConflict((oc) => oc.column('event_id').doNothing()),
);
const EVIDENCE = statement<{ event_id: string }, EvidenceRow>((qb, p) => qb.selectFrom('event_evidence').selectAll().where('event_id', '=', p.event_id));
// The newest version of each entity is kept whatever its age: it is the state a replay
// starts from, and there is only one per entity, so the table stays bounded.
const PRUNE_LOG = statement<{ before: number }>(
  (_qb, p) => sql`DELETE FROM change_log WHERE at < ${p.before} AND id NOT IN (SELECT max(id) FROM change_log GROUP BY source, entity)`,
);
const PRUNE_EVIDENCE = statement<{ before: number }>((qb, p) => qb.deleteFrom('event_evidence').where('at', '<', p.before));

/** Rows of one page of `since`, in (at, id) order after a cursor. */
type SinceParams = Record<string, string | number>;
const SINCE_PAGE = variants<SinceParams, number, ChangeLogRow & { id: number }>((qb, sources, p) =>
  qb
    .selectFrom('change_log as c')
    .select(['c.id', 'c.source', 'c.entity', 'c.site_id', 'c.version', 'c.at', 'c.body'])
    .where((eb) =>
      eb.or([
        eb('c.at', '>=', p['since'] as number),
        // Per entity, the last version before `since`: the state a replay starts from.
        eb(
          'c.id',
          '=',
          eb
            .selectFrom('change_log as b')
            .select('b.id')
            .whereRef('b.source', '=', 'c.source')
            .whereRef('b.entity', '=', 'c.entity')
            .where('b.at', '<', p['since'] as number)
            .orderBy('b.at', 'desc')
            .orderBy('b.id', 'desc')
            .limit(1),
        ),
      ]),
    )
    .$if(sources > 0, (q) => q.where('c.source', 'in', Array.from({ length: sources }, (_, i) => p[`s${i}`] as string)))
    .where((eb) => eb.or([eb('c.at', '>', p['after_at'] as number), eb.and([eb('c.at', '=', p['after_at'] as number), eb('c.id', '>', p['after_id'] as number)])]))
    .orderBy('c.at')
    .orderBy('c.id')
    .limit(p['limit'] as number),
);

/** Rows read per query by `since` (bounded memory for a long history). */
const SINCE_PAGE_ROWS = 1_000;

/**
 * The history the trust tools need: the change log (every stored snapshot version, per
 * source and entity) and the evidence of each rule-made event. Both are pruned by age.
 */
export class HistoryRepo {
  constructor(private readonly x: Executor) {}

  /** Append one snapshot version (call inside the poll's transaction). */
  async add(row: ChangeLogRow): Promise<void> {
    await this.x.run(ADD, row);
  }

  /** The newest version of an entity stored at or before `at` (a rule's `window` reads this). */
  at(source: string, entity: string, at: number): Promise<ChangeLogRow | undefined> {
    return this.x.get(AT, { source, entity, at });
  }

  /** Every stored version of one entity, oldest first. */
  ofEntity(source: string, entity: string): Promise<ChangeLogRow[]> {
    return this.x.all(OF_ENTITY, { source, entity });
  }

  /**
   * Every version since `since` (plus, per entity, the last one before it, so a replay
   * starts from the state the entity was in), in time order. Read in pages, not whole.
   */
  async *since(since: number, sources: readonly string[] | null = null): AsyncIterableIterator<ChangeLogRow> {
    const stmt = SINCE_PAGE(sources?.length ?? 0);
    const p: SinceParams = { since, after_at: Number.MIN_SAFE_INTEGER, after_id: 0, limit: SINCE_PAGE_ROWS };
    (sources ?? []).forEach((s, i) => (p[`s${i}`] = s));
    for (;;) {
      const rows = await this.x.all(stmt, p);
      for (const { id: _id, ...row } of rows) yield row;
      if (rows.length < SINCE_PAGE_ROWS) return;
      const last = rows.at(-1)!;
      p['after_at'] = last.at;
      p['after_id'] = last.id;
    }
  }

  /** Store what a rule saw for an event (call inside the event's transaction). */
  async putEvidence(row: EvidenceRow): Promise<void> {
    await this.x.run(PUT_EVIDENCE, row);
  }

  /** The evidence stored with an event, if any. */
  evidence(eventId: string): Promise<EvidenceRow | undefined> {
    return this.x.get(EVIDENCE, { event_id: eventId });
  }

  /** A stored event with its silence, by id (`hostwatch explain`). */
  event(id: string): Promise<StoredEvent | undefined> {
    return this.x.get(EVENT, { id });
  }

  /**
   * The highest version the change log holds for an entity (null: never stored). A site that
   * leaves the site list loses its snapshots; when it comes back its versions go on from
   * here, so change-event ids (rule, subject, version) are never reused.
   */
  async lastVersion(source: string, entity: string): Promise<number | null> {
    return (await this.x.get(LAST_VERSION, { source, entity }))?.v ?? null;
  }

  /** The newest stored event of a rule about a subject. */
  lastEventOf(rule: string, subject: string): Promise<StoredEvent | undefined> {
    return this.x.get(LAST_EVENT, { rule, subject });
  }

  /**
   * Delete change-log rows and evidence older than `before` (epoch ms); the newest
   * change-log row of each entity stays. Run it in a transaction (both or neither).
   */
  async prune(before: number): Promise<PruneResult> {
    const changeLog = await this.x.run(PRUNE_LOG, { before });
    const evidence = await this.x.run(PRUNE_EVIDENCE, { before });
    return { changeLog, evidence };
  }
}
