import { hostname } from 'node:os';
import pg from 'pg';
import { inUse, type Holder } from './sqlite-lock.js';

/** The session-level advisory lock key of the daemon of a PostgreSQL database ("hwdaemon"). */
const DAEMON_LOCK = 0x6877_6461_656d_6f6en;

/**
 * One daemon per PostgreSQL database, until the cluster mode shares the work between
 * instances: the daemon holds a session-level advisory lock on a connection of its own for
 * its whole life (PostgreSQL drops it when that session ends: a killed process holds
 * nothing). A second daemon refuses to start, naming the holder, which it finds through
 * pg_locks and the holder session's application_name (`hostwatch <pid>@<host>`).
 */
export async function lockPostgres(
  url: string,
  description: string,
  onLost: (e: Error) => void,
  pid = process.pid,
): Promise<{ release(): Promise<void> }> {
  // application_name is cut at 63 bytes: the pid first, so it survives a long host name.
  const client = new pg.Client({ connectionString: url, application_name: `hostwatch ${pid}@${hostname()}`.slice(0, 63) });
  await client.connect();
  try {
    const got = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [String(DAEMON_LOCK)]);
    if (!got.rows[0]!.ok) {
      const held = await client.query<{ application_name: string; since: Date }>(
        `SELECT a.application_name, a.backend_start AS since FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 1 AND l.granted`,
        [String(DAEMON_LOCK >> 32n), String(DAEMON_LOCK & 0xffffffffn)],
      );
      throw inUse(description, holderOf(held.rows[0]), 'until the cluster mode, one daemon per PostgreSQL database (a second one would send every event twice). Stop the other one');
    }
  } catch (e) {
    await client.end().catch(() => undefined);
    throw e;
  }
  // The lock lives as long as this session; if the connection breaks, say so (loudly).
  client.on('error', onLost);
  return { release: () => client.end().catch(() => undefined) };
}

function holderOf(row: { application_name: string; since: Date } | undefined): Holder | null {
  const m = row && /^hostwatch (\d+)@(.*)$/.exec(row.application_name);
  return m ? { pid: Number(m[1]), host: m[2]!, since: row!.since.getTime() } : null;
}
