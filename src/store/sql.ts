import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type Compilable,
  type RawBuilder,
} from 'kysely';
import type { Database } from './schema.js';

/** The SQL dialects a statement is compiled for (one per storage engine). */
export type Dialect = 'sqlite' | 'postgres';

/**
 * Kysely builds and types the queries and compiles them for a dialect; it never runs them
 * (a dummy driver). The engines (sqlite.ts, postgres.ts) run the compiled text.
 */
const builders: Record<Dialect, Kysely<Database>> = {
  sqlite: new Kysely<Database>({
    dialect: {
      createAdapter: () => new SqliteAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new SqliteIntrospector(db),
      createQueryCompiler: () => new SqliteQueryCompiler(),
    },
  }),
  postgres: new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  }),
};

/** The query builder a statement's `build` receives. */
export type QueryBuilder = Kysely<Database>;

/** Placeholders standing for a statement's named parameters while it is built. */
export type Params<P> = { readonly [K in keyof P]: P[K] };

const PARAM = '\u0000hw-param:';

/** A statement's SQL for one dialect, and where each positional value comes from. */
export interface CompiledStatement {
  sql: string;
  /** A name unique to this SQL text (PostgreSQL prepares it once per connection under it). */
  name: string;
  /** Where each positional value comes from: a named parameter, or a literal written in the query. */
  bindings: ReadonlyArray<{ name: string } | { literal: unknown }>;
}

let nextId = 0;

/**
 * One SQL statement with named parameters, compiled once per dialect on first use. `build`
 * receives the dialect's query builder and placeholders standing for the named values;
 * they become positional bindings (`?` or `$n`), so the text is compiled once and prepared
 * once per connection, then run many times.
 */
export class Statement<P, R> {
  readonly id = ++nextId;
  private readonly compiled: Partial<Record<Dialect, CompiledStatement>> = {};
  /** Only for typing: the row type the statement returns. */
  declare readonly row: R;

  constructor(private readonly build: (qb: QueryBuilder, p: Params<P>) => Compilable | RawBuilder<unknown>) {}

  /** The statement's SQL for a dialect (compiled on first use). */
  compile(dialect: Dialect): CompiledStatement {
    const done = this.compiled[dialect];
    if (done) return done;
    const qb = builders[dialect];
    const proxy = new Proxy({}, { get: (_t, k) => PARAM + String(k) }) as Params<P>;
    const built = this.build(qb, proxy);
    const query = 'isRawBuilder' in built ? built.compile(qb) : built.compile();
    const out: CompiledStatement = {
      sql: query.sql,
      name: `hw_${this.id}`,
      bindings: query.parameters.map((v) => (typeof v === 'string' && v.startsWith(PARAM) ? { name: v.slice(PARAM.length) } : { literal: v })),
    };
    this.compiled[dialect] = out;
    return out;
  }

  /** The positional values of `p` for a dialect's compiled text. */
  args(dialect: Dialect, p: P): unknown[] {
    return this.compile(dialect).bindings.map((b) => ('name' in b ? (p as Record<string, unknown>)[b.name] : b.literal));
  }
}

/** A statement (see Statement); `R` is the type of the rows it returns. */
export function statement<P = Record<string, never>, R = never>(
  build: (qb: QueryBuilder, p: Params<P>) => Compilable | RawBuilder<unknown>,
): Statement<P, R> {
  return new Statement<P, R>(build);
}

/**
 * One statement per combination of optional filters, each made on first use: a filter that
 * is absent is left out of the SQL (so indexes stay usable) rather than written as
 * `(? IS NULL OR col = ?)`.
 */
export function variants<P, F, R = never>(
  build: (qb: QueryBuilder, flags: F, p: Params<P>) => Compilable | RawBuilder<unknown>,
): (flags: F) => Statement<P, R> {
  const cache = new Map<string, Statement<P, R>>();
  return (flags) => {
    const key = JSON.stringify(flags);
    let s = cache.get(key);
    if (!s) {
      s = statement<P, R>((qb, p) => build(qb, flags, p));
      cache.set(key, s);
    }
    return s;
  };
}

/** The named placeholders of `cols`, as an object `values()` can take. */
export function pick<P, K extends keyof P & string>(p: P, cols: readonly K[]): Pick<P, K> {
  const out = {} as Pick<P, K>;
  for (const c of cols) out[c] = p[c];
  return out;
}

/** `cols` without `keys`: what an upsert updates when the row exists. */
export function nonKey<C extends string, K extends C>(cols: readonly C[], keys: readonly K[]): Exclude<C, K>[] {
  return cols.filter((c): c is Exclude<C, K> => !(keys as readonly string[]).includes(c));
}

/**
 * What runs statements: a store (each statement on its own) or a transaction. Repositories
 * are thin objects over one, so the same repository code runs inside and outside a
 * transaction and on either engine.
 */
export interface Executor {
  readonly dialect: Dialect;
  /** Every row. */
  all<P, R>(s: Statement<P, R>, p: P): Promise<R[]>;
  /** The first row, or undefined. */
  get<P, R>(s: Statement<P, R>, p: P): Promise<R | undefined>;
  /** Run a write; resolves with the number of rows it changed. */
  run<P, R>(s: Statement<P, R>, p: P): Promise<number>;
  /**
   * Called before the first event insert of a transaction. Event inserts commit in `seq`
   * order (the feed cursor) because every PostgreSQL batch holds the events advisory lock
   * from BEGIN (PostgresStore.begin: removing that lock breaks the feed's order), and SQLite
   * has one writer. What is left here: PostgreSQL announces the insert (a NOTIFY delivered
   * at COMMIT, for the other instances' feeds); SQLite does nothing. Rejects outside a
   * transaction.
   */
  orderEvents(): Promise<void>;
  /**
   * Reads remembered for the rest of one batch transaction (a batch is one moment: the
   * active silences, the platform incidents' rows), so its units do not each read them
   * again. Cleared when a unit is rolled back to its savepoint; whoever writes what a key
   * holds deletes the key. Absent outside a batch: a statement on its own remembers nothing.
   */
  readonly memo?: Map<string, unknown>;
  /**
   * Run `fn` once the unit that calls this has committed and its commit is durable, just
   * before the unit's caller hears of it; never if the unit is rolled back (alone, or with
   * its batch, which may then run it again: only the run that commits counts). For what a
   * unit must not do itself: a log line saying what it wrote. Absent outside a batch, where
   * each statement commits on its own.
   */
  afterCommit?: (fn: () => void) => void;
}
