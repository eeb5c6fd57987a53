import { Pool } from 'pg';
import { stackEnv } from '../stack-env';

let pool: Pool | undefined;

/** Direct SQL against the test database, for assertions and for state no endpoint creates yet. */
export function db(): Pool {
  pool ??= new Pool({ connectionString: stackEnv().databaseUrl, max: 4 });
  return pool;
}

export async function closeDb(): Promise<void> {
  await pool?.end();
  pool = undefined;
}
