import { proxyActivities, proxyLocalActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { EmailActivities } from '../activities/email.activities';

export interface EmailDeliveryInput {
  projectId: string;
  emailIds: string[];
  /** How long transient failures are retried before the emails are marked FAILED (default one day). */
  retryWindowMs?: number;
}

export interface EmailDeliveryResult {
  sent: number;
  rejected: number;
  failed: number;
  skipped: number;
}

// Each attempt is a local activity: it runs in the worker that runs the workflow, right after the workflow task,
// which halves the round trips through the Temporal server per batch. Its result (every email's outcome) is
// recorded in the history as a marker, visible in Web UI. Errors thrown (e.g. the database is down) are retried.
const { deliverEmails } = proxyLocalActivities<EmailActivities>({
  startToCloseTimeout: '2 minutes',
  localRetryThreshold: '1 minute',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

const { markEmailsFailed } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** How long transient SMTP failures are retried, by default, before an email is marked FAILED. */
const DEFAULT_RETRY_WINDOW_MS = 24 * 3600 * 1000;

/** Backoff between delivery attempts of the emails that got a transient failure: 5 s, 10 s, 20 s, ... 30 min. */
export function retryDelayMs(attempt: number): number {
  return Math.min(5_000 * 2 ** (attempt - 1), 30 * 60_000);
}

/**
 * Delivers the emails accepted by /v1/send calls of one project (the API batches calls that arrive together).
 * Each attempt is one activity over the emails still pending; transient failures are retried with backoff for up
 * to a day, a 5xx reply is final. Every email's status is on its row in the database, and the activity results
 * show each outcome in Temporal Web UI.
 */
export async function emailDelivery(input: EmailDeliveryInput): Promise<EmailDeliveryResult> {
  const result: EmailDeliveryResult = { sent: 0, rejected: 0, failed: 0, skipped: 0 };
  const startedAt = workflowInfo().startTime.getTime();
  let pending = input.emailIds;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const outcomes = await deliverEmails({ emailIds: pending, attempt });
    pending = [];
    for (const o of outcomes) {
      if (o.status === 'SENT') result.sent++;
      else if (o.status === 'REJECTED') result.rejected++;
      // Not sent, and final: unsubscribed (marketing), suppressed, or already final when claimed.
      else if (o.status === 'SKIPPED' || o.status === 'CANCELLED' || o.status === 'SUPPRESSED') result.skipped++;
      else pending.push(o.emailId);
    }
    if (pending.length === 0) break;
    if (Date.now() - startedAt + retryDelayMs(attempt) > (input.retryWindowMs ?? DEFAULT_RETRY_WINDOW_MS)) {
      const last = outcomes.find((o) => o.status === 'RETRY');
      await markEmailsFailed({ emailIds: pending, reason: `Delivery gave up after ${attempt} attempts: ${last && 'error' in last ? last.error : 'transient failures'}` });
      result.failed += pending.length;
      break;
    }
    await sleep(retryDelayMs(attempt));
  }
  return result;
}
