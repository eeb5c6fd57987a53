import { Client, Connection, ScheduleAlreadyRunning, ScheduleNotFoundError, type WorkflowStartOptions, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError, WorkflowFailedError, WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { TypedSearchAttributes, WorkflowIdReusePolicy, type SearchAttributePair } from '@temporalio/common';
import type { AutomationRunControl, AutomationRunStart } from '../domain/automations/execution.service';
import type { Config } from '../domain/config';
import type { AccountEmailRequest } from '../domain/auth/account-emails';
import type { ReplayRequest } from '../domain/webhook-endpoints/webhook-replay';
import type { DomainCheckResult } from '../domain/domains/domain.service';
import { SA } from './search-attributes';
import { workflowStarts } from '../domain/metrics';
import type { CampaignSendControl } from '../domain/campaigns/campaign-steering';
import type * as workflows from './workflows';
import { automationEventSignal, campaignWakeSignal, checkNowUpdate, type AutomationSignalEvent, EMAIL_SWEEPER_SCHEDULE_ID, BOUNCE_MAILBOX_SCHEDULE_ID, emailDeliveryStart, removeSignal, segmentComputeStart, REPUTATION_SCHEDULE_ID, SEGMENT_RECOMPUTE_SCHEDULE_ID, webhookReplayProgressQuery, workflowIds, type WebhookReplayProgress, type WorkflowArgs, type WorkflowName } from './definitions';
import type { ClosedRun } from '../domain/temporal-mirror';
import { temporalConnectionOptions } from './connection';

/** How long `GET /domains/:id/verify` waits for its check (DNS lookups are bounded by DNS_TIMEOUT each). */
const DOMAIN_CHECK_NOW_TIMEOUT_MS = 30_000;

/** How long `GET /webhook-endpoints/:id/replays/:replayId` waits for Temporal (a closed run's query is a replay on a worker). */
const REPLAY_STATUS_TIMEOUT_MS = 10_000;

/**
 * How long a request waits for Temporal to take a cancel. The cancels run inside the transaction that records them
 * (domain/workflow-start.ts), so an unreachable Temporal must not hold the row's lock for the gRPC retries' full length.
 */
const CANCEL_TIMEOUT_MS = 5_000;

/**
 * How long a start may take. A request that stores and starts (domain/workflow-start.ts) answers 503 and undoes what
 * it stored when the start fails; without a deadline an unreachable Temporal held it for the SDK's gRPC retries
 * (about 20 s) before that. Starts take milliseconds when Temporal is there.
 */
const START_TIMEOUT_MS = 10_000;

/** How long a compute request waits for a run that has recorded its end to close (a workflow task: milliseconds). */
const SEGMENT_COMPUTE_CLOSE_TIMEOUT_MS = 10_000;

/**
 * Emails per delivery workflow. Bounded by the EmailIds search attribute (Temporal limits one attribute value to
 * 2 KB by default: 40 ids of 36 characters fit).
 */
export const MAX_DELIVERY_BATCH = 40;

/**
 * The one place that starts, signals and cancels workflows. Workflow ids come from `definitions.ts` (derived from the
 * business ids, so a retry of the same start is recognised: "already started" counts as success), and starts are
 * typed by the workflow function.
 */
export class TemporalGateway implements CampaignSendControl, AutomationRunControl {
  private constructor(
    readonly client: Client,
    /** Closed by close(); null when the connection is borrowed (a worker's). */
    private readonly connection: Connection | null,
    private readonly taskQueue: string,
    /** Ask for eager starts of automation runs (only a worker's own connection can have them). */
    private readonly eagerStarts = false,
  ) {}

  /**
   * A gateway over a worker's own connection (its owner closes it). Automation runs it starts ask Temporal to start
   * eagerly: the run's first workflow task comes back in the start's answer and goes straight to this process's
   * worker, instead of through the server's task queue and a poll (`system.enableEagerWorkflowStart`, on by
   * default). Without a free workflow-task slot here the start is an ordinary one.
   */
  static overWorkerConnection(connection: NativeConnection, cfg: Config['temporal']): TemporalGateway {
    return new TemporalGateway(new Client({ connection, namespace: cfg.namespace }), null, cfg.taskQueue, true);
  }

  /**
   * A gateway of its own connection. The connection is made at the first call, not here: an API started while Temporal
   * is away serves what needs only the database, and answers 503 for what needs Temporal until it is back.
   */
  static async connect(cfg: Config['temporal']): Promise<TemporalGateway> {
    const connection = Connection.lazy(temporalConnectionOptions(cfg));
    const client = new Client({ connection, namespace: cfg.namespace });
    return new TemporalGateway(client, connection, cfg.taskQueue);
  }

  /**
   * One endpoint's batch of webhook deliveries (`webhook-delivery/<endpointId>/<first delivery id>`, ProjectId);
   * `suffix` names a resend of the same deliveries (POST .../retry) apart from their first run.
   */
  async startWebhookDelivery(input: { projectId: string; endpointId: string; deliveryIds: string[]; contactIds?: (string | null)[]; suffix?: string }): Promise<string> {
    const id = workflowIds.webhookDelivery(input.endpointId, input.deliveryIds[0]!) + (input.suffix ? `/${input.suffix}` : '');
    const args = { projectId: input.projectId, endpointId: input.endpointId, deliveryIds: input.deliveryIds, ...(input.contactIds ? { contactIds: input.contactIds } : {}) };
    return this.startOnce('webhookDelivery', id, [args], [
      { key: SA.ProjectId, value: input.projectId },
    ]);
  }

  /**
   * A replay of an endpoint's events (`webhook-replay/<endpointId>/<replayId>`, ProjectId); a replay id is used once
   * (a second start of an ended one is refused, and counts as started).
   */
  async startWebhookReplay(input: ReplayRequest): Promise<string> {
    return this.startOnce('webhookReplay', workflowIds.webhookReplay(input.endpointId, input.replayId), [input], [{ key: SA.ProjectId, value: input.projectId }], {
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
    });
  }

  /**
   * A replay's run state (`RUNNING`, `COMPLETED`, or how it ended otherwise: `CANCELLED`, `TERMINATED`, `FAILED`,
   * `TIMED_OUT`) and its `progress` query's answer; null: no such replay.
   */
  async webhookReplayStatus(input: { endpointId: string; replayId: string }): Promise<{ state: string; progress: WebhookReplayProgress } | null> {
    const handle = this.client.workflow.getHandle(workflowIds.webhookReplay(input.endpointId, input.replayId));
    try {
      return await this.client.withDeadline(Date.now() + REPLAY_STATUS_TIMEOUT_MS, async () => {
        const { status } = await handle.describe();
        // The latest run of the chain is described; CONTINUED_AS_NEW is only ever seen between two runs.
        return { state: status.name === 'CONTINUED_AS_NEW' ? 'RUNNING' : status.name, progress: await handle.query(webhookReplayProgressQuery) };
      });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  }

  /** A delivery batch (`email-delivery/<first email id>`, ProjectId and EmailIds): the sweeper's restarts are the same start. */
  async startEmailDelivery(input: { projectId: string; emailIds: string[] }): Promise<string> {
    const spec = emailDeliveryStart(input);
    return this.startOnce('emailDelivery', spec.workflowId, spec.args, spec.typedSearchAttributes);
  }

  /** Starts a workflow; one already running under that id counts as started, so a repeated call is not an error. */
  private async startOnce<N extends WorkflowName>(
    name: N,
    workflowId: string,
    args: WorkflowArgs<N>,
    attributes: SearchAttributePair[],
    extra: Pick<WorkflowStartOptions, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy' | 'requestEagerStart'> = {},
  ): Promise<string> {
    await this.startRun(name, workflowId, args, attributes, extra);
    return workflowId;
  }

  /**
   * `startOnce`, answering the run id: the new run's; with `workflowIdConflictPolicy: USE_EXISTING` the running one's
   * when there is one (Temporal joins it instead of refusing); otherwise null when one was running.
   */
  private async startRun<N extends WorkflowName>(
    name: N,
    workflowId: string,
    args: WorkflowArgs<N>,
    attributes: SearchAttributePair[],
    extra: Pick<WorkflowStartOptions, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy' | 'requestEagerStart'> = {},
  ): Promise<string | null> {
    try {
      // The signature types `args` by the workflow; the SDK's conditional option type cannot see that through `N`.
      const options = { taskQueue: this.taskQueue, workflowId, args, typedSearchAttributes: new TypedSearchAttributes(attributes), ...extra };
      const handle = await this.client.withDeadline(Date.now() + START_TIMEOUT_MS, () =>
        this.client.workflow.start<(typeof workflows)[N]>(name, options as WorkflowStartOptions<(typeof workflows)[N]>),
      );
      workflowStarts.inc({ workflow: name, outcome: 'started' });
      return handle.firstExecutionRunId;
    } catch (err) {
      const already = err instanceof WorkflowExecutionAlreadyStartedError;
      workflowStarts.inc({ workflow: name, outcome: already ? 'already_started' : 'error' });
      if (!already) throw err;
      return null;
    }
  }

  /** One cheap call to the Temporal frontend (GetSystemInfo) within `timeoutMs`: the health check's. */
  async ping(timeoutMs: number): Promise<void> {
    await this.client.withDeadline(Date.now() + timeoutMs, () => this.client.workflowService.getSystemInfo({}));
  }

  /** Starts a domain's verification loop; one that is already running counts as started. */
  async startDomainVerification(input: { projectId: string; domainId: string }): Promise<string> {
    return this.startOnce('domainVerification', workflowIds.domainVerification(input.domainId), [{ projectId: input.projectId, domainId: input.domainId }], [
      { key: SA.ProjectId, value: input.projectId },
      { key: SA.DomainId, value: input.domainId },
    ]);
  }

  /**
   * Runs a check now (the workflow's `checkNow` update) and returns its result. A domain whose loop is not running
   * (never started, or ended) gets it started first, so a forced check also repairs a missing workflow.
   */
  async checkDomainNow(input: { projectId: string; domainId: string }, timeoutMs = DOMAIN_CHECK_NOW_TIMEOUT_MS): Promise<DomainCheckResult> {
    const deadline = Date.now() + timeoutMs;
    const update = () =>
      this.client.withDeadline(deadline, () =>
        this.client.workflow.getHandle(workflowIds.domainVerification(input.domainId)).executeUpdate(checkNowUpdate),
      );
    try {
      return await update();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      await this.startDomainVerification(input);
      return update();
    }
  }

  /** Ends a domain's verification loop (the `remove` signal); a loop that is not running is fine. */
  async stopDomainVerification(input: { domainId: string }): Promise<void> {
    await this.ignoreNotFound(() => this.client.workflow.getHandle(workflowIds.domainVerification(input.domainId)).signal(removeSignal));
  }

  /** A verification or password reset email (domain/auth/account-emails.ts); the request id names the run. */
  async startAccountEmail(input: AccountEmailRequest & { requestId: string }): Promise<string> {
    return this.startOnce('accountEmail', workflowIds.accountEmail(input.requestId), [{ purpose: input.purpose, email: input.email }], []);
  }

  /** A project invitation email (domain/auth/account-emails.ts); the request id names the run, ProjectId finds it. */
  async startInvitationEmail(input: { projectId: string; invitationId: string; requestId: string }): Promise<string> {
    return this.startOnce('invitationEmail', workflowIds.invitationEmail(input.requestId), [{ invitationId: input.invitationId }], [{ key: SA.ProjectId, value: input.projectId }]);
  }

  /**
   * Processes a batch of messages the inbound SMTP server stored (`inbound-mail/<first id>`); a repeated start is
   * harmless (already started, or processed: the activity answers what each message did).
   */
  async startInboundMail(input: { inboundIds: string[] }): Promise<string> {
    return this.startOnce('inboundMail', workflowIds.inboundMail(input.inboundIds[0]!), [input], []);
  }

  /** Starts a stored import job's workflow (`contact-import/<jobId>`); already started counts as success. */
  async startContactImport(input: { projectId: string; jobId: string }): Promise<string> {
    return this.startOnce('contactImport', workflowIds.contactImport(input.jobId), [{ projectId: input.projectId, jobId: input.jobId }], this.jobAttributes(input));
  }

  /**
   * Starts a project's reset (`project-reset/<projectId>`, search attribute ProjectId). The id is reused by later
   * resets, one at a time: the API lets a new one start only once the previous one recorded its end, so a run still
   * open under the id is one that has only to close, and is replaced.
   */
  async startProjectReset(input: { projectId: string; resetId: string }): Promise<string> {
    return this.startOnce('projectReset', workflowIds.projectReset(input.projectId), [{ projectId: input.projectId, resetId: input.resetId }], [{ key: SA.ProjectId, value: input.projectId }], {
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.TERMINATE_EXISTING,
    });
  }

  /** Starts a stored bulk job's workflow (`contact-bulk/<jobId>`); already started counts as success. */
  async startContactBulk(input: { projectId: string; jobId: string }): Promise<string> {
    return this.startOnce('contactBulk', workflowIds.contactBulk(input.jobId), [{ projectId: input.projectId, jobId: input.jobId }], this.jobAttributes(input));
  }

  /** Requests cancellation of a contact job's workflow; one that is not running (ended, never started) is fine. */
  async cancelContactJob(input: { kind: 'import' | 'bulk'; jobId: string }): Promise<void> {
    const workflowId = input.kind === 'import' ? workflowIds.contactImport(input.jobId) : workflowIds.contactBulk(input.jobId);
    await this.cancelRun(workflowId);
  }

  /** Starts `campaign-send/<campaignId>`; one already running counts as started. */
  async startCampaignSend(input: { projectId: string; campaignId: string; scheduledFor: string | null }): Promise<string> {
    return this.startOnce('campaignSend', workflowIds.campaignSend(input.campaignId), [input], [
      { key: SA.ProjectId, value: input.projectId },
      { key: SA.CampaignId, value: input.campaignId },
    ]);
  }

  /**
   * Starts `segment-compute/<segmentId>` and returns the run's id. A compute already running is joined (its run id is
   * the answer), so concurrent requests share one run; one that ended leaves the id free for a new run (the default
   * reuse policy, ALLOW_DUPLICATE).
   */
  async startSegmentCompute(input: { projectId: string; segmentId: string }): Promise<string> {
    const spec = segmentComputeStart(input);
    const runId = await this.startRun('segmentCompute', spec.workflowId, spec.args, spec.typedSearchAttributes, {
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    });
    if (!runId) throw new Error('Temporal refused to join the running segment compute'); // USE_EXISTING never refuses
    return runId;
  }

  /** Waits for a run of a segment's compute to close, whatever its outcome; gives up after SEGMENT_COMPUTE_CLOSE_TIMEOUT_MS. */
  async awaitSegmentCompute(input: { segmentId: string; runId: string }): Promise<void> {
    const handle = this.client.workflow.getHandle(workflowIds.segmentCompute(input.segmentId), input.runId);
    try {
      await this.client.withDeadline(Date.now() + SEGMENT_COMPUTE_CLOSE_TIMEOUT_MS, () => handle.result());
    } catch (err) {
      if (!(err instanceof WorkflowFailedError)) throw err;
    }
  }

  /** Wakes a campaign's run to re-read the campaign; a run that is not there is fine (it reads the change when it starts). */
  async wakeCampaignSend(input: { campaignId: string }): Promise<void> {
    await this.ignoreNotFound(() => this.client.workflow.getHandle(workflowIds.campaignSend(input.campaignId)).signal(campaignWakeSignal));
  }

  /** Requests cancellation of a campaign's run; one that is not running is fine. */
  async cancelCampaignSend(input: { campaignId: string }): Promise<void> {
    await this.cancelRun(workflowIds.campaignSend(input.campaignId));
  }

  /**
   * Campaign sends and automation runs that closed since `since` without their own code recording it: terminated (in
   * Web UI, or by an operator's CLI), timed out, or failed. Read from Temporal's visibility store (eventually
   * consistent: a run closed a moment ago may show at the next call). The email sweeper mirrors them into the database
   * (domain/temporal-mirror.ts); nothing on a read path asks Temporal.
   */
  async runsClosedOutside(input: { since: Date }): Promise<ClosedRun[]> {
    const types: WorkflowName[] = ['campaignSend', 'automationRun'];
    const query =
      `WorkflowType IN (${types.map((t) => `'${t}'`).join(', ')}) AND ExecutionStatus IN ('Terminated', 'TimedOut', 'Failed') ` +
      `AND CloseTime > '${input.since.toISOString()}'`;
    const runs: ClosedRun[] = [];
    for await (const wf of this.client.workflow.list({ query })) {
      const status = wf.status.name;
      if (status === 'TERMINATED' || status === 'TIMED_OUT' || status === 'FAILED') runs.push({ workflowId: wf.workflowId, status });
    }
    return runs;
  }

  /**
   * Starts a contact's automation run (its id is `workflowIds.automationRun`, stored with the execution row by the
   * statement that numbers it: `automationRunIdSql`). Its id is never reused (REJECT_DUPLICATE): a start repeated after the run
   * ended (an event delivered twice) is refused like one that is running, and both count as started.
   */
  async startAutomationRun(input: AutomationRunStart): Promise<string> {
    return this.startOnce(
      'automationRun',
      input.workflowId,
      [{ executionId: input.executionId, projectId: input.projectId, automationId: input.automationId, contactId: input.contactId, graph: input.graph, context: input.context }],
      [
        { key: SA.ProjectId, value: input.projectId },
        { key: SA.AutomationId, value: input.automationId },
        { key: SA.ContactId, value: input.contactId },
      ],
      { workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE, ...(this.eagerStarts ? { requestEagerStart: true } : {}) },
    );
  }

  /** Requests cancellation of an automation run; one that is not running is fine. */
  async cancelAutomationRun(input: { workflowId: string }): Promise<void> {
    await this.cancelRun(input.workflowId);
  }

  /** Delivers an event to a run waiting in WAIT_FOR_EVENT; a run that has ended is fine. */
  async signalAutomationEvent(input: { workflowId: string; event: AutomationSignalEvent }): Promise<void> {
    await this.ignoreNotFound(() => this.client.workflow.getHandle(input.workflowId).signal(automationEventSignal, input.event));
  }

  async startAutomationCancelAll(input: { projectId: string; automationId: string; requestId: string; before: string }): Promise<string> {
    return this.startOnce('automationCancelAll', workflowIds.automationCancelAll(input.automationId, input.requestId), [input], [
      { key: SA.ProjectId, value: input.projectId },
      { key: SA.AutomationId, value: input.automationId },
    ]);
  }

  /**
   * Requests cancellation of a run, within CANCEL_TIMEOUT_MS; a run that is not there (ended, never started) is fine.
   * Temporal records the request durably: the run's own cancellation handling records its end in the database.
   */
  private async cancelRun(workflowId: string): Promise<void> {
    await this.ignoreNotFound(() => this.client.withDeadline(Date.now() + CANCEL_TIMEOUT_MS, () => this.client.workflow.getHandle(workflowId).cancel()));
  }

  private async ignoreNotFound(call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }

  private jobAttributes(input: { projectId: string; jobId: string }): SearchAttributePair[] {
    return [
      { key: SA.ProjectId, value: input.projectId },
      { key: SA.JobId, value: input.jobId },
    ];
  }

  /**
   * Makes sure the `email-sweeper` schedule exists (every 5 minutes, overlapping runs skipped); the worker calls this
   * at start, so any number of workers converge on one schedule.
   */
  async ensureEmailSweeperSchedule(): Promise<void> {
    try {
      await this.client.schedule.create({
        scheduleId: EMAIL_SWEEPER_SCHEDULE_ID,
        spec: { intervals: [{ every: '5 minutes' }] },
        action: this.scheduleAction('emailSweeper', [{}]),
        policies: { overlap: ScheduleOverlapPolicy.SKIP },
      });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    }
  }

  /**
   * Makes sure the `segment-recompute-sweep` schedule exists and runs every `everyMs` (overlapping runs skipped); the
   * worker calls this at start. An existing schedule takes the interval of the worker that started last.
   */
  async ensureSegmentRecomputeSchedule(everyMs: number): Promise<void> {
    await this.ensureIntervalSchedule(SEGMENT_RECOMPUTE_SCHEDULE_ID, 'segmentRecomputeSweep', [{}], everyMs);
  }

  /** The `reputation-check` schedule (every REPUTATION_CHECK_INTERVAL), created or brought to the interval given. */
  async ensureReputationSchedule(everyMs: number): Promise<void> {
    await this.ensureIntervalSchedule(REPUTATION_SCHEDULE_ID, 'reputationCheck', [], everyMs);
  }

  /**
   * The `bounce-mailbox` schedule: created or brought to `everyMs` when the bounce mailbox is configured, deleted when it
   * is not (so turning it off is a worker restart without BOUNCE_MAILBOX_HOST). The worker calls this at start.
   */
  async ensureBounceMailboxSchedule(everyMs: number | undefined): Promise<void> {
    if (everyMs !== undefined) {
      await this.ensureIntervalSchedule(BOUNCE_MAILBOX_SCHEDULE_ID, 'bounceMailboxPoll', [{}], everyMs, BOUNCE_MAILBOX_SCHEDULE_ID);
      return;
    }
    try {
      await this.client.schedule.getHandle(BOUNCE_MAILBOX_SCHEDULE_ID).delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
  }

  /** Polls the bounce mailbox now (the schedule's action, outside its times), for operators and tests. */
  async triggerBounceMailboxPoll(): Promise<void> {
    await this.client.schedule.getHandle(BOUNCE_MAILBOX_SCHEDULE_ID).trigger(ScheduleOverlapPolicy.SKIP);
  }

  /** Runs the reputation check now (the schedule's action, outside its times), for operators and tests. */
  async triggerReputationCheck(): Promise<void> {
    await this.client.schedule.getHandle(REPUTATION_SCHEDULE_ID).trigger(ScheduleOverlapPolicy.ALLOW_ALL);
  }

  /** A schedule's action: start workflow `name` with arguments typed by its function, on this task queue. */
  private scheduleAction<N extends WorkflowName>(name: N, args: WorkflowArgs<N>, workflowId?: string) {
    return { type: 'startWorkflow' as const, workflowType: name, taskQueue: this.taskQueue, args, ...(workflowId ? { workflowId } : {}) };
  }

  /** A schedule that starts workflow `name` every `everyMs`, skipping a start while the previous run still runs. */
  private async ensureIntervalSchedule<N extends WorkflowName>(scheduleId: string, name: N, args: WorkflowArgs<N>, everyMs: number, workflowId?: string): Promise<void> {
    const spec = { intervals: [{ every: everyMs }] };
    try {
      await this.client.schedule.create({
        scheduleId,
        spec,
        action: this.scheduleAction(name, args, workflowId),
        policies: { overlap: ScheduleOverlapPolicy.SKIP },
      });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      await this.client.schedule.getHandle(scheduleId).update((prev) => ({ ...prev, spec }));
    }
  }

  async close(): Promise<void> {
    await this.connection?.close();
  }
}
