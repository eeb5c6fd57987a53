import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { SecretBox } from '../../domain/domains/secret-box';
import {
  conditionStep,
  recordProgress,
  sendEmailStep,
  sendEmailWithRecords,
  updateContactStep,
  webhookStep,
  type ProgressInput,
  type ProgressResult,
  type RunRef,
  type SendStepInput,
  type SendWithRecordsInput,
  type SendWithRecordsResult,
  type StepOutcome,
  type WebhookStepInput,
} from '../../domain/automations/run-steps';
import type { StepConfigs } from '../../domain/automations/graph';
import { cancelExecutionsPage } from '../../domain/automations/execution.service';

export function createAutomationActivities(deps: ActivityDeps) {
  const secretBox = new SecretBox(deps.config.appSecret); // unseals the sender domain's DKIM key
  const links = { publicUrl: deps.config.publicUrl, appSecret: deps.config.appSecret, unsubscribeMailto: deps.config.unsubscribeMailto };
  const sendDeps = { transport: deps.transport, secretBox, links, billing: deps.config.billing };
  const webhook = {
    allowPrivateNetworks: deps.config.automations.webhookAllowPrivateNetworks,
    allowedNetworks: deps.config.automations.webhookAllowedNetworks,
    timeoutMs: deps.config.automations.webhookTimeoutMs,
  };
  return {
    /** Writes the step that ended and the run's next state (or its end) to the execution row. */
    async automationProgress(input: ProgressInput): Promise<ProgressResult> {
      return recordProgress(deps.orm.em.fork(), input);
    },
    /** SEND_EMAIL: composes, stores and sends the step's email once. */
    async automationSendEmail(input: SendStepInput): Promise<StepOutcome> {
      return sendEmailStep(deps.orm.em.fork(), sendDeps, input);
    },
    /** SEND_EMAIL with the run's records before and after it (runs started since they were folded in). */
    async automationSendWithRecords(input: SendWithRecordsInput): Promise<SendWithRecordsResult> {
      const em = deps.orm.em.fork();
      return sendEmailWithRecords({ progress: (i) => recordProgress(em, i), send: (i) => sendEmailStep(em, sendDeps, i) }, input);
    },
    /** CONDITION: whether the contact matches the filter now. */
    async automationCondition(input: RunRef & { filter: Record<string, unknown> }): Promise<StepOutcome & { matched: boolean }> {
      return conditionStep(deps.orm.em.fork(), input);
    },
    /** UPDATE_CONTACT: the contact data rules. */
    async automationUpdateContact(input: RunRef & { config: StepConfigs['UPDATE_CONTACT'] }): Promise<StepOutcome> {
      return updateContactStep(deps.orm.em.fork(), input);
    },
    /** WEBHOOK: the signed POST; retried by the activity's policy. */
    async automationWebhook(input: WebhookStepInput): Promise<StepOutcome> {
      return webhookStep(deps.orm.em.fork(), webhook, input);
    },
    /**
     * Cancel-all: requests cancellation of a page of the automation's active runs (started before the request),
     * heartbeating the cursor; returns the cursor to go on from, null when done.
     */
    async cancelAutomationRuns(input: { automationId: string; before: string; cursor: string | null }): Promise<{ cancelled: number; cursor: string | null }> {
      const ctx = Context.current();
      return cancelExecutionsPage(deps.orm.em.fork(), deps.temporal(), { ...input, heartbeat: (cursor) => ctx.heartbeat(cursor) });
    },
  };
}

export type AutomationActivities = ReturnType<typeof createAutomationActivities>;
