import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { SegmentActivities } from '../activities/segment.activities';
import type { ComputeResult } from '../../domain/segments/segment.service';

export interface SegmentComputeInput {
  projectId: string;
  segmentId: string;
}

const { runSegmentCompute } = proxyActivities<SegmentActivities>({
  // One statement: the first compute of 333k members took 14 s on the benchmark machine; the heartbeat notices a dead
  // worker long before this bound.
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

const { failSegmentCompute } = proxyActivities<SegmentActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
});

/** What the API shows of a failure: a refusal's own message; anything else stays in the history, not in the API. */
function failureMessage(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  if (cause instanceof ApplicationFailure && cause.nonRetryable) return cause.message;
  return 'The compute failed after retries (the workflow history in Temporal has the error)';
}

/**
 * One compute of a segment (id `segment-compute/<segmentId>`, search attribute ProjectId), started by
 * `POST /segments/:id/compute` or by `segmentRecomputeSweep`. The activity records the run's state on the segment
 * (RUNNING, then COMPLETED with the result in the compute's transaction); a compute that cannot run is recorded FAILED
 * and fails the workflow; a cancelled one is recorded FAILED and ends cancelled.
 */
export async function segmentCompute(input: SegmentComputeInput): Promise<ComputeResult> {
  const { runId } = workflowInfo();
  try {
    return await runSegmentCompute({ projectId: input.projectId, segmentId: input.segmentId, runId });
  } catch (err) {
    const cancelled = isCancellation(err);
    const message = cancelled ? 'The compute was cancelled' : failureMessage(err);
    await CancellationScope.nonCancellable(() => failSegmentCompute({ segmentId: input.segmentId, runId, message }));
    if (cancelled) throw err;
    throw ApplicationFailure.create({ nonRetryable: true, type: 'SegmentComputeFailed', message });
  }
}
