import { nonKey, pick, statement, type Executor } from './sql.js';
import { COLUMNS, KEYS, type Database } from './schema.js';

export type SnapshotRow = Database['snapshots'];
export type PollStateRow = Database['poll_state'];

type Key = { source: string; entity: string };

const HEAD = statement<Key, { hash: string; version: number }>((qb, p) =>
  qb.selectFrom('snapshots').select(['hash', 'version']).where('source', '=', p.source).where('entity', '=', p.entity),
);
const GET = statement<Key, SnapshotRow>((qb, p) => qb.selectFrom('snapshots').selectAll().where('source', '=', p.source).where('entity', '=', p.entity));
const PUT = statement<SnapshotRow>((qb, p) =>
  qb
    .insertInto('snapshots')
    .values(pick(p, COLUMNS.snapshots))
    .onConflict((oc) => oc.columns(KEYS.snapshots).doUpdateSet(pick(p, nonKey(COLUMNS.snapshots, KEYS.snapshots)))),
);
const STATE = statement<Key, PollStateRow>((qb, p) => qb.selectFrom('poll_state').selectAll().where('source', '=', p.source).where('entity', '=', p.entity));
const PUT_STATE = statement<PollStateRow>((qb, p) =>
  qb
    .insertInto('poll_state')
    .values(pick(p, COLUMNS.poll_state))
    .onConflict((oc) => oc.columns(KEYS.poll_state).doUpdateSet(pick(p, nonKey(COLUMNS.poll_state, KEYS.poll_state)))),
);
const FAILING_OF_SOURCE = statement<{ source: string; min: number }, PollStateRow>((qb, p) =>
  qb.selectFrom('poll_state').selectAll().where('source', '=', p.source).where('entity', '!=', '').where('consecutive_failures', '>=', p.min).orderBy('entity'),
);
// One row of each table a poll's plan reads about an entity, if there is any.
const ANY_SNAPSHOT = statement<Record<string, never>, { source: string }>((qb) => qb.selectFrom('snapshots').select('source').limit(1));
const ANY_HISTORY = statement<Record<string, never>, { source: string }>((qb) => qb.selectFrom('change_log').select('source').limit(1));
const ANY_ALERT = statement<Record<string, never>, { rule: string }>((qb) => qb.selectFrom('alerts').select('rule').limit(1));
const FORGET_SNAPSHOTS = statement<{ site_id: number }>((qb, p) => qb.deleteFrom('snapshots').where('site_id', '=', p.site_id));
const FORGET_STATES = statement<{ site_id: number }>((qb, p) => qb.deleteFrom('poll_state').where('site_id', '=', p.site_id));
const ALL_FAILING = statement<{ min: number }, PollStateRow>((qb, p) =>
  qb.selectFrom('poll_state').selectAll().where('entity', '!=', '').where('consecutive_failures', '>=', p.min),
);
const SOURCE_STATES = statement<{ entity: string }, PollStateRow>((qb, p) => qb.selectFrom('poll_state').selectAll().where('entity', '=', p.entity));
const ENTITIES_OF = statement<{ source: string }, { entity: string; site_id: number | null }>((qb, p) =>
  qb.selectFrom('snapshots').select(['entity', 'site_id']).where('source', '=', p.source).orderBy('entity'),
);
const FAILING_COUNTS = statement<{ min: number }, { source: string; failing: number }>((qb, p) =>
  qb
    .selectFrom('poll_state')
    .select(['source', (eb) => eb.fn.countAll<number>().as('failing')])
    .where('entity', '!=', '')
    .where('consecutive_failures', '>=', p.min)
    .groupBy('source'),
);

/** Snapshots and poll state: the "what did we last see, and did the last poll work" tables. */
export class SnapshotsRepo {
  constructor(private readonly x: Executor) {}

  /**
   * Drop what is stored about a site that left the site list: its failures must not keep
   * an operator alert firing, and if it comes back its first poll is a baseline again.
   */
  async forgetSite(siteId: number): Promise<void> {
    await this.x.run(FORGET_SNAPSHOTS, { site_id: siteId });
    await this.x.run(FORGET_STATES, { site_id: siteId });
  }

  /** Every entity whose last poll failed. */
  allFailing(): Promise<PollStateRow[]> {
    return this.x.all(ALL_FAILING, { min: 1 });
  }

  /** The source-level poll state of every source that has run (entity ''). */
  sourceStates(): Promise<PollStateRow[]> {
    return this.x.all(SOURCE_STATES, { entity: '' });
  }

  /** How many entities of each source failed their last poll (sources with none are left out). */
  failingCounts(): Promise<Array<{ source: string; failing: number }>> {
    return this.x.all(FAILING_COUNTS, { min: 1 });
  }

  /** The entities of a source that have a snapshot (names only: bodies are read one at a time). */
  entitiesOf(source: string): Promise<Array<{ entity: string; site_id: number | null }>> {
    return this.x.all(ENTITIES_OF, { source });
  }

  /** Nothing is stored about any entity: no snapshot, no change-log row, no alert state (a new database). */
  async nothingStored(): Promise<boolean> {
    for (const s of [ANY_SNAPSHOT, ANY_HISTORY, ANY_ALERT] as const) if ((await this.x.get(s as typeof ANY_SNAPSHOT, {})) !== undefined) return false;
    return true;
  }

  /** The hash and version of the stored snapshot, without reading its body. */
  head(source: string, entity: string): Promise<{ hash: string; version: number } | undefined> {
    return this.x.get(HEAD, { source, entity });
  }

  /** The stored snapshot, body included. */
  get(source: string, entity: string): Promise<SnapshotRow | undefined> {
    return this.x.get(GET, { source, entity });
  }

  /** Insert or replace the snapshot of an entity. */
  async put(row: SnapshotRow): Promise<void> {
    await this.x.run(PUT, row);
  }

  /** Poll state of an entity ('' = the source as a whole). */
  state(source: string, entity: string): Promise<PollStateRow | undefined> {
    return this.x.get(STATE, { source, entity });
  }

  /** Write poll state. */
  async putState(row: PollStateRow): Promise<void> {
    await this.x.run(PUT_STATE, row);
  }

  /** Entities of a source that failed at least `min` polls in a row. */
  failing(source: string, min: number): Promise<PollStateRow[]> {
    return this.x.all(FAILING_OF_SOURCE, { source, min });
  }
}
