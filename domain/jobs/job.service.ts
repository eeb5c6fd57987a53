import type { EntityManager } from '@mikro-orm/postgresql';
import { Sql, sql, transaction } from '../db/sql';
import { uuidv7 } from '../ids';
import { persistThenStart, recordThenTell } from '../workflow-start';
import { conflict, notFound } from '../errors';

/**
 * Import and bulk contact jobs. States:
 *   QUEUED    the job row (and its input) is stored and its workflow started
 *   RUNNING   the workflow picked it up (startedAt set)
 *   COMPLETED every row / id was processed (row errors are counted, they do not fail a job)
 *   FAILED    the input as a whole is unusable (malformed CSV) or the job could not run; `message` says why
 *   CANCELLED cancelled through the API or in Temporal Web UI; what was committed before stays (an import keeps the
 *             chunks committed before, a bulk job is one transaction: applied completely or not at all)
 * Transitions: QUEUED -> RUNNING -> COMPLETED | FAILED | CANCELLED, and QUEUED -> FAILED | CANCELLED.
 * Finished states are final.
 */
type JobStatus = 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
export type BulkJobType = 'BULK_SUBSCRIBE' | 'BULK_UNSUBSCRIBE' | 'BULK_DELETE';
type JobType = 'IMPORT' | BulkJobType;

export interface RowError {
  line: number;
  email?: string;
  message: string;
}

export interface ImportOptions {
  mapping?: Record<string, string>;
  /** For new contacts whose row has no subscribed value (default true). */
  subscribed?: boolean;
}

export interface JobRow {
  id: string;
  projectId: string;
  type: JobType;
  status: JobStatus;
  options: ImportOptions;
  total: number;
  processed: number;
  created: number;
  updated: number;
  changed: number;
  skipped: number;
  failed: number;
  errors: RowError[];
  message: string | null;
  /**
   * How far an import has reached: the byte offset and line after its furthest committed chunk, and that chunk + 1.
   * Chunks commit in any order (several at a time); job_chunks says which ones are done.
   */
  nextOffset: number;
  nextLine: number;
  nextChunk: number;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}

const JOB_COLUMNS = `id, project_id as "projectId", type, status, options, total, processed, created, updated, changed, skipped, failed,
  errors, message, next_offset as "nextOffset", next_line as "nextLine", next_chunk as "nextChunk", created_at as "createdAt",
  started_at as "startedAt", finished_at as "finishedAt"`;

/** Starts and cancels job workflows (TemporalGateway implements it). */
export interface JobRunner {
  startContactImport(input: { projectId: string; jobId: string }): Promise<string>;
  startContactBulk(input: { projectId: string; jobId: string }): Promise<string>;
  /** Requests cancellation of the job's workflow; one that is not running is fine. */
  cancelContactJob(input: { kind: 'import' | 'bulk'; jobId: string }): Promise<void>;
}

/** Stores an import job with its file, then starts its workflow; one that cannot start is FAILED and the caller gets 503. */
export function submitImportJob(em: EntityManager, runner: JobRunner, input: { projectId: string; fileName?: string; content: Buffer; options: ImportOptions }): Promise<string> {
  return persistThenStart({
    persist: () => createImportJob(em, input),
    start: (jobId) => runner.startContactImport({ projectId: input.projectId, jobId }),
    compensate: (jobId) => finishJob(em, jobId, 'FAILED', 'The job could not be queued'),
    unavailable: 'The job could not be queued; try again',
    log: { projectId: input.projectId, job: 'IMPORT' },
  });
}

/** Stores a bulk job, then starts its workflow; one that cannot start is FAILED and the caller gets 503. */
export function submitBulkJob(em: EntityManager, runner: JobRunner, input: { projectId: string; type: BulkJobType; contactIds: string[] }): Promise<string> {
  return persistThenStart({
    persist: () => createBulkJob(em, input),
    start: (jobId) => runner.startContactBulk({ projectId: input.projectId, jobId }),
    compensate: (jobId) => finishJob(em, jobId, 'FAILED', 'The job could not be queued'),
    unavailable: 'The job could not be queued; try again',
    log: { projectId: input.projectId, job: input.type },
  });
}

/** Stores an import job and its file in one transaction (before the workflow starts, so a worker always finds it). */
async function createImportJob(em: EntityManager, input: { projectId: string; fileName?: string; content: Buffer; options: ImportOptions }): Promise<string> {
  const id = uuidv7();
  await transaction(em, async (tx) => {
    await tx.run(`insert into jobs (id, project_id, type, options) values ($1, $2, 'IMPORT', $3)`, [id, input.projectId, JSON.stringify(input.options)]);
    await tx.run(`insert into contact_import_files (job_id, file_name, content) values ($1, $2, $3)`, [id, input.fileName ?? null, input.content]);
  });
  return id;
}

