import type BetterSqlite3 from 'better-sqlite3';
import { nonKey, pick, prepare, qb } from './db.js';
import { COLUMNS, KEYS, type Database } from './schema.js';

export type SnapshotRow = Database['snapshots'];
export type PollStateRow = Database['poll_state'];

/** Snapshots and poll state: the "what did we last see, and did the last poll work" tables. */
export class SnapshotsRepo {
  private readonly headStmt;
  private readonly getStmt;
  private readonly upsertStmt;
  private readonly stateGet;
  private readonly stateUpsert;
  private readonly stateBySource;
  private readonly allFailingStmt;
  private readonly sourceStatesStmt;
  private readonly failingCountsStmt;
  private readonly forgetSnapshots;
  private readonly forgetStates;
  private readonly entitiesStmt;

  constructor(sqlite: BetterSqlite3.Database) {
    this.headStmt = prepare<{ source: string; entity: string }>(sqlite, (p) =>
      qb.selectFrom('snapshots').select(['hash', 'version']).where('source', '=', p.source).where('entity', '=', p.entity),
    );
    this.getStmt = prepare<{ source: string; entity: string }>(sqlite, (p) =>
      qb.selectFrom('snapshots').selectAll().where('source', '=', p.source).where('entity', '=', p.entity),
    );
    this.upsertStmt = prepare<SnapshotRow>(sqlite, (p) =>
      qb
        .insertInto('snapshots')
        .values(pick(p, COLUMNS.snapshots))
        .onConflict((oc) => oc.columns(KEYS.snapshots).doUpdateSet(pick(p, nonKey(COLUMNS.snapshots, KEYS.snapshots)))),
    );
    this.stateGet = prepare<{ source: string; entity: string }>(sqlite, (p) =>
      qb.selectFrom('poll_state').selectAll().where('source', '=', p.source).where('entity', '=', p.entity),
    );
    this.stateUpsert = prepare<PollStateRow>(sqlite, (p) =>
      qb
        .insertInto('poll_state')
        .values(pick(p, COLUMNS.poll_state))
        .onConflict((oc) => oc.columns(KEYS.poll_state).doUpdateSet(pick(p, nonKey(COLUMNS.poll_state, KEYS.poll_state)))),
    );
    this.stateBySource = prepare<{ source: string; min: number }>(sqlite, (p) =>
      qb
        .selectFrom('poll_state')
        .selectAll()
        .where('source', '=', p.source)
        .where('entity', '!=', '')
        .where('consecutive_failures', '>=', p.min)
        .orderBy('entity'),
    );
    this.forgetSnapshots = prepare<{ site_id: number }>(sqlite, (p) => qb.deleteFrom('snapshots').where('site_id', '=', p.site_id));
    this.forgetStates = prepare<{ site_id: number }>(sqlite, (p) => qb.deleteFrom('poll_state').where('site_id', '=', p.site_id));
    this.allFailingStmt = prepare<{ min: number }>(sqlite, (p) =>
      qb.selectFrom('poll_state').selectAll().where('entity', '!=', '').where('consecutive_failures', '>=', p.min),
    );
    this.entitiesStmt = prepare<{ source: string }>(sqlite, (p) =>
      qb.selectFrom('snapshots').select(['entity', 'site_id']).where('source', '=', p.source).orderBy('entity'),
    );
    this.sourceStatesStmt = prepare<{ entity: string }>(sqlite, (p) => qb.selectFrom('poll_state').selectAll().where('entity', '=', p.entity));
    this.failingCountsStmt = prepare<{ min: number }>(sqlite, (p) =>
      qb
        .selectFrom('poll_state')
        .select(['source', (eb) => eb.fn.countAll<number>().as('failing')])
        .where('entity', '!=', '')
        .where('consecutive_failures', '>=', p.min)
        .groupBy('source'),
    );
  }

  /**
   * Drop what is stored about a site that left the site list: its failures must not keep
   * an operator alert firing, and if it comes back its first poll is a baseline again.
   */
  forgetSite(siteId: number): void {
    this.forgetSnapshots.run({ site_id: siteId });
    this.forgetStates.run({ site_id: siteId });
  }

  /** Every entity whose last poll failed. */
  allFailing(): PollStateRow[] {
    return this.allFailingStmt.all({ min: 1 }) as PollStateRow[];
  }

  /** The source-level poll state of every source that has run (entity ''). */
  sourceStates(): PollStateRow[] {
    return this.sourceStatesStmt.all({ entity: '' }) as PollStateRow[];
  }

  /** How many entities of each source failed their last poll (sources with none are left out). */
  failingCounts(): Array<{ source: string; failing: number }> {
    return this.failingCountsStmt.all({ min: 1 }) as Array<{ source: string; failing: number }>;
  }

  /** The entities of a source that have a snapshot (names only: bodies are read one at a time). */
  entitiesOf(source: string): Array<{ entity: string; site_id: number | null }> {
    return this.entitiesStmt.all({ source }) as Array<{ entity: string; site_id: number | null }>;
  }

  /** The hash and version of the stored snapshot, without reading its body. */
  head(source: string, entity: string): { hash: string; version: number } | undefined {
    return this.headStmt.get({ source, entity }) as { hash: string; version: number } | undefined;
  }

  /** The stored snapshot, body included. */
  get(source: string, entity: string): SnapshotRow | undefined {
    return this.getStmt.get({ source, entity }) as SnapshotRow | undefined;
  }

  /** Insert or replace the snapshot of an entity. */
  put(row: SnapshotRow): void {
    this.upsertStmt.run(row);
  }

  /** Poll state of an entity ('' = the source as a whole). */
  state(source: string, entity: string): PollStateRow | undefined {
    return this.stateGet.get({ source, entity }) as PollStateRow | undefined;
  }

  /** Write poll state. */
  putState(row: PollStateRow): void {
    this.stateUpsert.run(row);
  }

  /** Entities of a source that failed at least `min` polls in a row. */
  failing(source: string, min: number): PollStateRow[] {
    return this.stateBySource.all({ source, min }) as PollStateRow[];
  }
}
