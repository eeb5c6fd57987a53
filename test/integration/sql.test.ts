import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { Pool } from 'pg';
import { initOrm, type MikroORM } from '../../domain/orm';
import { onConnection, sql, statement, transaction } from '../../domain/db/sql';
import { stackEnv } from '../stack-env';

/**
 * The one raw-SQL helper (domain/db/sql.ts) against the real database: one row representation, transactions of its
 * own and the ORM's, prepared statements, and the ORM's error classes.
 */
let orm: MikroORM;
let pool: Pool;
const table = `sql_helper_${process.pid}`;

beforeAll(async () => {
  orm = await initOrm(stackEnv().databaseUrl, 4);
  pool = new Pool({ connectionString: stackEnv().databaseUrl, max: 2 });
  await sql(orm.em).run(`create table ${table} (id int primary key, at timestamptz, day date, n bigint)`);
});
afterAll(async () => {
  await sql(orm.em).run(`drop table if exists ${table}`);
  await pool.end();
  await orm.close();
});

describe('rows', () => {
  test('timestamptz and timestamp arrive as Date with their microseconds cut to milliseconds; date as text; bigint as text', async () => {
    const row = await sql(orm.em).one<{ at: Date; naive: Date; day: string; n: string; arr: Date[] }>(
      `select '2026-11-27 02:46:13.123456+05:30'::timestamptz as at, '2026-11-27 02:46:13.5'::timestamp as naive,
              '2026-11-27'::date as day, 9007199254740993::bigint as n,
              array['2026-01-01 00:00:00+00'::timestamptz, '2026-01-02 00:00:00+00'::timestamptz] as arr`,
    );
    expect(row!.at).toBeInstanceOf(Date);
    expect(row!.at.toISOString()).toBe('2026-11-26T21:16:13.123Z');
    expect(row!.naive.toISOString()).toBe('2026-11-27T02:46:13.500Z');
    expect(row!.day).toBe('2026-11-27');
    expect(row!.n).toBe('9007199254740993');
    expect(row!.arr.map((d) => d.toISOString())).toEqual(['2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z']);
  });

  test('the same representation on a pg pool of its own and on a held connection', async () => {
    const q = `select '2026-11-27 00:00:00+00'::timestamptz as at`;
    const fromPool = await sql(pool).one<{ at: Date }>(q);
    const conn = await pool.connect();
    try {
      const held = await onConnection(conn).one<{ at: Date }>(q);
      expect(held!.at).toEqual(fromPool!.at);
    } finally {
      conn.release();
    }
    expect(fromPool!.at).toBeInstanceOf(Date);
  });
});

describe('transactions', () => {
  test('a transaction commits its statements together, and rolls all of them back when its function throws', async () => {
    await transaction(orm.em, async (tx) => {
      await tx.run(`insert into ${table} (id) values ($1)`, [1]);
      await tx.run(`insert into ${table} (id) values ($1)`, [2]);
    });
    await expect(
      transaction(orm.em, async (tx) => {
        await tx.run(`insert into ${table} (id) values ($1)`, [3]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const ids = await sql(orm.em).query<{ id: number }>(`select id from ${table} order by id`);
    expect(ids.map((r) => r.id)).toEqual([1, 2]);
  });

  test('inside em.transactional, sql(tx) runs in the ORM transaction: rolled back with it', async () => {
    await expect(
      orm.em.fork().transactional(async (tx) => {
        await sql(tx).run(`insert into ${table} (id) values ($1)`, [10]);
        // Seen inside the transaction...
        expect(await sql(tx).one(`select id from ${table} where id = $1`, [10])).toBeDefined();
        // ...and a nested transaction() joins it instead of opening another connection.
        await sql(tx).transaction(async (inner) => {
          expect(inner.inTransaction).toBe(true);
          await inner.run(`insert into ${table} (id) values ($1)`, [11]);
        });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await sql(orm.em).query(`select id from ${table} where id in (10, 11)`)).toEqual([]);
  });

  test('another connection does not see a transaction before it commits', async () => {
    let seenOutside: unknown[] = ['not read'];
    await transaction(orm.em, async (tx) => {
      await tx.run(`insert into ${table} (id) values ($1)`, [20]);
      seenOutside = await sql(pool).query(`select id from ${table} where id = $1`, [20]);
    });
    expect(seenOutside).toEqual([]);
    expect(await sql(pool).query(`select id from ${table} where id = $1`, [20])).toEqual([{ id: 20 }]);
  });
});

describe('statements and errors', () => {
  test('a named statement is prepared once per connection and runs again with other values', async () => {
    const name = `sql_helper_named_${process.pid}`;
    const conn = await pool.connect();
    try {
      const db = onConnection(conn);
      const plusOne = statement(name, 'select $1::int + 1 as v');
      const a = await db.one<{ v: number }>(plusOne, [1]);
      const b = await db.one<{ v: number }>(plusOne, [41]);
      expect([a!.v, b!.v]).toEqual([2, 42]);
      const prepared = await db.query<{ statement: string }>('select statement from pg_prepared_statements where name = $1', [name]);
      expect(prepared).toEqual([{ statement: 'select $1::int + 1 as v' }]);
    } finally {
      conn.release();
    }
  });

  test('a unique violation is the ORM error class, with the SQLSTATE kept as code', async () => {
    const err = await sql(orm.em)
      .run(`insert into ${table} (id) values ($1)`, [1])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UniqueConstraintViolationException);
    expect((err as { code: string }).code).toBe('23505');
  });

  test('run counts the rows a statement changed', async () => {
    expect(await sql(orm.em).run(`update ${table} set n = 1 where id in (1, 2, 999)`)).toBe(2);
  });
});
