import type { EntityManager } from '@mikro-orm/postgresql';
import type { PoolClient, QueryResultRow } from 'pg';

/**
 * Runs a hot statement as a named prepared statement on one of the ORM pool's connections: Postgres parses and plans
 * it once per connection instead of on every call (the ORM's raw queries inline their values, so every call would
 * otherwise be planned anew). `text` uses $1..$n placeholders. Not for use inside an ORM transaction.
 */
export async function preparedQuery<T extends QueryResultRow>(em: EntityManager, name: string, text: string, values: unknown[]): Promise<T[]> {
  const client = em.getConnection().getKnex().client;
  const conn = (await client.acquireConnection()) as PoolClient;
  try {
    const result = await conn.query<T>({ name, text, values });
    return result.rows;
  } finally {
    await client.releaseConnection(conn);
  }
}
