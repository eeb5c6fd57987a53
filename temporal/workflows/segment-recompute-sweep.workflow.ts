import { CancelledFailure, ChildWorkflowCancellationType, ParentClosePolicy, proxyActivities, startChild, WorkflowIdReusePolicy } from '@temporalio/workflow';
import type { SegmentActivities } from '../activities/segment.activities';
import { segmentCompute } from './segment-compute.workflow';
import { segmentComputeStart } from '../definitions';

const { findDueSegmentComputes } = proxyActivities<SegmentActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute' },
});

/** Segments one sweep takes on; the others are still due at the next sweep. */
const SWEEP_LIMIT = 200;
/** Computes a sweep runs at once: each is one heavy statement, and more at once would only queue for the database. */
const CONCURRENCY = 2;

export interface SweepResult {
  due: number;
  computed: number;
  /** Due segments whose compute was already running (started through the API): that run counts. */
  running: number;
  failed: number;
}

/**
 * Runs on a schedule (`segment-recompute-sweep`, every SEGMENT_RECOMPUTE_SWEEP_INTERVAL): recomputes the tracked dynamic
 * segments whose last compute is older than their project's `segmentRecomputeMinutes`, as `segment-compute/<segmentId>`
 * children, two at a time, waiting for each. The schedule skips a sweep while the previous one still runs, so the
 * computes never pile up. A child outlives a sweep that is cancelled or terminated.
 */
export async function segmentRecomputeSweep(input: { limit?: number } = {}): Promise<SweepResult> {
  const due = await findDueSegmentComputes({ limit: input.limit ?? SWEEP_LIMIT });
  const result: SweepResult = { due: due.length, computed: 0, running: 0, failed: 0 };
  let next = 0;
  const lane = async () => {
    while (next < due.length) {
      const { projectId, segmentId } = due[next++]!;
      let child;
      try {
        child = await startChild(segmentCompute, {
          ...segmentComputeStart({ projectId, segmentId }),
          // A compute is left to finish whatever happens to the sweep.
          parentClosePolicy: ParentClosePolicy.ABANDON,
          cancellationType: ChildWorkflowCancellationType.ABANDON,
          workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        });
      } catch (err) {
        if (!(err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError')) throw err;
        result.running++;
        continue;
      }
      try {
        await child.result();
        result.computed++;
      } catch (err) {
        if (err instanceof CancelledFailure) throw err; // the sweep was cancelled (a cancelled compute is a ChildWorkflowFailure)
        result.failed++; // recorded FAILED on the segment; the next sweep after its interval tries again
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return result;
}
