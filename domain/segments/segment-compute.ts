import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { AppError, notFound, serviceUnavailable } from '../errors';
import { logger } from '../logger';
import { DEFAULT_SEGMENT_RECOMPUTE_MINUTES } from '../projects/project.entity';
import { computeSegment, type ComputeResult } from './segment.service';

/**
 * A segment's compute runs in a Temporal workflow, `segment-compute/<segmentId>`, started by
 * `POST /segments/:id/compute` or by the recompute sweep; the workflow id is the segment's, so one segment never has
 * two computes at once (a start while one runs joins it). The last compute's state is kept on the segment's row:
 *   RUNNING    a run started (`runId`: its Temporal run id)
 *   COMPLETED  the compute committed, with `result`
 *   FAILED     it could not run (the segment was deleted meanwhile, the database failed past the retries, an operator
 *              cancelled it); `error` says why
 * Each run writes its own state: RUNNING when it starts, then COMPLETED in the compute's own transaction, or FAILED.
 */
type SegmentComputeStatus = 'RUNNING' | 'COMPLETED' | 'FAILED';

export interface SegmentCompute {
  segmentId: string;
  runId: string;
  status: SegmentComputeStatus;
  result: ComputeResult | null;
  error: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

const COMPUTE_COLUMNS = `id as "segmentId", compute_run_id as "runId", compute_status as status, compute_result as result,
  compute_error as error, compute_started_at as "startedAt", compute_finished_at as "finishedAt"`;

/** Starts compute workflows (TemporalGateway implements it). */
export interface SegmentComputeRunner {
  /** Starts `segment-compute/<segmentId>`, or joins the run in progress; returns that run's id. */
  startSegmentCompute(input: { projectId: string; segmentId: string }): Promise<string>;
  /** Waits for a run to close, whatever its outcome (briefly: it is called for runs that have finished their work). */
  awaitSegmentCompute(input: { segmentId: string; runId: string }): Promise<void>;
}

/** The row's compute columns (`runId` null: never computed) and the database's time of the read. */
type ComputeRow = (SegmentCompute | (Omit<SegmentCompute, 'runId'> & { runId: null })) & { readAt: Date };

async function readCompute(em: EntityManager, projectId: string, segmentId: string): Promise<ComputeRow> {
  const [r] = await sql(em).query<ComputeRow>(
    `select ${COMPUTE_COLUMNS}, statement_timestamp() as "readAt" from segments where id = $1 and project_id = $2`,
    [segmentId, projectId],
  );
  if (!r) throw notFound('Segment');
  return r;
}

/** The last compute of a segment; 404 for an unknown segment, and for one that was never computed. */
export async function getSegmentCompute(em: EntityManager, projectId: string, segmentId: string): Promise<SegmentCompute> {
  const r = await readCompute(em, projectId, segmentId);
  const { readAt: _readAt, ...compute } = r;
  if (compute.runId === null) {
    throw new AppError(404, 'NOT_FOUND', 'The segment has not been computed yet', { suggestion: 'POST /segments/:id/compute starts a compute.' });
  }
  return compute;
}

/** Joining a run that has already recorded its end is retried this many times with a new run. */
const CLOSING_RUN_RETRIES = 3;

/**
 * Starts the segment's compute, or joins the one in progress, and returns its state (RUNNING, or already COMPLETED
 * when it was quick).
 * - A run records RUNNING itself when its activity starts; this records it too, so a poll right after the answer sees
 *   the new run rather than the previous one. Only if the row still names the run seen before (a late write never
 *   replaces the state of a run that started or finished meanwhile), and only if the row is not locked (a compute holds
 *   it for its whole statement; the request does not wait for that).
 * - A run that has recorded its end stays open for a moment while its workflow completes; a start then joins it. If
 *   it started before this request (its compute may not see what changed just before the request), it is waited for
 *   and a new run started.
 * - Nothing is stored before the start, so a start that fails (Temporal unreachable) leaves nothing behind: 503.
 */
export async function requestSegmentCompute(em: EntityManager, runner: SegmentComputeRunner, projectId: string, segmentId: string): Promise<SegmentCompute> {
  let seen = await readCompute(em, projectId, segmentId);
  const requestedAt = seen.readAt;
  const temporal = async <T>(call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (err) {
      logger.error({ err, segmentId }, 'could not start a segment compute');
      throw serviceUnavailable('The compute could not be started; nothing was done');
    }
  };
  let runId = await temporal(() => runner.startSegmentCompute({ projectId, segmentId }));
  for (let retry = 0; ; retry++) {
    if (runId !== seen.runId) {
      const [recorded] = await sql(em).query<SegmentCompute>(
        `update segments set compute_run_id = $1, compute_status = 'RUNNING', compute_started_at = now(), compute_finished_at = null,
           compute_result = null, compute_error = null
         where id = (select id from segments where id = $2 and compute_run_id is not distinct from $3 for no key update skip locked)
         returning ${COMPUTE_COLUMNS}`,
        [runId, segmentId, seen.runId],
      );
      if (recorded) return recorded;
    }
    const current = await readCompute(em, projectId, segmentId);
    if (current.runId === runId && current.status !== 'RUNNING' && current.startedAt < requestedAt && retry < CLOSING_RUN_RETRIES) {
      const closing = runId;
      await temporal(() => runner.awaitSegmentCompute({ segmentId, runId: closing }));
      seen = current;
      runId = await temporal(() => runner.startSegmentCompute({ projectId, segmentId }));
      continue;
    }
    if (current.runId !== null && (current.runId !== seen.runId || runId === seen.runId)) {
      const { readAt: _readAt, ...compute } = current;
      return compute;
    }
    // The row was busy and the run has not recorded itself yet: it will when its activity starts.
    return { segmentId, runId, status: 'RUNNING', result: null, error: null, startedAt: new Date(), finishedAt: null };
  }
}

/**
 * One run's compute: records the run as RUNNING (unless the API did), recomputes (`computeSegment`: the diff, the
 * membership and the entry/exit events in one statement, under the segment's row lock) and records COMPLETED with the
 * result in the same transaction, so the state can never say COMPLETED for changes that were not committed, nor
 * RUNNING for ones that were. A retry after a crash computes again.
 */
export async function runSegmentCompute(em: EntityManager, input: { projectId: string; segmentId: string; runId: string }): Promise<ComputeResult> {
  // No other run of the segment can be open while this one is, so this run's id is the newest.
  await sql(em).query(
    `update segments set compute_run_id = $1, compute_status = 'RUNNING', compute_started_at = now(), compute_finished_at = null,
       compute_result = null, compute_error = null
     where id = $2 and compute_run_id is distinct from $3`,
    [input.runId, input.segmentId, input.runId],
  );
  return em.transactional(async (tx) => {
    const result = await computeSegment(tx, input.projectId, input.segmentId);
    await sql(tx).query(
      `update segments set compute_status = 'COMPLETED', compute_result = $1::jsonb, compute_finished_at = now(), compute_error = null
       where id = $2 and compute_run_id = $3`,
      [JSON.stringify(result), input.segmentId, input.runId],
    );
    return result;
  });
}

/** Records a run that could not compute as FAILED (also when it failed before recording RUNNING); a COMPLETED run stays. */
export async function failSegmentCompute(em: EntityManager, input: { segmentId: string; runId: string; message: string }): Promise<void> {
  await sql(em).query(
    `update segments set compute_status = 'FAILED', compute_error = $1, compute_finished_at = now(), compute_result = null,
       compute_started_at = case when compute_run_id is distinct from $2 then now() else compute_started_at end, compute_run_id = $3
     where id = $4 and (compute_run_id is distinct from $5 or compute_status = 'RUNNING')`,
    [input.message, input.runId, input.runId, input.segmentId, input.runId],
  );
}

export interface DueSegment {
  projectId: string;
  segmentId: string;
}

/**
 * Tracked dynamic segments due for a scheduled recompute, longest waiting first: their last compute started more than
 * the project's `segmentRecomputeMinutes` ago (a failed attempt counts, so a failing segment is retried once per
 * interval, not at every sweep; a segment never computed counts from its creation). A compute still running that long
 * is due too: the start is refused while it really runs, and replaces a state whose run was terminated. Projects that
 * are disabled are left alone.
 */
export async function findDueSegmentComputes(em: EntityManager, input: { limit: number }): Promise<DueSegment[]> {
  const last = 'coalesce(greatest(s.computed_at, s.compute_started_at), s.created_at)';
  return sql(em).query<DueSegment>(
    `select s.project_id as "projectId", s.id as "segmentId"
     from segments s join projects p on p.id = s.project_id
     where s.type = 'DYNAMIC' and s.track_membership and not p.disabled
       and ${last} < now() - make_interval(mins => coalesce((p.settings->>'segmentRecomputeMinutes')::int, $1))
     order by ${last}, s.id
     limit $2`,
    [DEFAULT_SEGMENT_RECOMPUTE_MINUTES, input.limit],
  );
}
