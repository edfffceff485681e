import type BetterSqlite3 from 'better-sqlite3';
import { nonKey, pick, prepare, qb } from './db.js';
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

/** Alert state: which (rule, subject) pairs are firing, and how often each has fired. */
export class AlertsRepo {
  private readonly getStmt;
  private readonly upsertStmt;
  private readonly firingForSiteStmt;
  private readonly firingStmt;
  private readonly firingWithEventStmt;
  private readonly ofRuleStmt;
  private readonly firingOfRuleStmt;

  constructor(sqlite: BetterSqlite3.Database) {
    this.getStmt = prepare<{ rule: string; subject: string }>(sqlite, (p) =>
      qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).where('subject', '=', p.subject),
    );
    this.upsertStmt = prepare<AlertRow>(sqlite, (p) =>
      qb
        .insertInto('alerts')
        .values(pick(p, COLUMNS.alerts))
        .onConflict((oc) => oc.columns(KEYS.alerts).doUpdateSet(pick(p, nonKey(COLUMNS.alerts, KEYS.alerts)))),
    );
    this.firingForSiteStmt = prepare<{ site_id: number; status: AlertRow['status'] }>(sqlite, (p) =>
      qb.selectFrom('alerts').selectAll().where('site_id', '=', p.site_id).where('status', '=', p.status),
    );
    this.firingStmt = prepare<{ status: AlertRow['status'] }>(sqlite, (p) =>
      qb.selectFrom('alerts').selectAll().where('status', '=', p.status).orderBy('since'),
    );
    this.firingWithEventStmt = prepare<{ status: AlertRow['status'] }>(sqlite, (p) =>
      qb
        .selectFrom('alerts')
        .leftJoin('events', 'events.id', 'alerts.last_event_id')
        .select(['alerts.rule', 'alerts.subject', 'alerts.site_id', 'alerts.since', 'alerts.seq', 'events.body'])
        .where('alerts.status', '=', p.status)
        .orderBy('alerts.since')
        .orderBy('alerts.rule')
        .orderBy('alerts.subject'),
    );
    this.ofRuleStmt = prepare<{ rule: string }>(sqlite, (p) => qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).orderBy('subject'));
    this.firingOfRuleStmt = prepare<{ rule: string; status: AlertRow['status'] }>(sqlite, (p) =>
      qb.selectFrom('alerts').selectAll().where('rule', '=', p.rule).where('status', '=', p.status),
    );
  }

  /** Every row of one rule (operator alerts: a handful). */
  ofRule(rule: string): AlertRow[] {
    return this.ofRuleStmt.all({ rule }) as AlertRow[];
  }

  /** The firing rows of one rule (the sites firing an alert, for platform incidents). */
  firingOfRule(rule: string): AlertRow[] {
    return this.firingOfRuleStmt.all({ rule, status: 'firing' }) as AlertRow[];
  }

  /** The state of one alert, if it was ever evaluated true. */
  get(rule: string, subject: string): AlertRow | undefined {
    return this.getStmt.get({ rule, subject }) as AlertRow | undefined;
  }

  /** Write alert state. */
  put(row: AlertRow): void {
    this.upsertStmt.run(row);
  }

  /** Alerts firing now for a site (to resolve them when the site goes away). */
  firingForSite(siteId: number): AlertRow[] {
    return this.firingForSiteStmt.all({ site_id: siteId, status: 'firing' }) as AlertRow[];
  }

  /** Every alert firing now, oldest first. */
  firing(): AlertRow[] {
    return this.firingStmt.all({ status: 'firing' }) as AlertRow[];
  }

  /** Every alert firing now with the stored event of its last firing, oldest first. */
  firingWithEvents(): FiringAlert[] {
    return this.firingWithEventStmt.all({ status: 'firing' }) as FiringAlert[];
  }
}
