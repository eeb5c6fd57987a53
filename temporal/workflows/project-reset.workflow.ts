import { ApplicationFailure, CancellationScope, ContinueAsNew, continueAsNew, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ProjectResetActivities } from '../activities/project-reset.activities';

interface ProjectResetInput {
  projectId: string;
  resetId: string;
  /** Where a continued run goes on: the step the last chunk named (the stop step is done). */
  from?: number;
}

const { stopProjectActivity, deleteResetChunk, endProjectReset } = proxyActivities<ProjectResetActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 20 },
});

/**
 * `project-reset/<projectId>`: stops what runs in the project, then deletes its data a chunk at a time, kind by kind
 * (domain/projects/project-reset.ts). Cancelling it in Temporal Web UI stops the deletion where it is (what is
 * deleted stays deleted) and records CANCELLED. Long resets continue as new runs, so the history stays small.
 */
export async function projectReset(input: ProjectResetInput): Promise<void> {
  try {
    if (input.from === undefined) await stopProjectActivity({ projectId: input.projectId });
    // Each chunk names the step to do next (the same kind while rows are left, then the next kind), null at the end.
    let step: number | null = input.from ?? 0;
    while (step !== null) {
      step = (await deleteResetChunk({ resetId: input.resetId, projectId: input.projectId, step })).next;
      if (step !== null && workflowInfo().continueAsNewSuggested) await continueAsNew<typeof projectReset>({ ...input, from: step });
    }
    await endProjectReset({ resetId: input.resetId, status: 'COMPLETED' });
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    const cancelled = isCancellation(err);
    const message = cancelled ? 'The reset was cancelled' : `The reset failed: ${err instanceof Error ? err.message : String(err)}`;
    await CancellationScope.nonCancellable(() => endProjectReset({ resetId: input.resetId, status: cancelled ? 'CANCELLED' : 'FAILED', error: message }));
    if (cancelled) throw err;
    throw ApplicationFailure.create({ nonRetryable: true, type: 'ProjectResetFailed', message });
  }
}
