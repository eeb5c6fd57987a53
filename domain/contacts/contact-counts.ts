import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';

/** Fold a project's deltas into its base row once there are this many. */
const COMPACT_AFTER = 500;

/**
 * The project's exact contact count (all, or by subscription), from the trigger-maintained base row and deltas
 * (migration 20261121234500): a handful of rows instead of a scan of every contact.
 */
export async function countContacts(em: EntityManager, projectId: string, subscribed?: boolean): Promise<number> {
  const [row] = await sql(em).query<{ total: string; subscribed: string; deltas: string }>(
    `select coalesce((select total from contact_counts where project_id = $1), 0) + coalesce(sum(d.total), 0) as total,
            coalesce((select subscribed from contact_counts where project_id = $2), 0) + coalesce(sum(d.subscribed), 0) as subscribed,
            count(d.id) as deltas
     from contact_count_deltas d where d.project_id = $3`,
    [projectId, projectId, projectId],
  );
  if (Number(row!.deltas) > COMPACT_AFTER) await compact(em, projectId);
  const total = Number(row!.total);
  const subs = Number(row!.subscribed);
  return subscribed === undefined ? total : subscribed ? subs : total - subs;
}

/** Moves the deltas into the base row atomically (the DELETE ... RETURNING takes exactly the rows it adds). */
async function compact(em: EntityManager, projectId: string): Promise<void> {
  await sql(em).query('select mailwright_contact_counts_compact($1)', [projectId]);
}
