import type { EntityManager } from '@mikro-orm/postgresql';
import type { PoolClient } from 'pg';
import { uuidv7 } from '../ids';
import { dispatchEvents, type RecordedEvent } from '../events/event.service';
import { finishJob, markJobRunning, withTransaction, type ImportOptions, type JobRow, type RowError } from '../jobs/job.service';
import { csvRows, CsvRejected, MAX_STORED_ROW_ERRORS, readLayout, type CsvRow } from './contact-import-csv';

/** Rows per upsert statement (and per committed chunk). */
export const IMPORT_BATCH_SIZE = 1000;

/**
 * Many contacts in one statement, with the data rules of the one-contact upsert (contact.repository.ts): lock the
 * batch's existing rows in email order, insert the missing ones, merge data (`data || set`; CSV cells never delete),
 * change subscription only where the row says so, and record contact.subscribed / contact.unsubscribed for a real
 * change of an existing contact. Emails are unique within a batch. An email whose insert lost a race to another
 * writer comes back in `missed` and is run again (it is then an existing contact).
 */
const IMPORT_BATCH_SQL = `
with input as (
  select * from unnest($2::text[], $3::jsonb[], $4::boolean[], $5::uuid[], $6::uuid[]) as t(email, set_data, subscribed, new_id, sub_event_id)
),
locked as (
  select c.id, c.email, c.subscribed, c.data from contacts c
  where c.project_id = $1 and c.email = any($2::text[])
  order by c.email for update of c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, $1, i.email, coalesce(i.subscribed, $7::boolean), i.set_data
  from input i where not exists (select 1 from locked l where l.email = i.email)
  order by i.email
  on conflict (project_id, email) do nothing
  returning email
),
changes as (
  select l.id, l.email, l.subscribed as old_subscribed, coalesce(i.subscribed, l.subscribed) as new_subscribed,
         l.data as old_data, l.data || i.set_data as new_data
  from locked l join input i on i.email = l.email
),
updated as (
  update contacts c set data = ch.new_data, subscribed = ch.new_subscribed, updated_at = now()
  from changes ch
  where c.id = ch.id and (ch.new_data <> ch.old_data or ch.new_subscribed <> ch.old_subscribed)
  returning c.id
),
sub_event as (
  insert into events (id, project_id, contact_id, name, data, source, created_at)
  select i.sub_event_id, $1, ch.id, case when ch.new_subscribed then 'contact.subscribed' else 'contact.unsubscribed' end,
         '{"via":"import"}'::jsonb, 'SYSTEM', now()
  from changes ch join input i on i.email = ch.email
  where ch.new_subscribed <> ch.old_subscribed
  returning id, contact_id, name, created_at
)
select (select count(*) from inserted)::int as created,
       (select count(*) from changes)::int as updated,
       (select coalesce(json_agg(i.email), '[]'::json) from input i
         where not exists (select 1 from inserted x where x.email = i.email) and not exists (select 1 from changes ch where ch.email = i.email)) as missed,
       (select coalesce(json_agg(json_build_object('id', id, 'contactId', contact_id, 'name', name, 'createdAt', created_at)), '[]'::json) from sub_event) as events`;

interface BatchResult {
  created: number;
  updated: number;
  missed: string[];
  events: { id: string; contactId: string; name: string; createdAt: string }[];
}

interface Upsert {
  email: string;
  subscribed?: boolean;
  data: Record<string, unknown>;
}

async function upsertBatch(c: PoolClient, projectId: string, defaultSubscribed: boolean, rows: Upsert[]): Promise<{ created: number; updated: number; events: RecordedEvent[] }> {
  let pending = rows;
  const total = { created: 0, updated: 0, events: [] as RecordedEvent[] };
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt === 3) throw new Error(`Contacts kept changing concurrently: ${pending.length} rows could not be written`);
    // Not a named prepared statement: a cached generic plan of this CTE scanned the project's contacts, so every chunk
    // got slower as the import grew; an unnamed statement is planned with the batch's values.
    const { rows: [r] } = await c.query<BatchResult>({
      text: IMPORT_BATCH_SQL,
      values: [
        projectId,
        pending.map((p) => p.email),
        pending.map((p) => JSON.stringify(p.data)),
        pending.map((p) => p.subscribed ?? null),
        pending.map(() => uuidv7()),
        pending.map(() => uuidv7()),
        defaultSubscribed,
      ],
    });
    total.created += r!.created;
    total.updated += r!.updated;
    for (const e of r!.events) {
      total.events.push({ id: e.id, projectId, contactId: e.contactId, name: e.name, source: 'SYSTEM', data: { via: 'import' }, createdAt: new Date(e.createdAt) });
    }
    const missed = new Set(r!.missed);
    pending = pending.filter((p) => missed.has(p.email));
  }
  return total;
}

