import type { EntityManager } from '@mikro-orm/postgresql';
import { uuidv7 } from '../ids';
import { markJobRunning, type JobRow } from '../jobs/job.service';
import { sql, statement, transaction } from '../db/sql';
import { eventDataSql, insertEventsSql } from '../events/event-writer';
import { CONTACT_ROW_LOCK } from './contact-merge';

/**
 * Subscribe or unsubscribe the job's contacts in one statement: only contacts of the job's project are touched (other
 * ids are skipped), only real changes are written, and each change records contact.subscribed / contact.unsubscribed
 * (source SYSTEM, data { via: 'bulk' }) in the same statement. The rows are locked in email order, as the /v1/track and
 * /v1/send batches lock theirs (contact-intake.ts), so the two never wait on each other in a cycle.
 */
const BULK_SUBSCRIPTION_SQL = statement('contact_bulk_subscription', `
with ids as (select distinct unnest($2::uuid[]) as id),
target as (
  select c.id, c.subscribed from contacts c
  where c.project_id = $1 and c.id = any($2::uuid[])
  order by c.email ${CONTACT_ROW_LOCK} of c
),
upd as (
  update contacts c set subscribed = $3::boolean, updated_at = now()
  from target t where c.id = t.id and t.subscribed <> $3::boolean
  returning c.id
),
numbered as (select id, row_number() over (order by id) as n from upd),
ev as (
  ${insertEventsSql({ id: '($4::uuid[])[n]', projectId: '$1', contactId: 'id', name: '$5::text', data: eventDataSql('contact.subscribed', { via: `'bulk'` }), source: 'SYSTEM' }, 'from numbered')}
)
select (select count(*) from ids)::int as total, (select count(*) from upd)::int as changed`, { prepare: false });

/** Deletes the job's contacts of its project (their events go with them, by the foreign key). */
const BULK_DELETE_SQL = statement('contact_bulk_delete', `
with ids as (select distinct unnest($2::uuid[]) as id),
del as (delete from contacts c where c.project_id = $1 and c.id = any($2::uuid[]) returning c.id)
select (select count(*) from ids)::int as total, (select count(*) from del)::int as changed`, { prepare: false });

/**
 * Runs a bulk job: QUEUED -> RUNNING -> COMPLETED, the change and the counters in one transaction guarded by the
 * job's chunk row, so a retried activity never applies it twice, and by the job's status, so a job cancelled before it
 * commits changes nothing. `changed` counts contacts whose state really changed;
 * the rest (unknown ids, other projects' ids, contacts already in the asked state) are `skipped`.
 */
export async function runBulkJob(em: EntityManager, jobId: string): Promise<void> {
  const job = await markJobRunning(em, jobId);
  if (!job) return;
  const row = await sql(em).one<{ contactIds: string[] }>('select contact_ids as "contactIds" from jobs where id = $1', [jobId]);
  const ids = row?.contactIds ?? [];
  await applyBulkJob(em, job, ids).catch((err: unknown) => {
    if (err instanceof BulkJobEnded) return;
    throw err;
  });
}

class BulkJobEnded extends Error {}

async function applyBulkJob(em: EntityManager, job: JobRow, ids: string[]): Promise<void> {
  const jobId = job.id;
  return transaction(em, async (tx) => {
    const claimed = await tx.run('insert into job_chunks (job_id, chunk, rows) values ($1, 0, $2) on conflict do nothing', [jobId, ids.length]);
    if (claimed === 0) return;
    const res =
      job.type === 'BULK_DELETE'
        ? await tx.one<{ total: number; changed: number }>(BULK_DELETE_SQL, [job.projectId, ids])
        : await tx.one<{ total: number; changed: number }>(BULK_SUBSCRIPTION_SQL, [
            job.projectId,
            ids,
            job.type === 'BULK_SUBSCRIBE',
            ids.map(() => uuidv7()),
            job.type === 'BULK_SUBSCRIBE' ? 'contact.subscribed' : 'contact.unsubscribed',
          ]);
    const r = res!;
    const completed = await tx.run(
      `update jobs set total = $2::int, processed = $2::int, changed = $3::int, skipped = $2::int - $3::int, status = 'COMPLETED', finished_at = now()
       where id = $1 and status = 'RUNNING'`,
      [jobId, r.total, r.changed],
    );
    // Cancelled (or failed) while this ran: roll the change back, the job stays as it ended.
    if (completed === 0) throw new BulkJobEnded();
  });
}
