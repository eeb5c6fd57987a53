import type { EntityManager } from '@mikro-orm/postgresql';
import { uuidv7s } from '../ids';
import { capsInForce, type BillingConfig } from '../billing/billing.service';
import { finishJob, markJobRunning, type JobRow, type RowError } from '../jobs/job.service';
import { sql, statement, transaction, type Sql } from '../db/sql';
import { eventDataSql } from '../events/event-writer';
import { CONTACT_ROW_LOCK, contactChanged, mergedData, mergedSubscribed, newSubscribed, subscriptionEventSql } from './contact-merge';
import { countContacts } from './contact-counts';
import { byteOffset, CsvRejected, csvText, MAX_STORED_ROW_ERRORS, readLayout, rowData, rowHead, scanRecords, type CsvLayout, type CsvText, type RowHead } from './contact-import-csv';
import type { ContactData } from './contact.entity';

/**
 * Rows per chunk. Chunk k is records k*1000 .. k*1000+999 of the file and is committed once, with its job_chunks row,
 * so this number must stay the same while imports run (the first version used 1000 too).
 */
const IMPORT_BATCH_SIZE = 1000;

/**
 * Chunks written at the same time, each in its own transaction on its own connection. Their emails never overlap (the
 * file is de-duplicated before the first chunk), so they lock different contacts; Postgres then uses both cores.
 */
const IMPORT_WRITERS = 2;

/**
 * Many contacts in one statement, with the merge rule of every contact write (contact-merge.ts): existing
 * contacts are locked in email order, the missing ones inserted, data merged (`data || set`; CSV cells never delete),
 * subscription changed only where the row says so, and contact.subscribed / contact.unsubscribed recorded for a real
 * change of an existing contact. Existing contacts come with their id (found for the whole file before the first
 * chunk) and are locked by it; new ones are inserted with ON CONFLICT. Neither lets the planner scan the project's
 * contacts: with statistics that lag behind a project growing by thousands of rows a second, it chose to, on every
 * chunk. A row whose contact appeared, vanished or changed email since the lookup comes back in `missed`.
 */
const IMPORT_BATCH_SQL = statement('contact_import_batch', `
with input as (
  select e as email, d as data, s as subscribed, c as contact_id, n as new_id, v as event_id
  from jsonb_to_recordset($2::jsonb) as t(e text, d jsonb, s boolean, c uuid, n uuid, v uuid)
),
locked as (
  select c.id, c.email, c.subscribed as old_subscribed, ${mergedSubscribed('c.subscribed', 'i.subscribed')} as new_subscribed,
         c.data as old_data, ${mergedData('c.data', 'i.data', `'{}'::text[]`)} as new_data, i.event_id
  from (select * from input where contact_id is not null order by email) i
  cross join lateral (
    select c.id, c.email, c.subscribed, c.data from contacts c
    where c.id = i.contact_id and c.project_id = $1 and c.email = i.email
    limit 1 ${CONTACT_ROW_LOCK}
  ) c
),
inserted as (
  insert into contacts (id, project_id, email, subscribed, data)
  select i.new_id, $1, i.email, ${newSubscribed('i.subscribed', '$3::boolean')}, i.data from input i where i.contact_id is null
  order by i.email
  on conflict (project_id, email) do nothing
  returning email
),
updated as (
  update contacts c set data = l.new_data, subscribed = l.new_subscribed, updated_at = now()
  from locked l
  where c.id = l.id and ${contactChanged({ oldData: 'l.old_data', newData: 'l.new_data', oldSubscribed: 'l.old_subscribed', newSubscribed: 'l.new_subscribed' })}
  returning c.id
),
sub_event as (
  ${subscriptionEventSql(
    { id: 'l.event_id', projectId: '$1', contactId: 'l.id', newSubscribed: 'l.new_subscribed', data: eventDataSql('contact.subscribed', { via: `'import'` }) },
    'from locked l where l.new_subscribed <> l.old_subscribed',
  )}
),
counts as (select (select count(*) from inserted)::int as created, (select count(*) from locked)::int as updated, (select count(*) from input)::int as given)
select created, updated,
       case when created + updated = given then '[]'::json
            else (select coalesce(json_agg(i.email), '[]'::json) from input i
                  where not exists (select 1 from inserted x where x.email = i.email) and not exists (select 1 from locked l where l.email = i.email)) end as missed
from counts`, { prepare: false });

interface BatchResult {
  created: number;
  updated: number;
  missed: string[];
}

interface Upsert {
  email: string;
  subscribed?: boolean;
  data: ContactData;
  /** The existing contact with this email, if any. */
  contactId?: string;
  /** The file line of the row (for its row error). */
  line: number;
}

