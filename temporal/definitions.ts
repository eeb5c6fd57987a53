/**
 * What the client and the workflows share, defined once: workflow ids (derived from business ids, so a repeated start
 * is recognised), and the signal, update and query definitions. Pure: `@temporalio/workflow` and types only, so the
 * workflow bundle imports it as well as the API.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { SearchAttributePair } from '@temporalio/common';
import type { DomainCheckResult } from '../domain/domains/domain.service';
import type * as workflows from './workflows';
import { SA } from './search-attributes';
import { workflowIds } from './workflow-ids';

/** Every workflow the worker runs, by its registered name. */
export type WorkflowName = keyof typeof workflows;
/** The arguments of a workflow, from its function: a start cannot pass the wrong shape. */
export type WorkflowArgs<N extends WorkflowName> = Parameters<(typeof workflows)[N]>;

export { workflowIds };

/**
 * The task queue of campaign shares (`sendCampaignPartition`) beside a worker's task queue: polled by every worker
 * with only CAMPAIGN_SHARES_PER_WORKER slots, so the shares of a campaign spread over the workers that poll.
 */
export function campaignShareQueue(taskQueue: string): string {
  return `${taskQueue}-campaign-shares`;
}

/** What a start of workflow `N` is made of, wherever it is started from (the client, or a sweeper's `startChild`). */
export interface StartSpec<N extends WorkflowName> {
  workflowId: string;
  args: WorkflowArgs<N>;
  typedSearchAttributes: SearchAttributePair[];
}

/**
 * A delivery batch's start: the API's intake (through the client) and the email sweeper (a child workflow) start it
 * alike, so a swept delivery has the same id and the same ProjectId and EmailIds search attributes, and is found in
 * Temporal Web UI as a first start is. `workflowId` is the one stored with the emails, when there is one.
 */
export function emailDeliveryStart(input: { projectId: string; emailIds: string[] }, workflowId?: string | null): StartSpec<'emailDelivery'> {
  return {
    workflowId: workflowId ?? workflowIds.emailDelivery(input.emailIds[0]!),
    args: [{ projectId: input.projectId, emailIds: input.emailIds }],
    typedSearchAttributes: [
      { key: SA.ProjectId, value: input.projectId },
      { key: SA.EmailIds, value: input.emailIds },
    ],
  };
}

/**
 * A segment compute's start: the API (through the client) and the recompute sweep (a child workflow) start it alike,
 * `segment-compute/<segmentId>` with ProjectId.
 */
export function segmentComputeStart(input: { projectId: string; segmentId: string }): StartSpec<'segmentCompute'> {
  return {
    workflowId: workflowIds.segmentCompute(input.segmentId),
    args: [{ projectId: input.projectId, segmentId: input.segmentId }],
    typedSearchAttributes: [{ key: SA.ProjectId, value: input.projectId }],
  };
}

/** The schedule that starts `emailSweeper` every 5 minutes. */
export const EMAIL_SWEEPER_SCHEDULE_ID = 'email-sweeper';
/** The schedule that starts `segmentRecomputeSweep` (every SEGMENT_RECOMPUTE_SWEEP_INTERVAL, 5 minutes by default). */
export const SEGMENT_RECOMPUTE_SCHEDULE_ID = 'segment-recompute-sweep';
/** The schedule that starts `reputationCheck` (every REPUTATION_CHECK_INTERVAL, 15 minutes by default). */
export const REPUTATION_SCHEDULE_ID = 'reputation-check';
/**
 * The schedule that polls the bounce mailbox (every BOUNCE_MAILBOX_POLL_SECONDS, when BOUNCE_MAILBOX_HOST is set); each
 * poll is a `bounceMailboxPoll` run named `bounce-mailbox-<time>` (the schedule appends the time to its action's id).
 */
export const BOUNCE_MAILBOX_SCHEDULE_ID = 'bounce-mailbox';

/** domainVerification: runs a check now and returns its result (the handler waits for a check in progress first). */
export const checkNowUpdate = defineUpdate<DomainCheckResult>('checkNow');
/** domainVerification: the domain was removed; the loop ends. */
export const removeSignal = defineSignal('remove');
/** campaignSend: the campaign changed (a new time, a pause, a resume); the run re-reads it from the database. */
export const campaignWakeSignal = defineSignal('wake');

/** campaignSend of an A/B-tested campaign: where the test is (Temporal Web UI's Queries tab; null without variants). */
export interface CampaignAbProgress {
  phase: 'test' | 'waiting' | 'remainder';
  variants: number;
  /** ISO time the test ends (while waiting); a manual test waits past it for a pick. */
  testEndsAt: string | null;
  winner: number | null;
  note: string | null;
}
export const campaignAbQuery = defineQuery<CampaignAbProgress | null>('abTest');

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

/** What a webhook replay has done so far: its range, the events it read and the deliveries it queued (`done`: all of them). */
export interface WebhookReplayProgress {
  from: string;
  to: string;
  events: number;
  queued: number;
  done: boolean;
}

/** The progress of a `webhook-replay` run (GET /webhook-endpoints/:id/replays/:replayId, and Temporal Web UI's Queries). */
export const webhookReplayProgressQuery = defineQuery<WebhookReplayProgress>('progress');
