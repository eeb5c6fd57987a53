import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { deliverStoredEmail, markEmailFailed, type DeliveryOutcome } from '../../domain/emails/delivery';

export function createEmailActivities(deps: ActivityDeps) {
  return {
    /** Sends one stored email; throws (retryable) on 4xx/connection errors, returns REJECTED on a 5xx reply. */
    async deliverEmail(input: { emailId: string }): Promise<DeliveryOutcome> {
      const attempt = Context.current().info.attempt;
      return deliverStoredEmail(deps.orm.em.fork(), deps.transport, input.emailId, attempt);
    },
    async markEmailFailed(input: { emailId: string; reason: string }): Promise<void> {
      await markEmailFailed(deps.orm.em.fork(), input.emailId, input.reason);
    },
  };
}

export type EmailActivities = ReturnType<typeof createEmailActivities>;