const FIND_BY_EMAIL_SQL = 'select id, email from contacts where project_id = $1 and email = any($2::text[])';

async function upsertBatch(tx: Sql, projectId: string, defaultSubscribed: boolean, rows: Upsert[]): Promise<{ created: number; updated: number }> {
  let pending = rows;
  const total = { created: 0, updated: 0 };
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt === 3) throw new Error(`Contacts kept changing concurrently: ${pending.length} rows could not be written`);
    // Short keys, and absent values left out (null in SQL): the JSON is built, sent and parsed for every row.
    const ids = uuidv7s(pending.length);
    const input = pending.map((p, i) => ({
      e: p.email,
      d: p.data,
      s: p.subscribed,
      c: p.contactId,
      // A new contact's id, or the id of the subscription event an existing contact's row may cause.
      n: p.contactId ? undefined : ids[i],
      v: p.contactId && p.subscribed !== undefined ? ids[i] : undefined,
    }));
    // An unnamed statement: planned for each chunk with the table's current size (a plan cached while the table was
    // small would keep scanning it once it is large).
    const r = await tx.one<BatchResult>(IMPORT_BATCH_SQL, [projectId, JSON.stringify(input), defaultSubscribed]);
    total.created += r!.created;
    total.updated += r!.updated;
    if (r!.missed.length === 0) break;
    // Someone else created, deleted or re-addressed these contacts since the lookup: find them again (a few rows).
    const missed = new Set(r!.missed);
    const found = await tx.query<{ id: string; email: string }>(FIND_BY_EMAIL_SQL, [projectId, r!.missed]);
    const byEmail = new Map(found.map((f) => [f.email, f.id]));
    pending = pending.filter((p) => missed.has(p.email)).map((p) => ({ ...p, contactId: byEmail.get(p.email) }));
  }
  return total;
}

/**
 * The existing contacts among the file's emails, found once per run. Neither way depends on statistics, which lag
 * behind a project that grows by thousands of contacts a second (a row-by-row plan chosen on them read the project's
 * contacts once per email): a project no larger than twice the file is read whole, a larger one is probed in its
 * unique (project, email) index.
 */
async function findExisting(em: EntityManager, projectId: string, projectSize: number, emails: string[]): Promise<Map<string, string>> {
  if (emails.length === 0 || projectSize === 0) return new Map();
  return transaction(em, async (tx) => {
    const found = new Map<string, string>();
    if (projectSize > 2 * emails.length) {
      for (const r of await tx.query<{ id: string; email: string }>(FIND_BY_EMAIL_SQL, [projectId, emails])) found.set(r.email, r.id);
      return found;
    }
    const wanted = new Set(emails);
    const rows = await tx.query<{ id: string; email: string }>('select id, email from contacts where project_id = $1', [projectId]);
    for (const r of rows) if (wanted.has(r.email)) found.set(r.email, r.id);
    return found;
  });
}

/**
 * What every chunk of one run needs. The file is scanned once up front, keeping per record only what de-duplication
 * and progress need; a chunk tokenizes its own records again for their data, so the fields of 50,000 rows are not held
 * (and moved by the garbage collector) for the whole import.
 */
interface ImportPlan {
  job: JobRow;
  layout: CsvLayout;
  src: CsvText;
  /** Per record: its email and subscribed or its error; the character after it and the line there; its last line. */
  heads: RowHead[];
  ends: number[];
  linesAfter: number[];
  endLines: number[];
  /** Byte offset after each chunk (the position columns of the job). */
  chunkEnds: number[];
  /** Index of the last valid row of each email: an earlier row with that email is superseded (skipped). */
  lastRow: Map<string, number>;
  existing: Map<string, string>;
  /** The project's contacts cap when the run was planned (null: none): rows that would pass it fail. */
  contactsCap: number | null;
}

class JobEnded extends Error {}

/**
 * Commits one chunk: its upserts, its counters and its job_chunks row, in one transaction, so a chunk is applied
 * exactly once however often an activity is retried. 'taken' when the chunk was already committed (by an earlier
 * attempt that is still running or just finished); 'ended' when the job is no longer RUNNING (cancelled or failed):
 * then nothing of the chunk is written.
 */