/**
 * Commits one chunk: its upserts, its counters and the position after it, in one transaction guarded by the chunk's
 * row in job_chunks, so a chunk is applied exactly once however often an activity is retried. Returns false when the
 * chunk was already committed (by an earlier attempt that is still running or just finished).
 */
async function commitChunk(em: EntityManager, job: JobRow, chunk: number, rows: CsvRow[]): Promise<{ applied: boolean; events: RecordedEvent[] }> {
  // Last row wins for an email seen twice in the chunk; the earlier ones count as skipped (duplicates).
  const byEmail = new Map<string, Upsert>();
  const errors: RowError[] = [];
  let duplicates = 0;
  for (const row of rows) {
    if (row.error || !row.email) {
      errors.push({ line: row.line, ...(row.email ? { email: row.email } : {}), message: row.error ?? 'Missing email' });
      continue;
    }
    if (byEmail.delete(row.email)) duplicates++;
    byEmail.set(row.email, { email: row.email, subscribed: row.subscribed, data: row.data });
  }
  const last = rows[rows.length - 1]!;
  return withTransaction(em, async (c) => {
    // The chunk's position is committed with its rows: a chunk lost in a database crash is simply imported again,
    // so waiting for the WAL flush buys nothing here.
    await c.query('set local synchronous_commit = off');
    const claimed = await c.query('insert into job_chunks (job_id, chunk, rows) values ($1, $2, $3) on conflict do nothing returning chunk', [job.id, chunk, rows.length]);
    if (claimed.rowCount === 0) return { applied: false, events: [] };
    const r = byEmail.size > 0 ? await upsertBatch(c, job.projectId, job.options.subscribed ?? true, [...byEmail.values()]) : { created: 0, updated: 0, events: [] };
    await c.query(
      `update jobs set processed = processed + $2, created = created + $3, updated = updated + $4, skipped = skipped + $5,
         failed = failed + $6,
         errors = errors || coalesce((select jsonb_agg(e) from (select e from jsonb_array_elements($7::jsonb) e
                                       limit greatest(0, $8 - jsonb_array_length(jobs.errors))) s), '[]'::jsonb),
         next_offset = $9, next_line = $10, next_chunk = $11 + 1
       where id = $1`,
      [job.id, rows.length, r.created, r.updated, duplicates, errors.length, JSON.stringify(errors), MAX_STORED_ROW_ERRORS, last.endOffset, last.endLine, chunk],
    );
    return { applied: true, events: r.events };
  });
}

async function loadFile(em: EntityManager, jobId: string): Promise<Buffer> {
  const rows = await em.execute<{ content: Buffer }[]>('select content from contact_import_files where job_id = ?', [jobId]);
  if (!rows[0]) throw new CsvRejected('The uploaded file is gone');
  return rows[0].content;
}

/** QUEUED -> RUNNING after checking the header. A file that is not a usable CSV throws CsvRejected (the caller fails the job). */
export async function startImport(em: EntityManager, jobId: string): Promise<{ running: boolean }> {
  const job = await markJobRunning(em, jobId);
  if (!job) return { running: false };
  readLayout(await loadFile(em, jobId), job.options.mapping);
  return { running: true };
}

/**
 * Imports chunks from the job's committed position until the file ends, `deadline` passes or `shouldStop` says so.
 * The rest of the file is parsed before anything is written, so a malformed file fails before its first chunk; the
 * first run also sets `total`. `onChunk` is called after each committed chunk (activities heartbeat there).
 */
export async function importChunks(
  em: EntityManager,
  input: { jobId: string; deadline: number; batchSize?: number; shouldStop?: () => boolean; onChunk?: (chunk: number) => void },
): Promise<{ done: boolean }> {
  const batchSize = input.batchSize ?? IMPORT_BATCH_SIZE;
  const job = await markJobRunning(em, input.jobId);
  if (!job) return { done: true }; // finished (e.g. cancelled) meanwhile
  const file = await loadFile(em, input.jobId);
  const layout = readLayout(file, job.options.mapping);
  const first = job.nextOffset === 0;
  const rows = csvRows(file, layout, first ? layout.dataOffset : job.nextOffset, first ? layout.headerEndLine : job.nextLine);
  if (first) await markJobRunning(em, input.jobId, rows.length);
  for (let i = 0, chunk = job.nextChunk; i < rows.length; i += batchSize, chunk++) {
    const { applied, events } = await commitChunk(em, job, chunk, rows.slice(i, i + batchSize));
    // A chunk committed by someone else means our position is stale: return and let the caller read it again.
    if (!applied) return { done: false };
    await dispatchEvents(events);
    input.onChunk?.(chunk);
    if (i + batchSize < rows.length && (Date.now() > input.deadline || input.shouldStop?.())) return { done: false };
  }
  return { done: true };
}

/** RUNNING -> COMPLETED, after the last chunk. */
export async function completeImport(em: EntityManager, jobId: string): Promise<void> {
  await finishJob(em, jobId, 'COMPLETED');
}

export type { ImportOptions };
