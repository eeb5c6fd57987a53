import { patched, proxyActivities, startChild, ParentClosePolicy, WorkflowIdReusePolicy } from '@temporalio/workflow';
import type { EmailActivities } from '../activities/email.activities';
import { emailDelivery } from './email-delivery.workflow';
import { workflowIds } from '../definitions';

const { findStrandedEmails, purgeExpiredIdempotencyKeys } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute' },
});

const STRANDED_AFTER_MS = 10 * 60_000;

/**
 * Runs on a schedule (`email-sweeper`, every 5 minutes): emails still QUEUED 10 minutes after they were accepted are
 * delivered by a workflow with the id stored with them. If that delivery is running, starting it again is refused
 * and it is left alone; so no email ever has two deliveries at once, and delivery skips emails already sent. It also
 * deletes `Idempotency-Key` records older than 24 hours.
 */
export async function emailSweeper(input: { olderThanMs?: number } = {}): Promise<{ restarted: number }> {
  const groups = await findStrandedEmails({ olderThanMs: input.olderThanMs ?? STRANDED_AFTER_MS, limit: 2_000 });
  let restarted = 0;
  for (const { projectId, workflowId, emailIds } of groups) {
    try {
      await startChild(emailDelivery, {
        workflowId: workflowId ?? workflowIds.emailDelivery(emailIds[0]!),
        args: [{ projectId, emailIds }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      });
      restarted += emailIds.length;
    } catch (err) {
      // That delivery is running: it will send these emails.
      if (!(err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError')) throw err;
    }
  }
  // Added after the first release: runs recorded before it replay without this step.
  if (patched('purge-idempotency-keys')) await purgeExpiredIdempotencyKeys();
  return { restarted };
}
