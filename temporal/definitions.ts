/**
 * What the client and the workflows share, defined once: workflow ids (derived from business ids, so a repeated start
 * is recognised), and the signal, update and query definitions. Pure: `@temporalio/workflow` and types only, so the
 * workflow bundle imports it as well as the API.
 */
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { DomainCheckResult } from '../domain/domains/domain.service';
import type * as workflows from './workflows';

/** Every workflow the worker runs, by its registered name. */
export type WorkflowName = keyof typeof workflows;
/** The arguments of a workflow, from its function: a start cannot pass the wrong shape. */
export type WorkflowArgs<N extends WorkflowName> = Parameters<(typeof workflows)[N]>;

export const workflowIds = {
  /** A delivery batch, named after its first email; stored with the emails so the sweeper restarts the same id. */
  emailDelivery: (firstEmailId: string) => `email-delivery/${firstEmailId}`,
  domainVerification: (domainId: string) => `domain-verification/${domainId}`,
  contactImport: (jobId: string) => `contact-import/${jobId}`,
  contactBulk: (jobId: string) => `contact-bulk/${jobId}`,
  campaignSend: (campaignId: string) => `campaign-send/${campaignId}`,
  /** The compute of a segment: one at a time per segment, a new run under the same id for each compute. */
  segmentCompute: (segmentId: string) => `segment-compute/${segmentId}`,
  /** A contact's n-th run of an automation (never reused: a second start of an ended id is refused). */
  automationRun: (automationId: string, contactId: string, n: number) => `automation/${automationId}/${contactId}/${n}`,
  /** One cancel-all request of an automation. */
  automationCancelAll: (automationId: string, requestId: string) => `automation-cancel-all/${automationId}/${requestId}`,
  /** One verification or password reset email, named after the API request that asked for it. */
  accountEmail: (requestId: string) => `account-email/${requestId}`,
  /** One project invitation email, named after the API request that asked for it. */
  invitationEmail: (requestId: string) => `invitation-email/${requestId}`,
  /** A project's reset: one at a time per project (a new run under the same id for each reset). */
  projectReset: (projectId: string) => `project-reset/${projectId}`,
};

/** The schedule that starts `emailSweeper` every 5 minutes. */
export const EMAIL_SWEEPER_SCHEDULE_ID = 'email-sweeper';
/** The schedule that starts `segmentRecomputeSweep` (every SEGMENT_RECOMPUTE_SWEEP_INTERVAL, 5 minutes by default). */
export const SEGMENT_RECOMPUTE_SCHEDULE_ID = 'segment-recompute-sweep';
/** The schedule that starts `reputationCheck` (every REPUTATION_CHECK_INTERVAL, 15 minutes by default). */
export const REPUTATION_SCHEDULE_ID = 'reputation-check';

/** domainVerification: runs a check now and returns its result (the handler waits for a check in progress first). */
export const checkNowUpdate = defineUpdate<DomainCheckResult>('checkNow');
/** domainVerification: the domain was removed; the loop ends. */
export const removeSignal = defineSignal('remove');
/** campaignSend: the campaign changed (a new time, a pause, a resume); the run re-reads it from the database. */
export const campaignWakeSignal = defineSignal('wake');

/** An event of the contact, as the automations consumer hands it to a run waiting in WAIT_FOR_EVENT. */
export interface AutomationSignalEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
  /** ISO time the event was recorded. */
  createdAt: string;
}

/** automationRun: an event of the contact that a WAIT_FOR_EVENT step may be waiting for. */
export const automationEventSignal = defineSignal<[AutomationSignalEvent]>('event');
