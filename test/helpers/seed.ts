import { uuidv7 } from '../../domain/ids';
import { db } from './db';

/** Inserts `n` contacts in one statement (ids in creation order); returns their ids, oldest first. */
export async function seedContacts(
  projectId: string,
  n: number,
  make: (i: number) => { email: string; subscribed?: boolean; data?: Record<string, unknown> },
): Promise<string[]> {
  const ids: string[] = [];
  const emails: string[] = [];
  const subscribed: boolean[] = [];
  const data: string[] = [];
  for (let i = 0; i < n; i++) {
    const c = make(i);
    ids.push(uuidv7());
    emails.push(c.email.toLowerCase());
    subscribed.push(c.subscribed ?? true);
    data.push(JSON.stringify(c.data ?? {}));
  }
  await db().query(
    `insert into contacts (id, project_id, email, subscribed, data)
     select id, $1, email, sub, d::jsonb from unnest($2::uuid[], $3::text[], $4::boolean[], $5::text[]) as t(id, email, sub, d)`,
    [projectId, ids, emails, subscribed, data],
  );
  return ids;
}
