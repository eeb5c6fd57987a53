import type { EntityManager, PostgreSqlExceptionConverter } from '@mikro-orm/postgresql';
import path from 'node:path';
import pg, { type Client, type Pool, type PoolClient, type QueryResultRow } from 'pg';

/**
 * The one way to run raw SQL (README › Architecture › Data access). Every statement that is not an entity loaded and
 * saved whole goes through `Sql`: placeholders are always `$1..$n`, a statement given a name is prepared once per
 * connection, and rows come back in one representation: `timestamp`/`timestamptz` as `Date` (arrays of them as
 * `Date[]`), `date` and `interval` as Postgres' text, `bigint` and `numeric` as text (cast to `::int` or convert where
 * a number is wanted). MikroORM's own raw queries return timestamps as text; nothing here goes through them.
 *
 * Where statements run:
 * - `sql(em)`: on the EntityManager's open transaction when it is inside `em.transactional`, otherwise on a pooled
 *   connection per statement (the ORM's pool);
 * - `sql(pool)`: on a pg pool of a process' own (the event dispatcher's);
 * - `sql(em).transaction(fn)`: `fn` gets an `Sql` bound to one connection inside BEGIN ... COMMIT (ROLLBACK when it
 *   throws); inside an `Sql` already in a transaction, `fn` joins it.
 *
 * A test (test/unit/data-access.test.ts) fails when code outside this folder calls `.execute(` on the ORM or `.query(`
 * on a pg connection or pool.
 */

const TIMESTAMP_OIDS = [1114, 1184] as const;
const TEXT_OIDS = [1082 /* date */, 1186 /* interval */] as const;

/**
 * Postgres' refusals become the ORM's exception classes (UniqueConstraintViolationException for 23505, ...), as its
 * own queries throw them, keeping the driver's fields (`code` is the SQLSTATE): one error vocabulary for both.
 */
let converter: Promise<PostgreSqlExceptionConverter> | undefined;
/**
 * The ORM is loaded on the first refusal, not with this module: a campaign render thread runs `sql()` on a pool of
 * its own and would otherwise load MikroORM for nothing (about 0.3 s of CPU and 11 MB of heap a thread). Processes
 * with an ORM have it loaded already.
 */
function convertRefusal(err: pg.DatabaseError): Promise<Error> {
  converter ??= import('@mikro-orm/postgresql').then((orm) => new orm.PostgreSqlExceptionConverter());
  return converter.then((c) => c.convertException(err));
}

const types = new pg.TypeOverrides();
for (const oid of TIMESTAMP_OIDS) types.setTypeParser(oid, (text: string) => new Date(pgTimestampToIso(text)));
for (const oid of TEXT_OIDS) types.setTypeParser(oid, (text: string) => text);

/**
 * Postgres' text form of a timestamp (`2026-11-27 02:46:13.123456+00`, `+05:30`, or without a zone for `timestamp`,
 * which the ORM's UTC setting makes UTC) as an ISO string `Date` parses the same on every platform. Infinity stays
 * unparseable (an invalid Date): no column here stores it.
 */
function pgTimestampToIso(text: string): string {
  const m = /^(\d{4,}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)(?:([+-]\d\d)(?::?(\d\d))?(?::\d\d)?)?( BC)?$/.exec(text);
  if (!m) return text;
  const [, date, time, zh, zm] = m;
  const zone = zh === undefined ? 'Z' : `${zh}:${zm ?? '00'}`;
  return `${date}T${time}${zone}`;
}

/**
 * A hot statement: declared once at module level with `statement(name, text)`, prepared once per connection under its
 * name, and committed as SQL you can read in review: `npm run sql:snapshots` writes every declared statement into
 * domain/db/queries/<module>.sql, and test/unit/sql-snapshots.test.ts fails when those files and the code differ.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
  /** The declaring module, relative to the repository (`domain/contacts/contact-intake.ts`). */
  readonly module: string;
  /** False: sent unnamed, so planned on every call (for a statement whose best plan follows the data's size). */
  readonly prepare: boolean;
}

const declared = new Map<string, Statement>();
const ROOT = path.join(__dirname, '..', '..');

/** Declares a hot statement (module level only: the snapshot test finds statements by importing their modules). */
export function statement(name: string, text: string, opts: { prepare?: boolean } = {}): Statement {
  const module = declaringModule();
  const known = declared.get(name);
  if (known && (known.text !== text || known.module !== module)) throw new Error(`Statement ${name} is declared twice (${known.module}, ${module})`);
  const s: Statement = { name, text, module, prepare: opts.prepare ?? true };
  declared.set(name, s);
  return s;
}

/** Every statement declared by the modules loaded so far. */
export function declaredStatements(): Statement[] {
  return [...declared.values()];
}

