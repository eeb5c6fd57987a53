import {
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type { AutomationActivities } from '../activities/automation.activities';
import { automationEventSignal, type AutomationSignalEvent } from '../definitions';
import type { AutomationGraph, GraphStep } from '../../domain/automations/graph';
import type { ProgressInput, ProgressResult, StepOutcome } from '../../domain/automations/run-steps';

export interface AutomationRunInput {
  executionId: string;
  projectId: string;
  automationId: string;
  contactId: string;
  /** The frozen graph the run carries: edits of the workflow never change a run under way. */
  graph: AutomationGraph;
  /** `{{ context.* }}` in SEND_EMAIL templates; the trigger event's data for event-started runs. */
  context: Record<string, unknown> | null;
  /** Carried over continue-as-new: where the run goes on. */
  resume?: { stepId: string; seq: number };
}

export interface AutomationRunResult {
  status: 'COMPLETED' | 'CANCELLED';
  steps: number;
  reason: string | null;
}

// Short steps are local activities: they run in this worker right after the workflow task, without a round trip
// through the server per step. A failure (database down, a transient SMTP reply) is retried with backoff; after a
// minute of local retries the SDK schedules further attempts with timers, so a long outage is a durable wait.
const local = proxyLocalActivities<AutomationActivities>({
  startToCloseTimeout: '1 minute',
  localRetryThreshold: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 minutes' },
});

// A WEBHOOK calls someone else's server: a normal activity with its own backoff. A 4xx other than 408/425/429, or an
// address that is refused, fails at once (non-retryable); anything else is retried for up to a day.
const remote = proxyActivities<AutomationActivities>({
  startToCloseTimeout: '1 minute',
  scheduleToCloseTimeout: '1 day',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '30 minutes', nonRetryableErrorTypes: ['WebhookRefused'] },
});

/** Steps taken before the run continues as new (keeps a looping run's history bounded). */
const STEPS_PER_RUN = 500;

/**
 * One contact's run through an automation graph: `automation/<automationId>/<contactId>/<n>`. Each step is taken
 * in order; its outcome and the run's state (step under way, waiting until when) are written to the execution row
 * before the next step (automationProgress), so the API shows a run without asking Temporal. DELAY is a durable
 * timer; WAIT_FOR_EVENT waits for the `event` signal (sent by the automations outbox consumer for the contact's
 * matching events) or its timeout. A cancellation (API, cancel-all, Web UI) ends the run as CANCELLED.
 */
