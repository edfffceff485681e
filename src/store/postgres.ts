import pg from 'pg';
import type { BatchTx } from './commit-queue.js';
import { describeStorage, StorageUnreachableError, type StoreOptions } from './db.js';
import { announceMigrated, migratePostgres, type Migration } from './migrate.js';
import { QueuedStore } from './queued-store.js';
import type { Executor, Statement } from './sql.js';

/**
 * BIGINT (times in milliseconds, ids, COUNT) and NUMERIC come back from node-postgres as
 * strings by default (they can exceed 2^53); every such value hostwatch stores is far below
 * it, so they are read as numbers, like SQLite gives them. Per pool, not pg's global table.
 */
const NUMBERS = new Set([20 /* int8 */, 1700 /* numeric */]);
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    NUMBERS.has(oid) ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * The transaction-level advisory lock that orders event inserts ("hwevents"). `events.seq`
 * is the feed cursor; sequence values are handed out at insert time, but transactions commit
 * in any order, so a reader at cursor 100 could miss seq 99 committed a moment later.
 * Every batch holds this lock from BEGIN to COMMIT, so event-writing transactions commit
 * one after another, in the order of their seq values (and batches of several cluster
 * members never deadlock on row locks taken in different orders).
 */
const EVENTS_LOCK = String(0x68776576656e7473n);

/** The NOTIFY channel of committed events: every instance's feed listens on it. */
export const EVENTS_CHANNEL = 'hostwatch_events';

type Queryable = pg.Pool | pg.PoolClient | pg.Client;

async function exec<P, R>(on: Queryable, s: Statement<P, R>, p: P): Promise<pg.QueryResult> {
  const c = s.compile('postgres');
  // Named: each connection parses and plans the statement once, then only binds values.
  return on.query({ name: c.name, text: c.sql, values: s.args('postgres', p) });
}

/** Executor's all/get/run over one way to run a statement (a pooled, held or own connection). */
const rowsOf = async <R>(r: Promise<pg.QueryResult>): Promise<R[]> => (await r).rows as R[];
const firstOf = async <R>(r: Promise<pg.QueryResult>): Promise<R | undefined> => (await r).rows[0] as R | undefined;
const changedBy = async (r: Promise<pg.QueryResult>): Promise<number> => (await r).rowCount ?? 0;

/** One batch transaction on a connection checked out of the pool for it. */
class PostgresTx implements BatchTx {
  readonly dialect = 'postgres' as const;
  private eventsOrdered = false;
  /** eventsOrdered when the current savepoint was opened (a rolled-back unit's lock is released with it). */
  private orderedAtSavepoint = false;
  readonly memo = new Map<string, unknown>();
  /** Set by the commit queue for each unit (Executor.afterCommit). */
  afterCommit?: (fn: () => void) => void = undefined;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly onEnd: () => void,
  ) {}

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    return rowsOf(exec(this.client, s, p));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    return firstOf(exec(this.client, s, p));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    return changedBy(exec(this.client, s, p));
  }
  // The batch took the events lock at BEGIN (PostgresStore.begin); what is left is to say
  // that events are coming. The NOTIFY is delivered at COMMIT (and dropped with a rollback
  // of its savepoint): every instance's live feed wakes once the events are there to read.
  async orderEvents(): Promise<void> {
    if (this.eventsOrdered) return;
    await this.client.query(`SELECT pg_notify('${EVENTS_CHANNEL}', '')`);
    this.eventsOrdered = true;
  }
  async savepoint(): Promise<void> {
    this.orderedAtSavepoint = this.eventsOrdered;
    await this.client.query('SAVEPOINT hw_unit');
  }
  async release(): Promise<void> {
    await this.client.query('RELEASE SAVEPOINT hw_unit');
  }
  async rollbackTo(): Promise<void> {
    this.memo.clear();
    await this.client.query('ROLLBACK TO SAVEPOINT hw_unit');
    await this.client.query('RELEASE SAVEPOINT hw_unit');
    this.eventsOrdered = this.orderedAtSavepoint;
  }
  // PostgreSQL's COMMIT returns once the commit is durable (synchronous_commit).
  async commit(): Promise<{ durable: Promise<void> }> {
    await this.client.query('COMMIT');
    this.client.release();
    this.onEnd();
    return { durable: Promise.resolve() };
  }
  async rollback(): Promise<void> {
    try {
      await this.client.query('ROLLBACK');
      this.client.release();
    } catch (e) {
      // A connection that cannot even roll back is broken: drop it from the pool.
      this.client.release(e as Error);
    } finally {
      this.onEnd();
    }
  }
}

/**
 * The PostgreSQL engine: a node-postgres pool. Statements outside a transaction run on any
 * pooled connection; each batch of the commit queue holds one connection from BEGIN to
 * COMMIT. Used for a cluster of instances (a later phase) and wherever a server database is
 * preferred to a file.
 */
export class PostgresStore extends QueuedStore {
  readonly soleWriter = false;
  readonly engine = 'postgres' as const;
  readonly dialect = 'postgres' as const;
  private open = 0;
  private ended = false;

  constructor(
    readonly pool: pg.Pool,
    /** The database URL (with its password): for the connections the cluster opens. Never logged. */
    readonly url: string,
    readonly description: string,
    latest: number,
    now: () => number,
  ) {
    super(latest, now);
  }