/** The file that called `statement()`, from the call stack (once per statement, at module load). */
function declaringModule(): string {
  const frames = (new Error().stack ?? '').split('\n').slice(1);
  for (const frame of frames) {
    const m = /\(?((?:file:\/\/)?\/[^():]+\.[cm]?[jt]s):\d+:\d+\)?$/.exec(frame.trim());
    if (!m) continue;
    const file = m[1]!.replace(/^file:\/\//, '');
    if (path.resolve(file) === path.resolve(__filename)) continue;
    return path.relative(ROOT, file).split(path.sep).join('/');
  }
  return 'unknown';
}

/** What `pg` runs a query config on: a pool, one of its connections, or a client of its own. */
type PgRunner = Pool | PoolClient | Client;
type Connection = PoolClient | Client;

type Target = { kind: 'orm'; em: EntityManager } | { kind: 'pg'; runner: PgRunner; inTransaction: boolean };

export interface TransactionOptions {
  /** Commit without waiting for the WAL flush: for work that is simply redone if a crash loses it. */
  synchronousCommit?: boolean;
}

let savepoints = 0;

export class Sql {
  private constructor(private readonly target: Target) {}

  /** @internal see `sql()`. */
  static of(source: EntityManager | PgRunner, inTransaction = false): Sql {
    if (isPgRunner(source)) return new Sql({ kind: 'pg', runner: source, inTransaction });
    return new Sql({ kind: 'orm', em: source });
  }

  /** Runs one statement and returns its rows. A `Statement` is prepared once per connection under its name. */
  async query<T extends QueryResultRow>(q: string | Statement, values: readonly unknown[] = []): Promise<T[]> {
    return (await this.result<T>(q, values)).rows;
  }

  /** Runs one statement and returns how many rows it inserted, updated or deleted. */
  async run(q: string | Statement, values: readonly unknown[] = []): Promise<number> {
    return (await this.result(q, values)).rowCount ?? 0;
  }

  /** The first row, or undefined. */
  async one<T extends QueryResultRow>(q: string | Statement, values: readonly unknown[] = []): Promise<T | undefined> {
    return (await this.result<T>(q, values)).rows[0];
  }

  /** Whether statements run inside a transaction (this one's or the EntityManager's). */
  get inTransaction(): boolean {
    return this.target.kind === 'pg' ? this.target.inTransaction : this.target.em.isInTransaction();
  }

  /** Runs `fn` in one transaction on one connection; joins the transaction this `Sql` is already in. */
  async transaction<T>(fn: (tx: Sql) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
    if (this.inTransaction) {
      if (this.target.kind === 'pg') return fn(this);
      return this.withConnection((conn) => fn(new Sql({ kind: 'pg', runner: conn, inTransaction: true })));
    }
    return this.withConnection(async (conn) => {
      await conn.query(opts.synchronousCommit === false ? 'begin; set local synchronous_commit = off' : 'begin');
      try {
        const result = await fn(new Sql({ kind: 'pg', runner: conn, inTransaction: true }));
        await conn.query('commit');
        return result;
      } catch (err) {
        await conn.query('rollback').catch(() => undefined);
        throw err;
      }
    });
  }

  /**
   * Runs `fn` so that its failure undoes only its own statements: inside a transaction, under a savepoint (a statement
   * that fails aborts the whole transaction otherwise, so a caller that catches a unique violation and tries again
   * needs one); outside, `fn` as it is.
   */
  async savepoint<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.inTransaction) return fn();
    const name = `mw_savepoint_${++savepoints}`;
    await this.run(`savepoint ${name}`);
    try {
      const result = await fn();
      await this.run(`release savepoint ${name}`);
      return result;
    } catch (err) {
      await this.run(`rollback to savepoint ${name}`);
      throw err;
    }
  }

  /** Runs `fn` with one connection held (session settings, advisory locks); released afterwards. */
  async withConnection<T>(fn: (conn: Connection) => Promise<T>): Promise<T> {
    const t = this.target;
    if (t.kind === 'pg') {
      if (!isPool(t.runner)) return fn(t.runner);
      const conn = await t.runner.connect();
      try {
        return await fn(conn);
      } finally {
        conn.release();
      }
    }
    // Inside em.transactional the knex transaction's client hands out the transaction's own connection.
    const knex = (t.em.getTransactionContext() ?? t.em.getConnection().getKnex()) as { client: KnexClient };
    const conn = (await knex.client.acquireConnection()) as PoolClient;
    try {
      return await fn(conn);
    } finally {
      await knex.client.releaseConnection(conn);
    }
  }

  private async result<T extends QueryResultRow>(q: string | Statement, values: readonly unknown[]): Promise<pg.QueryResult<T>> {
    const config: pg.QueryConfig = { text: typeof q === 'string' ? q : q.text, values: values as unknown[], types };
    if (typeof q !== 'string' && q.prepare) config.name = q.name;
    const t = this.target;
    try {
      if (t.kind === 'pg') return await (t.runner as Pool).query<T>(config);
      return await this.withConnection((conn) => conn.query<T>(config));
    } catch (err) {
      throw err instanceof pg.DatabaseError ? await convertRefusal(err) : err;
    }
  }
}

interface KnexClient {
  acquireConnection(): Promise<unknown>;
  releaseConnection(conn: unknown): Promise<unknown>;
}

function isPgRunner(source: EntityManager | PgRunner): source is PgRunner {
  return typeof (source as { getConnection?: unknown }).getConnection !== 'function';
}

/** A pool (hands out connections) rather than one connection. */
function isPool(runner: PgRunner): runner is Pool {
  return typeof (runner as Pool).totalCount === 'number';
}

/** The query helper for an EntityManager, a pg pool of one's own or a held connection (see `Sql`). */
export function sql(source: EntityManager | Pool): Sql {
  return Sql.of(source);
}

/** Runs `fn` in one transaction (`sql(em).transaction(fn, opts)`). */
export function transaction<T>(source: EntityManager | Pool, fn: (tx: Sql) => Promise<T>, opts?: TransactionOptions): Promise<T> {
  return Sql.of(source).transaction(fn, opts);
}

/** An `Sql` on a connection that is already held by the caller (a LISTEN client, a lock holder). */
export function onConnection(conn: Connection, inTransaction = false): Sql {
  return Sql.of(conn, inTransaction);
}

export type { Pool };