export async function automationRun(input: AutomationRunInput): Promise<AutomationRunResult> {
  const { graph } = input;
  const base = { executionId: input.executionId, projectId: input.projectId, contactId: input.contactId };
  let waitingFor: { event: string; since: number } | null = null;
  let received: AutomationSignalEvent | null = null;
  // Signals of the awaited name that arrive before the wait's start time is known (its progress record under way).
  let early: AutomationSignalEvent[] = [];
  setHandler(automationEventSignal, (e) => {
    // Only an event of the awaited name recorded since the wait began counts; a late signal of an earlier wait does not.
    if (!waitingFor || received || e.name !== waitingFor.event) return;
    if (waitingFor.since === Infinity) {
      if (early.length < 100) early.push(e);
    } else if (Date.parse(e.createdAt) >= waitingFor.since) received = e;
  });

  let stepId: string | undefined = input.resume?.stepId ?? graph.entry;
  let seq = input.resume?.seq ?? 0;
  let finished: { stepId: string; type: GraphStep['type']; seq: number; startedAt: number; outcome: StepOutcome } | null = null;
  let end: { status: 'COMPLETED' | 'CANCELLED'; reason: string | null } = { status: 'COMPLETED', reason: null };
  // Runs started since this change write their progress records inside the SEND_EMAIL step's activity (one local
  // activity instead of three); runs started before replay as they were recorded.
  const folded = patched('automation-records-in-send-step');
  // The current step's record before it was already written by the previous step's activity.
  let recorded = false;
  // The run's end was written by the last step's activity.
  let endRecorded = false;
  try {
    while (stepId) {
      const step: GraphStep | undefined = graph.steps[stepId];
      if (!step) throw ApplicationFailure.nonRetryable(`The graph has no step ${stepId}`, 'InvalidGraph');
      if (seq > 0 && seq % STEPS_PER_RUN === 0 && !input.resume) {
        // Record what finished before handing over, so the new run starts clean.
        if (finished) await local.automationProgress({ ...base, finished, next: { stepId, status: 'RUNNING' } });
        return await continueAsNew<typeof automationRun>({ ...input, resume: { stepId, seq } });
      }
      input.resume = undefined;
      const waits = step.type === 'DELAY' || step.type === 'WAIT_FOR_EVENT' ? (step.waitMs ?? 0) : 0;
      if (step.type === 'WAIT_FOR_EVENT') {
        waitingFor = { event: step.config.event, since: Infinity };
        received = null;
      }
      const next: ProgressInput['next'] = {
        stepId,
        status: waits ? 'WAITING' : 'RUNNING',
        wakeInMs: waits || undefined,
        waitingEvent: step.type === 'WAIT_FOR_EVENT' ? step.config.event : undefined,
      };
      // A folded SEND_EMAIL writes its own record before it; a record the previous step wrote is not written again.
      const before = folded && step.type === 'SEND_EMAIL' && !recorded ? { finished, next } : undefined;
      const progress: ProgressResult = recorded || before ? { contactGone: false } : await local.automationProgress({ ...base, finished, next });
      recorded = false;
      if (progress.contactGone) {
        end = { status: 'CANCELLED', reason: 'The contact was deleted' };
        finished = null;
        break;
      }
      seq++;
      const startedAt = Date.now();
      let outcome: StepOutcome;
      let exit: string | undefined;
      switch (step.type) {
        case 'SEND_EMAIL': {
          const send = { ...base, workflowId: workflowInfo().workflowId, stepId, seq, config: step.config, context: input.context };
          exit = graph.exits[stepId]?.next;
          if (!folded) {
            outcome = await local.automationSendEmail(send);
            break;
          }
          // The record after the send, when what follows needs nothing back from it: the run's end, or a DELAY's wait
          // (the same record the DELAY would write before itself).
          const following = exit ? graph.steps[exit] : undefined;
          const after = !exit
            ? { end: { status: 'COMPLETED' as const, reason: null }, startedAt }
            : following?.type === 'DELAY'
              ? { next: { stepId: exit, status: 'WAITING' as const, wakeInMs: following.waitMs || undefined }, startedAt }
              : undefined;
          const r = await local.automationSendWithRecords({ ...send, before, after });
          outcome = r.outcome;
          if (r.gone === 'before') {
            // As when the record before a step finds the contact gone: the step did not start.
            end = { status: 'CANCELLED', reason: 'The contact was deleted' };
            finished = null;
            seq--;
            stepId = undefined;
            continue;
          }
          if (r.recorded) {
            finished = null;
            if (r.gone === 'after') {
              end = { status: 'CANCELLED', reason: 'The contact was deleted' };
              stepId = undefined;
              continue;
            }
            recorded = exit !== undefined;
            endRecorded = exit === undefined;
            stepId = exit;
            continue;
          }
          break;
        }
        case 'DELAY':
          await sleep(waits);
          outcome = { waitedMs: waits };
          exit = graph.exits[stepId]?.next;
          break;
        case 'WAIT_FOR_EVENT': {
          const since = Date.parse(progress.waitSince!);
          waitingFor!.since = since;
          // An event recorded after the wait began but before the consumer could see the wait came back with the progress.
          if (progress.waitedEvent && !received) received = progress.waitedEvent;
          if (!received) received = early.find((e) => Date.parse(e.createdAt) >= since) ?? null;
          early = [];
          const got = received !== null || (await condition(() => received !== null, waits));
          const event = received as AutomationSignalEvent | null;
          waitingFor = null;
          outcome = got && event ? { branch: 'event', eventId: event.id, eventName: event.name } : { branch: 'timeout' };
          exit = graph.exits[stepId]?.[got ? 'event' : 'timeout'];
          break;
        }
        case 'CONDITION': {
          const r = await local.automationCondition({ ...base, filter: step.config.filter });
          outcome = r;
          exit = graph.exits[stepId]?.[r.matched ? 'yes' : 'no'];
          break;
        }
        case 'WEBHOOK':
          try {
            outcome = await remote.automationWebhook({ ...base, automationId: input.automationId, workflowId: workflowInfo().workflowId, stepId, seq, config: step.config });
          } catch (err) {
            // Given up (refused, a final 4xx, or a day of retries): the step records the failure and the run goes on.
            if (isCancellation(err)) throw err;
            outcome = { ok: false, error: err instanceof Error ? rootMessage(err) : String(err) };
          }
          exit = graph.exits[stepId]?.next;
          break;
        case 'UPDATE_CONTACT':
          outcome = await local.automationUpdateContact({ ...base, config: step.config });
          exit = graph.exits[stepId]?.next;
          break;
        case 'EXIT':
          outcome = { exited: true };
          exit = undefined;
          break;
      }
      finished = { stepId, type: step.type, seq, startedAt, outcome };
      if (outcome.contactGone) {
        end = { status: 'CANCELLED', reason: 'The contact was deleted' };
        break;
      }
      stepId = exit;
    }
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() =>
        local.automationProgress({ ...base, finished, end: { status: 'CANCELLED', reason: 'Cancelled' } }),
      );
    } else {
      const reason = err instanceof Error ? rootMessage(err) : String(err);
      await local.automationProgress({ ...base, finished, end: { status: 'FAILED', reason } });
      // A plain error would only fail the workflow task (retried for ever) while the row already says FAILED.
      if (!(err instanceof TemporalFailure)) throw ApplicationFailure.nonRetryable(reason, 'AutomationFailed');
    }
    throw err;
  }
  if (!endRecorded) await local.automationProgress({ ...base, finished, end });
  return { status: end.status, steps: seq, reason: end.reason };
}

/** The innermost cause's message (an activity failure wraps the error that says what went wrong). */
function rootMessage(err: Error): string {
  let e: Error = err;
  while (e.cause instanceof Error) e = e.cause;
  return e.message;
}