async function commitChunk(em: EntityManager, plan: ImportPlan, chunk: number): Promise<'committed' | 'taken' | 'ended'> {
  const { job, heads, lastRow, existing } = plan;
  const from = chunk * IMPORT_BATCH_SIZE;
  const to = Math.min(from + IMPORT_BATCH_SIZE, heads.length);
  const errors: RowError[] = [];
  let upserts: Upsert[] = [];
  let skipped = 0;
  let i = from;
  const start = from === 0 ? 0 : plan.ends[from - 1]!;
  const line = from === 0 ? plan.layout.headerEndLine + 1 : plan.linesAfter[from - 1]!;
  scanRecords(
    plan.src,
    start,
    line,
    (fields) => {
      const h = heads[i]!;
      if (h.error) errors.push({ line: h.line, ...(h.email ? { email: h.email } : {}), message: h.error });
      else if (lastRow.get(h.email!) !== i) skipped++; // a later row with this email wins
      else upserts.push({ email: h.email!, subscribed: h.subscribed, data: rowData(plan.layout, fields), contactId: existing.get(h.email!), line: h.line });
      i++;
    },
    to - from,
  );
  if (i !== to) throw new Error(`Chunk ${chunk} of job ${job.id} has ${i - from} records, ${to - from} expected`);
  try {
    return await transaction(
      em,
      async (tx) => {
        const claimed = await tx.run('insert into job_chunks (job_id, chunk, rows) values ($1, $2, $3) on conflict do nothing', [job.id, chunk, to - from]);
        if (claimed === 0) return 'taken' as const;
        if (plan.contactsCap !== null) upserts = await keepWithinContactsCap(em, tx, job.projectId, plan.contactsCap, upserts, errors);
        const r = upserts.length > 0 ? await upsertBatch(tx, job.projectId, job.options.subscribed ?? true, upserts) : { created: 0, updated: 0 };
        // Chunks commit in any order: the stored errors are the lowest lines seen so far, so in the end the file's first
        // ones; the position columns say how far the import has reached.
        const updated = await tx.run(
          `update jobs set processed = processed + $2, created = created + $3, updated = updated + $4, skipped = skipped + $5, failed = failed + $6,
             errors = case when $7::jsonb = '[]'::jsonb then errors else
               (select coalesce(jsonb_agg(e order by (e->>'line')::int), '[]'::jsonb)
                from (select e from jsonb_array_elements(errors || $7::jsonb) e order by (e->>'line')::int limit $8) s) end,
             next_offset = greatest(next_offset, $9), next_line = greatest(next_line, $10), next_chunk = greatest(next_chunk, $11 + 1)
           where id = $1 and status = 'RUNNING'`,
          [job.id, to - from, r.created, r.updated, skipped, errors.length, JSON.stringify(errors), MAX_STORED_ROW_ERRORS, plan.chunkEnds[chunk], plan.endLines[to - 1], chunk],
        );
        // Cancelled or failed meanwhile: roll the chunk back, so nothing lands after the job ended.
        if (updated === 0) throw new JobEnded();
        return 'committed' as const;
      },
      // A chunk lost in a database crash is simply imported again (its job_chunks row goes with it), so waiting for
      // the WAL flush buys nothing here.
      { synchronousCommit: false },
    );
  } catch (err) {
    if (err instanceof JobEnded) return 'ended';
    throw err;
  }
}

/**
 * The upserts of a chunk that stay within the project's contacts cap: the new contacts that would pass it become row
 * errors (the rows before them are created; updates of existing contacts always go through). Chunks of the project
 * count one at a time here (a transaction-scoped advisory lock), so concurrent writers cannot pass the cap together.
 */
async function keepWithinContactsCap(em: EntityManager, tx: Sql, projectId: string, cap: number, upserts: Upsert[], errors: RowError[]): Promise<Upsert[]> {
  if (!upserts.some((u) => !u.contactId)) return upserts;
  await tx.run(`select pg_advisory_xact_lock(hashtext('contacts-cap:' || $1))`, [projectId]);
  // Read after the lock: every chunk that held it before has committed, so its contacts are counted.
  let room = Math.max(cap - (await countContacts(em, projectId)), 0);
  return upserts.filter((u) => {
    if (u.contactId || room-- > 0) return true;
    errors.push({ line: u.line, email: u.email, message: `The project's contacts cap (${cap}) is reached: the contact was not created` });
    return false;
  });
}

async function loadFile(em: EntityManager, jobId: string): Promise<Buffer> {
  const rows = await sql(em).query<{ content: Buffer }>('select content from contact_import_files where job_id = $1', [jobId]);
  if (!rows[0]) throw new CsvRejected('The uploaded file is gone');
  return rows[0].content;
}

/**
 * QUEUED -> RUNNING. The file was checked at upload and importChunks reads it whole before writing anything, so an
 * unusable file still fails the job before its first row (without loading 5 MB one more time here).
 */
export async function startImport(em: EntityManager, jobId: string): Promise<{ running: boolean }> {
  return { running: (await markJobRunning(em, jobId)) !== null };
}

