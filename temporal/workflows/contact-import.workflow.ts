import { ApplicationFailure, CancellationScope, continueAsNew, isCancellation, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { ContactJobActivities } from '../activities/contact-jobs.activities';

export interface ContactImportInput {
  projectId: string;
  jobId: string;
  /** Set when the workflow continued as new: the job is RUNNING already. */
  started?: boolean;
  /** Slices per run before continuing as new (default MAX_SLICES_PER_RUN; tests make it small). Kept across runs. */
  maxSlicesPerRun?: number;
}

const { startContactImport, completeContactImport, endContactJob } = proxyActivities<ContactJobActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10, nonRetryableErrorTypes: ['CsvRejected'] },
});

const { importContactChunks } = proxyActivities<ContactJobActivities>({
  // One run imports for at most a minute; a worker that dies is noticed by the missing heartbeat.
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 20, nonRetryableErrorTypes: ['CsvRejected'] },
});

/** Slices before continuing as new; a 5 MB file needs one, so this only bounds pathological cases. */
const MAX_SLICES_PER_RUN = 200;

/**
 * A CSV contact import (id `contact-import/<jobId>`, search attributes ProjectId and JobId). The file is in Postgres;
 * activities check it, import it chunk by chunk (each chunk committed with its progress, so a restarted worker
 * continues without duplicates) and complete the job. A file that is not a usable CSV fails the job with a clear
 * message; cancelling the workflow marks the job CANCELLED.
 */
export async function contactImport(input: ContactImportInput): Promise<void> {
  let continueNow = false;
  try {
    if (!input.started) {
      const { running } = await startContactImport({ jobId: input.jobId });
      if (!running) return;
    }
    for (let slice = 0; ; slice++) {
      const { done } = await importContactChunks({ jobId: input.jobId });
      if (done) break;
      if (slice + 1 >= (input.maxSlicesPerRun ?? MAX_SLICES_PER_RUN) || workflowInfo().continueAsNewSuggested) {
        continueNow = true;
        break;
      }
    }
    if (!continueNow) await completeContactImport({ jobId: input.jobId });
  } catch (err) {
    const cancelled = isCancellation(err);
    await CancellationScope.nonCancellable(() =>
      endContactJob({ jobId: input.jobId, status: cancelled ? 'CANCELLED' : 'FAILED', message: cancelled ? 'The import was cancelled' : failureMessage(err) }),
    );
    if (cancelled) throw err;
    throw ApplicationFailure.create({ nonRetryable: true, type: 'ImportFailed', message: failureMessage(err) });
  }
  // Outside the try: continuing as new is signalled by a throw that must not fail the job.
  if (continueNow) await continueAsNew<typeof contactImport>({ ...input, started: true });
}

/** The innermost cause's message: the activity's own words, not the "Activity task failed" wrapper. */
function failureMessage(err: unknown): string {
  let e = err as { message?: string; cause?: unknown } | undefined;
  while (e && typeof e === 'object' && e.cause) e = e.cause as typeof e;
  return e?.message ?? 'The import failed';
}