  get transactionOpen(): boolean {
    return this.open > 0;
  }

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    return rowsOf(exec(this.pool, s, p));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    return firstOf(exec(this.pool, s, p));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    return changedBy(exec(this.pool, s, p));
  }
  protected answers(): boolean {
    return !this.ended;
  }

  protected async shut(): Promise<void> {
    this.ended = true;
    await this.pool.end();
  }

  protected async begin(): Promise<BatchTx> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      // Every batch, not only those that insert events: taken lazily (at the first event
      // insert) the lock met row locks (poll state, alerts) held in the other order by the
      // batches of other cluster members, and PostgreSQL aborted one of them (a deadlock).
      // Taken first, write batches of the whole cluster commit one after another.
      await client.query('SELECT pg_advisory_xact_lock($1)', [EVENTS_LOCK]);
    } catch (e) {
      client.release(e as Error);
      throw e;
    }
    this.open++;
    return new PostgresTx(client, () => this.open--);
  }
}

/** Connect a pool to `url`, apply migrations (under an advisory lock), and return the store. */
export async function openPostgres(url: string, migrations: Migration[], opts: StoreOptions): Promise<PostgresStore> {
  const pool = new pg.Pool({
    connectionString: url,
    types,
    application_name: 'hostwatch',
    // A database that does not answer fails a poll's commit instead of hanging it.
    connectionTimeoutMillis: 10_000,
    max: 10,
    ...(opts.idleInTransactionMs ? { options: `-c idle_in_transaction_session_timeout=${Math.max(1_000, Math.round(opts.idleInTransactionMs))}` } : {}),
  });
  // An idle connection that breaks (server restart) is dropped by the pool; without a
  // listener its 'error' would end the process.
  pool.on('error', (e) => opts.onError?.(e));
  // A connection the server ends while we hold it (idle_in_transaction_session_timeout, a
  // restart, a migration waiting on its lock) emits 'error', and the pool listens only to
  // idle ones: unheard, it would end the process. The query in flight fails with it and is
  // handled where it was made.
  pool.on('connect', (c) => c.on('error', () => undefined));
  const description = describeStorage({ engine: 'postgres', url });
  try {
    const client = await pool.connect().catch((e: unknown) => {
      // node-postgres says only "connect ECONNREFUSED 127.0.0.1:1": name what it is (no password).
      throw new StorageUnreachableError(`cannot connect to ${description} (storage.url): ${(e as Error).message}`);
    });
    try {
      const mode = opts.readonly ? 'read' : opts.mustExist ? 'existing' : 'create';
      announceMigrated(await migratePostgres(client, migrations, opts.now, mode), migrations, opts.onMigrated);
    } finally {
      client.release();
    }
  } catch (e) {
    await pool.end().catch(() => undefined);
    throw e;
  }
  return new PostgresStore(pool, url, description, migrations.at(-1)?.version ?? 0, opts.now);
}

/**
 * A connection of its own, outside the pool: the cluster's heartbeat must not wait behind
 * busy pooled connections (a live member would lose its lease), and LISTEN needs a session
 * that stays. It reconnects by itself on its next use after the connection broke; a
 * statement that gets no answer within `timeoutMs` fails (a partition from the database
 * must not hang the heartbeat past the lease).
 */
export class PostgresSession implements Executor {
  readonly dialect = 'postgres' as const;
  private client: Promise<pg.Client> | null = null;
  private readonly channels = new Map<string, (payload?: string) => void>();
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly applicationName: string,
    private readonly timeoutMs: number,
    private readonly onError: (e: Error) => void,
  ) {}

  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]> {
    return rowsOf(this.exec(s, p));
  }
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined> {
    return firstOf(this.exec(s, p));
  }
  run<P, R>(s: Statement<P, R>, p: P): Promise<number> {
    return changedBy(this.exec(s, p));
  }
  orderEvents(): Promise<void> {
    return Promise.reject(new Error('events are stored inside a transaction (store.transaction)'));
  }

  /**
   * Call `wake` with the payload of every NOTIFY on `channel`, and once without one after
   * each reconnection (what was notified while the connection was down is lost; listeners
   * read again).
   */
  async listen(channel: string, wake: (payload?: string) => void): Promise<void> {
    if (!/^[a-z_]+$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
    this.channels.set(channel, wake);
    const c = await this.connection();
    await c.query(`LISTEN ${channel}`);
  }

  async close(): Promise<void> {
    this.closed = true;
    const c = this.client;
    this.client = null;
    await c?.then((x) => x.end()).catch(() => undefined);
  }

  private async exec<P, R>(s: Statement<P, R>, p: P): Promise<pg.QueryResult> {
    const opening = this.connection();
    const c = await opening;
    try {
      return await exec(c, s, p);
    } catch (e) {
      // A timeout leaves the connection in an unknown state: start again on a new one (pg's
      // "Query read timeout" has no code). Only this one: a newer connection is kept.
      if ((e as Error).message?.includes('timeout')) {
        if (this.client === opening) this.client = null;
        void c.end().catch(() => undefined);
      }
      throw e;
    }
  }

  private connection(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error('the session is closed'));
    if (this.client) return this.client;
    const c = new pg.Client({
      connectionString: this.url,
      types,
      application_name: this.applicationName.slice(0, 63),
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
      keepAlive: true,
    });
    const opening = (async () => {
      c.on('error', (e) => {
        this.onError(e);
        if (this.client === opening) this.client = null;
        void c.end().catch(() => undefined);
      });
      c.on('end', () => {
        if (this.client === opening) this.client = null;
      });
      c.on('notification', (n) => this.channels.get(n.channel)?.(n.payload));
      await c.connect();
      for (const ch of this.channels.keys()) await c.query(`LISTEN ${ch}`);
      // Whatever was notified while no connection listened: read again.
      for (const wake of this.channels.values()) wake();
      return c;
    })();
    this.client = opening;
    opening.catch(() => {
      if (this.client === opening) this.client = null;
      void c.end().catch(() => undefined);
    });
    return opening;
  }
}
