import { ActivityFailure, patched, proxyActivities, startChild, ParentClosePolicy, WorkflowIdReusePolicy } from '@temporalio/workflow';
import type { EmailActivities } from '../activities/email.activities';
import { emailDelivery } from './email-delivery.workflow';
import { emailDeliveryStart } from '../definitions';

const { findStrandedEmails, purgeExpiredIdempotencyKeys } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute' },
});

// The mirror is housekeeping that the next sweep repeats: a few attempts, then the sweep ends without it rather than
// holding back the sweeps behind it (the schedule skips a sweep while one runs).
const { mirrorClosedRuns } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 3 },
});

const STRANDED_AFTER_MS = 10 * 60_000;
/**
 * How far back each sweep looks for runs closed outside their code. Every sweep looks again (mirroring is idempotent),
 * so a sweep that did not run for a while is made up by the next, within this window.
 */
const MIRROR_WINDOW_MS = 24 * 3_600_000;

/**
 * Runs on a schedule (`email-sweeper`, every 5 minutes): emails still QUEUED 10 minutes after they were accepted are
 * delivered by a workflow with the id stored with them. If that delivery is running, starting it again is refused
 * and it is left alone; so no email ever has two deliveries at once, and delivery skips emails already sent. A swept
 * delivery is started as the API starts one (`emailDeliveryStart`: same id, ProjectId and EmailIds search attributes),
 * so it is found in Web UI alike. It also deletes `Idempotency-Key` records older than 24 hours, and mirrors into the
 * database the campaign sends and automation runs that Temporal closed without their own code (terminated in Web UI):
 * the one place that mirror runs, so reads never write.
 */
export async function emailSweeper(input: { olderThanMs?: number } = {}): Promise<{ restarted: number }> {
  const groups = await findStrandedEmails({ olderThanMs: input.olderThanMs ?? STRANDED_AFTER_MS, limit: 2_000 });
  let restarted = 0;
  // Added after the first release: sweeps recorded before it replay their starts without search attributes.
  const searchable = patched('swept-deliveries-searchable');
  for (const { projectId, workflowId, emailIds } of groups) {
    const start = emailDeliveryStart({ projectId, emailIds }, workflowId);
    try {
      await startChild(emailDelivery, {
        workflowId: start.workflowId,
        args: start.args,
        ...(searchable ? { typedSearchAttributes: start.typedSearchAttributes } : {}),
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
  if (patched('mirror-closed-runs')) {
    try {
      await mirrorClosedRuns({ withinMs: MIRROR_WINDOW_MS });
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
    }
  }
  return { restarted };
}