/** Stores a bulk job with its (deduplicated) contact ids. */
async function createBulkJob(em: EntityManager, input: { projectId: string; type: BulkJobType; contactIds: string[] }): Promise<string> {
  const id = uuidv7();
  const ids = [...new Set(input.contactIds.map((i) => i.toLowerCase()))];
  await sql(em).query(`insert into jobs (id, project_id, type, contact_ids, total) values ($1, $2, $3, $4::uuid[], $5)`, [id, input.projectId, input.type, `{${ids.join(',')}}`, ids.length]);
  return id;
}

/** A job of the project, or null (another project's job is not found). */
async function findJob(db: EntityManager | Sql, projectId: string | null, jobId: string): Promise<JobRow | null> {
  const rows = await (db instanceof Sql ? db : sql(db)).query<JobRow>(
    `select ${JOB_COLUMNS} from jobs where id = $1 ${projectId ? 'and project_id = $2' : ''}`,
    projectId ? [jobId, projectId] : [jobId],
  );
  return rows[0] ?? null;
}

export async function getJob(em: EntityManager, projectId: string, jobId: string, kind: 'import' | 'bulk'): Promise<JobRow> {
  const job = await findJob(em, projectId, jobId);
  if (!job || (kind === 'import') !== (job.type === 'IMPORT')) throw notFound(kind === 'import' ? 'Import job' : 'Bulk job');
  return job;
}

/** QUEUED -> RUNNING (idempotent: a retried activity finds it RUNNING). Returns the job, or null when it is finished. */
export async function markJobRunning(em: EntityManager, jobId: string, total?: number): Promise<JobRow | null> {
  const rows = await sql(em).query<JobRow>(
    `update jobs set status = 'RUNNING', started_at = coalesce(started_at, now()), total = coalesce($1, total)
     where id = $2 and status in ('QUEUED', 'RUNNING') returning ${JOB_COLUMNS}`,
    [total ?? null, jobId],
  );
  return rows[0] ?? null;
}

/** Ends a job that is not finished yet; a finished job keeps its state. */
export async function finishJob(em: EntityManager, jobId: string, status: 'COMPLETED' | 'FAILED' | 'CANCELLED', message?: string): Promise<void> {
  await sql(em).query(
    `update jobs set status = $1, message = coalesce($2, message), finished_at = now() where id = $3 and status in ('QUEUED', 'RUNNING')`,
    [status, message ?? null, jobId],
  );
}

/** 409 for a job that already ended: cancelling it changes nothing. */
const jobEnded = (j: Pick<JobRow, 'status'>) =>
  conflict('JOB_ENDED', `The job already ended (${j.status}); only a QUEUED or RUNNING job can be cancelled`);

/**
 * `POST /contacts/import/:jobId/cancel` and `POST /contacts/bulk/:jobId/cancel`: QUEUED | RUNNING -> CANCELLED and
 * the job's workflow cancelled, as one unit (`recordThenTell`): if Temporal cannot be reached the job is unchanged and
 * the caller gets 503. Chunks commit only while their job is RUNNING, so nothing is written after this returns. A job
 * that has ended is 409 JOB_ENDED, except one that became CANCELLED while this request ran (its workflow's
 * cancellation got there first), which is returned as it is; another project's job, or one of the other kind, 404.
 */
export async function cancelJob(em: EntityManager, runner: Pick<JobRunner, 'cancelContactJob'>, projectId: string, jobId: string, kind: 'import' | 'bulk'): Promise<JobRow> {
  const current = await getJob(em, projectId, jobId, kind); // 404 for the other kind's id
  if (current.status !== 'QUEUED' && current.status !== 'RUNNING') throw jobEnded(current);
  const message = kind === 'import' ? 'The import was cancelled' : 'The bulk job was cancelled';
  const { job, changed } = await recordThenTell(em, {
    record: async (tx) => {
      const [row] = await tx.query<JobRow>(
        `update jobs set status = 'CANCELLED', message = $1, finished_at = now()
         where id = $2 and project_id = $3 and status in ('QUEUED', 'RUNNING') returning ${JOB_COLUMNS}`,
        [message, jobId, projectId],
      );
      return { job: row ?? (await findJob(tx, projectId, jobId)), changed: row !== undefined };
    },
    skipTell: (r) => !r.changed,
    tell: () => runner.cancelContactJob({ kind, jobId }),
    unavailable: 'The job could not be cancelled (Temporal is unavailable); it is unchanged, try again',
    log: { projectId, jobId },
  });
  if (!job) throw notFound(kind === 'import' ? 'Import job' : 'Bulk job');
  if (changed || job.status === 'CANCELLED') return job;
  throw jobEnded(job);
}
