import { nonKey, pick, statement, variants, type Executor } from './sql.js';
import { COLUMNS, KEYS, type Database } from './schema.js';

export type AlertRow = Database['alerts'];

/** A firing alert with the CloudEvent of its last firing (null if that event is gone). */
export interface FiringAlert {
  rule: string;
  subject: string;
  site_id: number | null;
  since: number;
  seq: number;
  body: string | null;
}

/** An alert firing or waiting to fire (`for`), with the stored event of its last firing (null if none or gone). */
export type OpenAlert = AlertRow & { body: string | null };

const GET = statement<{ rule: string; subject: string }, AlertRow>((qb, p) =>
  qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).where('subject', '=', p.subject),
);
const PUT = statement<AlertRow>((qb, p) =>
  qb
    .insertInto('alerts')
    .values(pick(p, COLUMNS.alerts))
    .onConflict((oc) => oc.columns(KEYS.alerts).doUpdateSet(pick(p, nonKey(COLUMNS.alerts, KEYS.alerts)))),
);
const FIRING_FOR_SITE = statement<{ site_id: number; status: AlertRow['status'] }, AlertRow>((qb, p) =>
  qb.selectFrom('alerts').selectAll().where('site_id', '=', p.site_id).where('status', '=', p.status),
);
const FIRING = statement<{ status: AlertRow['status'] }, AlertRow>((qb, p) => qb.selectFrom('alerts').selectAll().where('status', '=', p.status).orderBy('since'));
const FIRING_WITH_EVENTS = statement<{ status: AlertRow['status'] }, FiringAlert>((qb, p) =>
  qb
    .selectFrom('alerts')
    .leftJoin('events', 'events.id', 'alerts.last_event_id')
    .select(['alerts.rule', 'alerts.subject', 'alerts.site_id', 'alerts.since', 'alerts.seq', 'events.body'])
    .where('alerts.status', '=', p.status)
    .orderBy('alerts.since')
    .orderBy('alerts.rule')
    .orderBy('alerts.subject'),
);
const OPEN_WITH_EVENTS = statement<{ status: AlertRow['status'] }, OpenAlert>((qb, p) =>
  qb
    .selectFrom('alerts')
    .leftJoin('events', 'events.id', 'alerts.last_event_id')
    .selectAll('alerts')
    .select('events.body')
    .where((eb) => eb.or([eb('alerts.status', '=', p.status), eb('alerts.pending_since', 'is not', null)]))
    .orderBy('alerts.rule')
    .orderBy('alerts.subject'),
);
const OF_RULE = statement<{ rule: string }, AlertRow>((qb, p) => qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).orderBy('subject'));
const FIRING_OF_RULE = statement<{ rule: string; status: AlertRow['status'] }, AlertRow>((qb, p) =>
  qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).where('status', '=', p.status),
);
/**
 * The alert rows of some rules about one entity: the entity itself and its records
 * (`entity/…`, a range in byte order: '0' follows '/'). One statement per number of rules,
 * each rule an index range on the primary key (rule, subject): [entity, entity + '0'), with
 * the subjects in it that are neither the entity nor its records (`entity.x`) filtered out.
 * (Written as `subject = entity OR subject in [lo, hi)`, SQLite searched the key by rule
 * alone and read every row of each rule: every site that ever fired it, for each poll.)
 */
const OF_ENTITY = variants<Record<string, string>, number, AlertRow>((qb, n, p) =>
  qb
    .selectFrom('alerts')
    .selectAll()
    .where(
      'rule',
      'in',
      Array.from({ length: n }, (_, i) => p[`r${i}`]!),
    )
    .where('subject', '>=', p['entity']!)
    .where('subject', '<', p['hi']!)
    .where((eb) => eb.or([eb('subject', '=', p['entity']!), eb('subject', '>=', p['lo']!)])),
);

/** Alert state: which (rule, subject) pairs are firing, and how often each has fired. */
export class AlertsRepo {
  constructor(private readonly x: Executor) {}

  /** Every row of one rule (operator alerts: a handful). */
  ofRule(rule: string): Promise<AlertRow[]> {
    return this.x.all(OF_RULE, { rule });
  }

  /** The firing rows of one rule (the sites firing an alert, for platform incidents). */
  firingOfRule(rule: string): Promise<AlertRow[]> {
    return this.x.all(FIRING_OF_RULE, { rule, status: 'firing' });
  }

  /** The state of one alert, if it was ever evaluated true. */
  get(rule: string, subject: string): Promise<AlertRow | undefined> {
    return this.x.get(GET, { rule, subject });
  }

  /**
   * The state of every alert of `rules` about `entity` or one of its records (subject
   * `entity` or `entity/<key>`): what a poll's plan may read, in one query.
   */
  async ofEntity(rules: readonly string[], entity: string): Promise<AlertRow[]> {
    if (rules.length === 0) return [];
    const p: Record<string, string> = { entity, lo: `${entity}/`, hi: `${entity}0` };
    rules.forEach((r, i) => (p[`r${i}`] = r));
    return this.x.all(OF_ENTITY(rules.length), p);
  }

  /** Write alert state. */
  async put(row: AlertRow): Promise<void> {
    await this.x.run(PUT, row);
  }

  /** Alerts firing now for a site (to resolve them when the site goes away). */
  firingForSite(siteId: number): Promise<AlertRow[]> {
    return this.x.all(FIRING_FOR_SITE, { site_id: siteId, status: 'firing' });
  }

  /** Every alert firing now, oldest first. */
  firing(): Promise<AlertRow[]> {
    return this.x.all(FIRING, { status: 'firing' });
  }

  /** Every alert firing or pending (waiting for its `for`), with the stored event of its last firing. */
  open(): Promise<OpenAlert[]> {
    return this.x.all(OPEN_WITH_EVENTS, { status: 'firing' });
  }

  /** Every alert firing now with the stored event of its last firing, oldest first. */
  firingWithEvents(): Promise<FiringAlert[]> {
    return this.x.all(FIRING_WITH_EVENTS, { status: 'firing' });
  }
}