/**
 * Reads the whole file and plans the run: a malformed file throws CsvRejected before anything is written, `total` is
 * set, duplicate emails are resolved (the last valid row wins) and the file's existing contacts are looked up.
 * Returns null when every chunk is committed already.
 */
async function planImport(em: EntityManager, job: JobRow, billing: BillingConfig): Promise<{ plan: ImportPlan; pending: number[] } | null> {
  const [file, committed, projectSize, caps] = await Promise.all([
    loadFile(em, job.id),
    sql(em).query<{ chunk: number }>('select chunk from job_chunks where job_id = $1', [job.id]),
    countContacts(em, job.projectId),
    capsInForce(em, billing, job.projectId),
  ]);
  const layout = readLayout(file, job.options.mapping);
  const src = csvText(file, layout);
  const heads: RowHead[] = [];
  const ends: number[] = [];
  const linesAfter: number[] = [];
  const endLines: number[] = [];
  scanRecords(src, 0, layout.headerEndLine + 1, (fields, at) => {
    heads.push(rowHead(layout, fields, at.line));
    ends.push(at.end);
    linesAfter.push(at.lineAfter);
    endLines.push(at.endLine);
  });
  const lastRow = new Map<string, number>();
  heads.forEach((h, i) => {
    if (!h.error) lastRow.set(h.email!, i);
  });
  const chunkEnds: number[] = [];
  for (let k = 0, char = 0, bytes = src.offset; k * IMPORT_BATCH_SIZE < heads.length; k++) {
    const end = ends[Math.min((k + 1) * IMPORT_BATCH_SIZE, heads.length) - 1]!;
    bytes = byteOffset(src, end, char, bytes);
    char = end;
    chunkEnds.push(bytes);
  }
  const done = new Set(committed.map((c) => c.chunk));
  const pending: number[] = [];
  for (let k = 0; k < chunkEnds.length; k++) if (!done.has(k)) pending.push(k);
  if (pending.length === 0) return null;
  const emails: string[] = [];
  for (const k of pending) {
    for (let i = k * IMPORT_BATCH_SIZE; i < Math.min((k + 1) * IMPORT_BATCH_SIZE, heads.length); i++) {
      const h = heads[i]!;
      if (!h.error && lastRow.get(h.email!) === i) emails.push(h.email!);
    }
  }
  const [existing] = await Promise.all([
    findExisting(em, job.projectId, projectSize, emails),
    job.total === heads.length ? undefined : markJobRunning(em, job.id, heads.length),
  ]);
  return { plan: { job, layout, src, heads, ends, linesAfter, endLines, chunkEnds, lastRow, existing, contactsCap: caps.contacts }, pending };
}

/**
 * Imports the chunks not committed yet, IMPORT_WRITERS at a time, until all are committed (then the job is COMPLETED),
 * `deadline` passes or `shouldStop` says so (then `done` is false and the caller runs it again). A chunk committed by
 * someone else (a retried attempt running in parallel) also returns `done: false`, so the caller re-reads the state.
 * `onChunk` is called after each committed chunk (activities heartbeat there).
 */
export async function importChunks(
  em: EntityManager,
  input: { jobId: string; deadline: number; billing: BillingConfig; shouldStop?: () => boolean; onChunk?: (chunk: number) => void },
): Promise<{ done: boolean }> {
  const job = await markJobRunning(em, input.jobId);
  if (!job) return { done: true }; // finished (e.g. cancelled) meanwhile
  const planned = await planImport(em, job, input.billing);
  if (!planned) {
    await finishJob(em, job.id, 'COMPLETED');
    return { done: true };
  }
  const { plan, pending } = planned;
  let next = 0;
  let stop: 'time' | 'taken' | 'ended' | 'error' | undefined;
  const writer = async () => {
    try {
      while (!stop && next < pending.length) {
        if (next > 0 && (Date.now() > input.deadline || input.shouldStop?.())) {
          stop = 'time';
          break;
        }
        const chunk = pending[next++]!;
        const state = await commitChunk(em, plan, chunk);
        if (state !== 'committed') {
          stop ??= state;
          break;
        }
        input.onChunk?.(chunk);
      }
    } catch (err) {
      stop = 'error';
      throw err;
    }
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(IMPORT_WRITERS, pending.length) }, writer));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
  if (stop === 'ended') return { done: true };
  if (stop) return { done: false };
  // Every chunk is committed: complete here rather than in one more activity.
  await finishJob(em, job.id, 'COMPLETED');
  return { done: true };
}

/** RUNNING -> COMPLETED, after the last chunk (importChunks completes the job itself; this keeps the step explicit). */
export async function completeImport(em: EntityManager, jobId: string): Promise<void> {
  await finishJob(em, jobId, 'COMPLETED');
}

