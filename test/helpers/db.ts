import { Pool } from 'pg';
import { stackEnv } from '../stack-env';

let pool: Pool | undefined;

/** Direct SQL against the test database, for assertions and for state no endpoint creates yet. */
export function db(): Pool {
  if (!pool) {
    pool = new Pool({ connectionString: stackEnv().databaseUrl, max: 4 });
    pool.on('error', () => undefined); // an idle connection cut by a Postgres restart (test/faults); the next query reports
  }
  return pool;
}

export async function closeDb(): Promise<void> {
  await pool?.end();
  pool = undefined;
}

/** Polls the email row until it has `status`; returns the row. */
export async function waitForEmailStatus(emailId: string, status: string, timeoutMs = 30_000): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db().query('select * from emails where id = $1', [emailId]);
    if (rows[0]?.status === status) return rows[0];
    if (Date.now() > deadline) throw new Error(`email ${emailId} is ${rows[0]?.status}, expected ${status}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
