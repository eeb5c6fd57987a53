import { proxyActivities, ApplicationFailure, ActivityFailure } from '@temporalio/workflow';
import type { EmailActivities } from '../activities/email.activities';

export interface EmailDeliveryInput {
  projectId: string;
  emailIds: string[];
}

export interface EmailDeliveryResult {
  sent: number;
  rejected: number;
  failed: number;
  skipped: number;
}

const { deliverEmail } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '2 minutes',
  // 4xx replies and connection failures are retried with backoff for up to a day; a 5xx reply is final
  // (the activity reports it as a result, not an error).
  scheduleToCloseTimeout: '24 hours',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '10 minutes' },
});

const { markEmailFailed } = proxyActivities<EmailActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * Delivers the emails of one accepted /v1/send call, in order. Each email is one activity, so its attempts,
 * SMTP errors and retries are visible per email in Temporal Web UI.
 */
export async function emailDelivery(input: EmailDeliveryInput): Promise<EmailDeliveryResult> {
  const result: EmailDeliveryResult = { sent: 0, rejected: 0, failed: 0, skipped: 0 };
  for (const emailId of input.emailIds) {
    try {
      const outcome = await deliverEmail({ emailId });
      if (outcome.status === 'SENT') result.sent++;
      else if (outcome.status === 'REJECTED') result.rejected++;
      else result.skipped++;
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err;
      const cause = err.cause instanceof ApplicationFailure ? err.cause.message : (err.cause?.message ?? err.message);
      await markEmailFailed({ emailId, reason: `Delivery gave up: ${cause}` });
      result.failed++;
    }
  }
  return result;
}
