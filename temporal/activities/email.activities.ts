import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { purgeExpiredIdempotencyKeys } from '../../domain/idempotency/idempotency';
import { deliverBatch, findStrandedEmails, markEmailsFailed, type DeliveryOutcome } from '../../domain/emails/delivery';
import { SecretBox } from '../../domain/domains/secret-box';
import { mirrorClosedRuns } from '../../domain/temporal-mirror';

export function createEmailActivities(deps: ActivityDeps) {
  const secretBox = new SecretBox(deps.config.appSecret); // unseals the DKIM keys of sender domains
  return {
    /**
     * Sends a batch of stored emails; returns each email's outcome. Transient SMTP failures come back as RETRY
     * outcomes (the workflow retries just those); an error thrown here (database down) retries the whole call,
     * which is safe because emails already sent are not claimed again.
     */
    async deliverEmails(input: { emailIds: string[]; attempt: number }): Promise<DeliveryOutcome[]> {
      const { workflowExecution } = Context.current().info;
      return deliverBatch(deps.orm.em.fork(), deps.transport, { ...input, workflowId: workflowExecution?.workflowId }, { secretBox, appSecret: deps.config.appSecret });
    },
    /** Emails accepted more than `olderThanMs` ago whose delivery never started, grouped per project. */
    async findStrandedEmails(input: { olderThanMs: number; limit: number }): Promise<{ projectId: string; workflowId: string | null; emailIds: string[] }[]> {
      return findStrandedEmails(deps.orm.em.fork(), input);
    },
    /** Housekeeping of the sweeper: `Idempotency-Key` records past their 24 hours. */
    async purgeExpiredIdempotencyKeys(): Promise<number> {
      return purgeExpiredIdempotencyKeys(deps.orm.em.fork());
    },
    /**
     * Housekeeping of the sweeper: campaign sends and automation runs that Temporal closed in the last `withinMs`
     * without their own code recording it (terminated in Web UI, timed out) become FAILED in the database. Returns how
     * many rows changed.
     */
    async mirrorClosedRuns(input: { withinMs: number }): Promise<number> {
      const runs = await deps.temporal().runsClosedOutside({ since: new Date(Date.now() - input.withinMs) });
      return mirrorClosedRuns(deps.orm.em.fork(), runs);
    },
    async markEmailsFailed(input: { emailIds: string[]; reason: string }): Promise<void> {
      await markEmailsFailed(deps.orm.em.fork(), input.emailIds, input.reason);
    },
  };
}

export type EmailActivities = ReturnType<typeof createEmailActivities>;
