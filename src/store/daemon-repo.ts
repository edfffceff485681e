import { nonKey, pick, statement, type Executor } from './sql.js';
import { COLUMNS, KEYS, type Database } from './schema.js';

export type HeartbeatRow = Database['daemon_heartbeat'];

const BEAT = statement<HeartbeatRow>((qb, p) =>
  qb
    .insertInto('daemon_heartbeat')
    .values(pick(p, COLUMNS.daemon_heartbeat))
    .onConflict((oc) => oc.columns(KEYS.daemon_heartbeat).doUpdateSet(pick(p, nonKey(COLUMNS.daemon_heartbeat, KEYS.daemon_heartbeat)))),
);
const STOP = statement<{ instance: string; at: number }>((qb, p) =>
  qb.updateTable('daemon_heartbeat').set({ stopped_at: p.at, seen_at: p.at }).where('instance', '=', p.instance),
);
const LATEST = statement<Record<string, never>, HeartbeatRow>((qb) => qb.selectFrom('daemon_heartbeat').selectAll().orderBy('seen_at', 'desc').limit(1));

/** A daemon's sign of life, written every few seconds while it runs. */
export class DaemonRepo {
  constructor(private readonly x: Executor) {}

  /** Record that a daemon is alive now. */
  async beat(row: HeartbeatRow): Promise<void> {
    await this.x.run(BEAT, row);
  }

  /** Record a daemon's clean stop. */
  async stopped(instance: string, at: number): Promise<void> {
    await this.x.run(STOP, { instance, at });
  }

  /** The daemon seen most recently on this database, if any ever ran. */
  latest(): Promise<HeartbeatRow | undefined> {
    return this.x.get(LATEST, {});
  }
}

/** How often a daemon beats, and how old a beat may be for the daemon to count as running. */
export const HEARTBEAT_EVERY_MS = 5_000;
export const HEARTBEAT_STALE_MS = 20_000;

/** Is the daemon of this row running now (a fresh beat and no clean stop)? */
export function daemonRunning(row: HeartbeatRow | undefined, now: number): boolean {
  return row !== undefined && row.stopped_at === null && now - row.seen_at <= HEARTBEAT_STALE_MS;
}
