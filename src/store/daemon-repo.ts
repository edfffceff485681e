import type BetterSqlite3 from 'better-sqlite3';
import { nonKey, pick, prepare, qb } from './db.js';
import { COLUMNS, KEYS, type Database } from './schema.js';

export type HeartbeatRow = Database['daemon_heartbeat'];

/** A daemon's sign of life, written every few seconds while it runs. */
export class DaemonRepo {
  private readonly upsertStmt;
  private readonly stopStmt;
  private readonly latestStmt;

  constructor(sqlite: BetterSqlite3.Database) {
    this.upsertStmt = prepare<HeartbeatRow>(sqlite, (p) =>
      qb
        .insertInto('daemon_heartbeat')
        .values(pick(p, COLUMNS.daemon_heartbeat))
        .onConflict((oc) => oc.columns(KEYS.daemon_heartbeat).doUpdateSet(pick(p, nonKey(COLUMNS.daemon_heartbeat, KEYS.daemon_heartbeat)))),
    );
    this.stopStmt = prepare<{ instance: string; at: number }>(sqlite, (p) =>
      qb.updateTable('daemon_heartbeat').set({ stopped_at: p.at, seen_at: p.at }).where('instance', '=', p.instance),
    );
    this.latestStmt = prepare<Record<string, never>>(sqlite, () => qb.selectFrom('daemon_heartbeat').selectAll().orderBy('seen_at', 'desc').limit(1));
  }

  /** Record that a daemon is alive now. */
  beat(row: HeartbeatRow): void {
    this.upsertStmt.run(row);
  }

  /** Record a daemon's clean stop. */
  stopped(instance: string, at: number): void {
    this.stopStmt.run({ instance, at });
  }

  /** The daemon seen most recently on this database, if any ever ran. */
  latest(): HeartbeatRow | undefined {
    return this.latestStmt.get({}) as HeartbeatRow | undefined;
  }
}

/** How often a daemon beats, and how old a beat may be for the daemon to count as running. */
export const HEARTBEAT_EVERY_MS = 5_000;
export const HEARTBEAT_STALE_MS = 20_000;

/** Is the daemon of this row running now (a fresh beat and no clean stop)? */
export function daemonRunning(row: HeartbeatRow | undefined, now: number): boolean {
  return row !== undefined && row.stopped_at === null && now - row.seen_at <= HEARTBEAT_STALE_MS;
}
