import { ApplicationFailure, CancellationScope, isCancellation, proxyActivities } from '@temporalio/workflow';
import type { ContactJobActivities } from '../activities/contact-jobs.activities';

export interface ContactBulkInput {
  projectId: string;
  jobId: string;
}

const { runContactBulkJob, endContactJob } = proxyActivities<ContactJobActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
});

/**
 * A bulk subscribe / unsubscribe / delete of up to 1000 contacts (id `contact-bulk/<jobId>`, search attributes
 * ProjectId and JobId): one activity applies it in one transaction, exactly once.
 */
export async function contactBulk(input: ContactBulkInput): Promise<void> {
  try {
    await runContactBulkJob({ jobId: input.jobId });
  } catch (err) {
    const cancelled = isCancellation(err);
    const message = cancelled ? 'The bulk job was cancelled' : 'The bulk job failed';
    await CancellationScope.nonCancellable(() => endContactJob({ jobId: input.jobId, status: cancelled ? 'CANCELLED' : 'FAILED', message }));
    if (cancelled) throw err;
    throw ApplicationFailure.create({ nonRetryable: true, type: 'BulkJobFailed', message });
  }
}
