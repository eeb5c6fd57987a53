import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { AppError } from '../../domain/errors';
import type { ComputeResult } from '../../domain/segments/segment.service';
import { failSegmentCompute, findDueSegmentComputes, runSegmentCompute, type DueSegment } from '../../domain/segments/segment-compute';

/**
 * A compute is one long statement that cannot report progress: a timer heartbeats meanwhile, so a worker that dies
 * in the middle is noticed within the heartbeat timeout (and the compute retried) instead of at the end of the
 * start-to-close timeout.
 */
const HEARTBEAT_MS = 10_000;

export function createSegmentActivities(deps: ActivityDeps) {
  return {
    /** Recomputes a segment for a run of `segment-compute/<segmentId>` and records the run's state. */
    async runSegmentCompute(input: { projectId: string; segmentId: string; runId: string }): Promise<ComputeResult> {
      const ctx = Context.current();
      const beat = setInterval(() => ctx.heartbeat(), HEARTBEAT_MS);
      try {
        return await runSegmentCompute(deps.orm.em.fork(), input);
      } catch (err) {
        // A refusal (the segment was deleted meanwhile) is no better on a retry; its message is fit for the API.
        if (err instanceof AppError && err.statusCode < 500) throw ApplicationFailure.create({ nonRetryable: true, type: err.code, message: err.message });
        throw err;
      } finally {
        clearInterval(beat);
      }
    },

    /** Records a run that could not compute as FAILED with `message`. */
    async failSegmentCompute(input: { segmentId: string; runId: string; message: string }): Promise<void> {
      await failSegmentCompute(deps.orm.em.fork(), input);
    },

    /** Tracked dynamic segments due for their scheduled recompute (by their project's `segmentRecomputeMinutes`). */
    async findDueSegmentComputes(input: { limit: number }): Promise<DueSegment[]> {
      return findDueSegmentComputes(deps.orm.em.fork(), input);
    },
  };
}

export type SegmentActivities = ReturnType<typeof createSegmentActivities>;
