import fs from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker, type WorkflowBundle } from '@temporalio/worker';
import { latestCommandIsTimer, workflowTestEnv } from '../helpers/workflow-env';
import { TEMPORAL_TEST_SERVER_HELP } from '../../scripts/services/temporal-test-server';
import { automationEventSignal, workflowIds, type AutomationSignalEvent } from '../../temporal/definitions';
import type { automationRun, AutomationRunResult } from '../../temporal/workflows/automation-run.workflow';
import type { automationCancelAll } from '../../temporal/workflows/automation-cancel-all.workflow';
import type { AutomationActivities } from '../../temporal/activities/automation.activities';
import type { AutomationGraph, GraphStep, StepConfigs, StepExits } from '../../domain/automations/graph';
import { sendEmailWithRecords, type ProgressInput, type ProgressResult, type SendStepInput, type StepOutcome, type WebhookStepInput } from '../../domain/automations/run-steps';

/**
 * The automation run's orchestration with activity doubles: each step type calls its activity (or waits) and takes
 * its exit, every step's end and the run's next state are recorded through automationProgress, a contact deleted under
 * the run ends it CANCELLED, a cancellation is recorded before the run ends, and cancel-all pages to the end.
 *
 * Time skipping: the workflow tier's global setup (test/workflow-global-setup.ts) sets TEMPORAL_TEST_SERVER_PATH to a
 * time-skipping Temporal test server (the Java one, fetched once with Maven, or the one the variable already named;
 * the executable takes the port as its argument, as the SDK's time-skipping server does). The file then runs on it,
 * timers fire as soon as nothing else is under way (a 30-day DELAY takes no time) and the tests that need it run too.
 * Without one (no java or mvn) it runs on the dev server of the other workflow tests, with waits of a few seconds, and
 * those tests are skipped, their titles saying how to enable them.
 */
const TEST_SERVER = process.env.TEMPORAL_TEST_SERVER_PATH;
const timeSkipping = Boolean(TEST_SERVER && fs.existsSync(TEST_SERVER));
const skippingTest = (title: string, fn: () => Promise<void>) =>
  timeSkipping ? test(title, fn) : test.skip(`${title} (skipped without a time-skipping test server: ${TEMPORAL_TEST_SERVER_HELP})`, fn);

const SECOND = 1_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** A WAIT_FOR_EVENT timeout that really elapses in these tests: a week in test time, 3 s on the dev server. */
const WAIT_TIMEOUT_MS = timeSkipping ? 7 * DAY : 3 * SECOND;

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  if (timeSkipping) {
    const quiet = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
    [env, bundle] = await Promise.all([
      TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER! } } }),
      bundleWorkflowCode({ workflowsPath: path.join(__dirname, '..', '..', 'temporal', 'workflows'), logger: quiet }),
    ]);
  } else {
    ({ env, bundle } = await workflowTestEnv());
  }
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

// ---- graphs -------------------------------------------------------------------------------------------------------

type StepSpec = { [T in GraphStep['type']]: { type: T; config: StepConfigs[T]; exits?: StepExits; waitMs?: number } }[GraphStep['type']];

/** A frozen graph from steps by id (the first is the entry), as freezeGraph makes it. */
function graph(steps: Record<string, StepSpec>): AutomationGraph {
  const g: AutomationGraph = { version: 1, entry: Object.keys(steps)[0]!, steps: {}, exits: {} };
  for (const [id, s] of Object.entries(steps)) {
    g.steps[id] = { id, type: s.type, name: null, config: s.config, ...(s.waitMs !== undefined ? { waitMs: s.waitMs } : {}) } as GraphStep;
    g.exits[id] = s.exits ?? {};
  }
  return g;
}

const send = (templateId: string, next?: string): StepSpec => ({ type: 'SEND_EMAIL', config: { templateId }, exits: next ? { next } : {} });
const delay = (ms: number, next?: string): StepSpec => ({ type: 'DELAY', config: { duration: { amount: ms / SECOND, unit: 'seconds' } }, waitMs: ms, exits: next ? { next } : {} });
const waitFor = (event: string, ms: number, exits: { event: string; timeout: string }): StepSpec => ({
  type: 'WAIT_FOR_EVENT',
  config: { event, timeout: { amount: ms / SECOND, unit: 'seconds' } },
  waitMs: ms,
  exits,
});
const vipFilter = { operator: 'AND', conditions: [{ field: 'data.vip', operator: 'equals', value: true }] };

// ---- activity doubles ---------------------------------------------------------------------------------------------

type ConditionInput = Parameters<AutomationActivities['automationCondition']>[0];
type UpdateInput = Parameters<AutomationActivities['automationUpdateContact']>[0];
type CancelPageInput = Parameters<AutomationActivities['cancelAutomationRuns']>[0];

interface Calls {
  progress: ProgressInput[];
  send: SendStepInput[];
  condition: ConditionInput[];
  update: UpdateInput[];
  webhook: WebhookStepInput[];
  cancelPages: CancelPageInput[];
}

interface Doubles {
  progress?: (input: ProgressInput) => Promise<Partial<ProgressResult>> | Partial<ProgressResult>;
  send?: (input: SendStepInput) => StepOutcome;
  condition?: (input: ConditionInput) => StepOutcome & { matched: boolean };
  update?: (input: UpdateInput) => StepOutcome;
  webhook?: (input: WebhookStepInput) => StepOutcome;
  cancelPage?: (input: CancelPageInput) => { cancelled: number; cursor: string | null };
}

/** When every wait began (database time, as automationProgress returns it for a WAIT_FOR_EVENT). */
const WAIT_SINCE = '2030-01-01T00:00:00.000Z';
const event = (id: string, name: string, createdAt = '2030-01-01T00:00:05.000Z'): AutomationSignalEvent => ({ id, name, data: { n: id }, createdAt });

/** A worker on its own task queue with the doubles, recording every call; `fn` runs while it polls. */
async function withWorker<T>(doubles: Doubles, fn: (taskQueue: string, calls: Calls) => Promise<T>) {
  const calls: Calls = { progress: [], send: [], condition: [], update: [], webhook: [], cancelPages: [] };
  const activities: AutomationActivities = {
    automationProgress: async (i) => {
      calls.progress.push(i);
      const over = doubles.progress ? await doubles.progress(i) : {};
      return { contactGone: false, ...(i.next?.waitingEvent ? { waitSince: WAIT_SINCE } : {}), ...over };
    },
    automationSendEmail: async (i) => {
      calls.send.push(i);
      return doubles.send?.(i) ?? { emailId: `email-${i.seq}`, status: 'SENT' };
    },
    // The real folding (run-steps.ts) over these doubles: its records land in `progress`, its send in `send`.
    automationSendWithRecords: (i) => sendEmailWithRecords({ progress: activities.automationProgress, send: activities.automationSendEmail }, i),
    automationCondition: async (i) => {
      calls.condition.push(i);
      return doubles.condition?.(i) ?? { matched: true, branch: 'yes' };
    },
    automationUpdateContact: async (i) => {
      calls.update.push(i);
      return doubles.update?.(i) ?? { subscribed: true, updatedKeys: Object.keys(i.config.data ?? {}) };
    },
    automationWebhook: async (i) => {
      calls.webhook.push(i);
      return doubles.webhook?.(i) ?? { ok: true, status: 200, durationMs: 5, response: 'ok' };
    },
    cancelAutomationRuns: async (i) => {
      calls.cancelPages.push(i);
      return doubles.cancelPage?.(i) ?? { cancelled: 0, cursor: null };
    },
  };
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle, activities });
  const outcome = await worker.runUntil(
    fn(taskQueue, calls).then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    ),
  );
  return { outcome, calls };
}

const base = { executionId: 'x-1', projectId: 'p-1', automationId: 'a-1', contactId: 'c-1' };

async function start(taskQueue: string, g: AutomationGraph, context: Record<string, unknown> | null = null): Promise<WorkflowHandle<typeof automationRun>> {
  return env.client.workflow.start<typeof automationRun>('automationRun', {
    taskQueue,
    workflowId: workflowIds.automationRun(base.automationId, `c-${Math.random()}`, 1),
    args: [{ ...base, graph: g, context }],
  });
}

/** Runs a graph to its end. */
async function runGraph(g: AutomationGraph, doubles: Doubles = {}, context: Record<string, unknown> | null = null) {
  let workflowId = '';
  const r = await withWorker(doubles, async (taskQueue) => {
    const handle = await start(taskQueue, g, context);
    workflowId = handle.workflowId;
    return handle.result();
  });
  return { ...r, workflowId };
}

/** Polls (in real time: test time does not move meanwhile) until `check` holds. */
async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts the graph, waits until the run waits in `stepId` (recorded WAITING, and its timer started: the workflow has
 * taken the progress result and sits in sleep() or condition()), then lets `act` signal or cancel, and awaits the end.
 */
async function runUntilWaiting(g: AutomationGraph, stepId: string, act: (handle: WorkflowHandle<typeof automationRun>) => Promise<void>, doubles: Doubles = {}) {
  return withWorker(doubles, async (taskQueue, calls) => {
    const handle = await start(taskQueue, g);
    await until(() => calls.progress.some((p) => p.next?.stepId === stepId && p.next.status === 'WAITING'), `the run to record WAITING in ${stepId}`);
    await until(() => latestCommandIsTimer(handle), `the timer of ${stepId}`);
    await act(handle);
    return handle.result();
  });
}

const finishedOf = (calls: Calls) => calls.progress.filter((p) => p.finished).map((p) => p.finished!);
const completed = (steps: number): { ok: true; value: AutomationRunResult } => ({ ok: true, value: { status: 'COMPLETED', steps, reason: null } });

// ---- tests --------------------------------------------------------------------------------------------------------

describe('automationRun workflow', () => {
  test('SEND_EMAIL, DELAY, UPDATE_CONTACT, WEBHOOK, SEND_EMAIL in order: each activity called once; every step and the end recorded', async () => {
    const g = graph({
      s1: send('t-welcome', 'd1'),
      d1: delay(1 * SECOND, 'u1'),
      u1: { type: 'UPDATE_CONTACT', config: { data: { greeted: true }, subscribed: true }, exits: { next: 'w1' } },
      w1: { type: 'WEBHOOK', config: { url: 'https://hooks.example.com/x', headers: { Authorization: 'Bearer abc' } }, exits: { next: 's2' } },
      s2: send('t-follow-up'),
    });
    const { outcome, calls, workflowId } = await runGraph(g, {}, { plan: 'pro' });
    expect(outcome).toEqual(completed(5));

    expect(calls.send).toEqual([
      { ...omitAutomation(base), workflowId, stepId: 's1', seq: 1, config: { templateId: 't-welcome' }, context: { plan: 'pro' } },
      { ...omitAutomation(base), workflowId, stepId: 's2', seq: 5, config: { templateId: 't-follow-up' }, context: { plan: 'pro' } },
    ]);
    expect(calls.update).toEqual([{ ...omitAutomation(base), config: { data: { greeted: true }, subscribed: true } }]);
    expect(calls.webhook).toEqual([{ ...base, workflowId, stepId: 'w1', seq: 4, config: { url: 'https://hooks.example.com/x', headers: { Authorization: 'Bearer abc' } } }]);
    expect(calls.condition).toEqual([]);

    // Each progress call records the step that ended and where the run goes on; the last one the end.
    const ref = omitAutomation(base);
    expect(calls.progress).toEqual([
      { ...ref, finished: null, next: { stepId: 's1', status: 'RUNNING' } },
      { ...ref, finished: expect.objectContaining({ stepId: 's1', type: 'SEND_EMAIL', seq: 1, outcome: { emailId: 'email-1', status: 'SENT' } }), next: { stepId: 'd1', status: 'WAITING', wakeInMs: 1000 } },
      { ...ref, finished: expect.objectContaining({ stepId: 'd1', type: 'DELAY', seq: 2, outcome: { waitedMs: 1000 } }), next: { stepId: 'u1', status: 'RUNNING' } },
      { ...ref, finished: expect.objectContaining({ stepId: 'u1', type: 'UPDATE_CONTACT', seq: 3, outcome: { subscribed: true, updatedKeys: ['greeted'] } }), next: { stepId: 'w1', status: 'RUNNING' } },
      { ...ref, finished: expect.objectContaining({ stepId: 'w1', type: 'WEBHOOK', seq: 4, outcome: { ok: true, status: 200, durationMs: 5, response: 'ok' } }), next: { stepId: 's2', status: 'RUNNING' } },
      { ...ref, finished: expect.objectContaining({ stepId: 's2', type: 'SEND_EMAIL', seq: 5 }), end: { status: 'COMPLETED', reason: null } },
    ]);
    const finished = finishedOf(calls);
    expect(finished.map((f) => f.seq)).toEqual([1, 2, 3, 4, 5]);
    // startedAt is workflow time, in order; the DELAY step took its second.
    for (let i = 1; i < finished.length; i++) expect(finished[i]!.startedAt).toBeGreaterThanOrEqual(finished[i - 1]!.startedAt);
    expect(finished[2]!.startedAt - finished[1]!.startedAt).toBeGreaterThanOrEqual(1000);
  });

  skippingTest('a 30-day DELAY completes at once in test time', async () => {
    const g = graph({ d1: delay(30 * DAY, 's1'), s1: send('t-later') });
    const t0 = Date.now();
    const { outcome, calls } = await runGraph(g);
    expect(Date.now() - t0).toBeLessThan(30_000);
    expect(outcome).toEqual(completed(2));
    expect(calls.progress[0]!.next).toEqual({ stepId: 'd1', status: 'WAITING', wakeInMs: 30 * DAY });
    const [d, s] = finishedOf(calls);
    expect(d).toMatchObject({ stepId: 'd1', seq: 1, outcome: { waitedMs: 30 * DAY } });
    // The send step began 30 days (of workflow time) after the DELAY did.
    expect(s!.startedAt - d!.startedAt).toBeGreaterThanOrEqual(30 * DAY);
    expect(calls.send.map((c) => c.stepId)).toEqual(['s1']);
  });

  describe('WAIT_FOR_EVENT', () => {
    const waitGraph = (timeoutMs: number) => graph({ w: waitFor('checkout', timeoutMs, { event: 'yes', timeout: 'no' }), yes: send('t-thanks'), no: send('t-reminder') });

    test('the awaited event (signal) takes the event branch; the wait is recorded WAITING with its event and timeout', async () => {
      const { outcome, calls } = await runUntilWaiting(waitGraph(HOUR), 'w', (h) => h.signal(automationEventSignal, event('e-1', 'checkout')));
      expect(outcome).toEqual(completed(2));
      expect(calls.progress[0]!.next).toEqual({ stepId: 'w', status: 'WAITING', wakeInMs: HOUR, waitingEvent: 'checkout' });
      expect(finishedOf(calls)[0]).toMatchObject({ stepId: 'w', type: 'WAIT_FOR_EVENT', seq: 1, outcome: { branch: 'event', eventId: 'e-1', eventName: 'checkout' } });
      expect(calls.send.map((c) => c.stepId)).toEqual(['yes']);
    });

    test('a signal of another event, or of an event recorded before the wait began, is ignored', async () => {
      const { outcome, calls } = await runUntilWaiting(waitGraph(HOUR), 'w', async (h) => {
        await h.signal(automationEventSignal, event('e-other', 'opened'));
        await h.signal(automationEventSignal, event('e-early', 'checkout', '2029-12-31T23:59:59.000Z'));
        await h.signal(automationEventSignal, event('e-good', 'checkout'));
      });
      expect(outcome).toEqual(completed(2));
      // The event that counts is kept: not the other name, not the earlier one.
      expect(finishedOf(calls)[0]!.outcome).toEqual({ branch: 'event', eventId: 'e-good', eventName: 'checkout' });
      expect(calls.send.map((c) => c.stepId)).toEqual(['yes']);
    });

    test(`no matching event before the timeout (${timeSkipping ? 'a week, in test time' : '3 s'}): the timeout branch, ignored signals notwithstanding`, async () => {
      const { outcome, calls } = await runUntilWaiting(waitGraph(WAIT_TIMEOUT_MS), 'w', async (h) => {
        await h.signal(automationEventSignal, event('e-other', 'opened'));
        await h.signal(automationEventSignal, event('e-early', 'checkout', '2029-12-31T23:59:59.000Z'));
      });
      expect(outcome).toEqual(completed(2));
      expect(calls.progress[0]!.next).toEqual({ stepId: 'w', status: 'WAITING', wakeInMs: WAIT_TIMEOUT_MS, waitingEvent: 'checkout' });
      const [w, s] = finishedOf(calls);
      expect(w!.outcome).toEqual({ branch: 'timeout' });
      expect(s!.startedAt - w!.startedAt).toBeGreaterThanOrEqual(WAIT_TIMEOUT_MS);
      expect(calls.send.map((c) => c.stepId)).toEqual(['no']);
    });

    test('an event automationProgress found (recorded before the consumer could signal) takes the event branch without a signal', async () => {
      const pre = event('e-pre', 'checkout');
      const { outcome, calls } = await runGraph(waitGraph(HOUR), { progress: (i) => (i.next?.waitingEvent ? { waitedEvent: pre } : {}) });
      expect(outcome).toEqual(completed(2));
      expect(finishedOf(calls)[0]!.outcome).toEqual({ branch: 'event', eventId: 'e-pre', eventName: 'checkout' });
      expect(calls.send.map((c) => c.stepId)).toEqual(['yes']);
    });
  });

  test.each([
    [true, 'yes'],
    [false, 'no'],
  ])('CONDITION matched=%s takes the %s branch', async (matched, branch) => {
    const g = graph({ c: { type: 'CONDITION', config: { filter: vipFilter }, exits: { yes: 'vip', no: 'regular' } }, vip: send('t-vip'), regular: send('t-regular') });
    const { outcome, calls } = await runGraph(g, { condition: () => ({ matched, branch }) });
    expect(outcome).toEqual(completed(2));
    expect(calls.condition).toEqual([{ ...omitAutomation(base), filter: vipFilter }]);
    expect(finishedOf(calls)[0]).toMatchObject({ stepId: 'c', type: 'CONDITION', seq: 1, outcome: { matched, branch } });
    expect(calls.send.map((c) => c.stepId)).toEqual([matched ? 'vip' : 'regular']);
  });

  test('a WEBHOOK refused for good (WebhookRefused) is not retried: recorded as { ok: false } and the run goes on', async () => {
    const g = graph({ w: { type: 'WEBHOOK', config: { url: 'https://hooks.example.com/gone' }, exits: { next: 's' } }, s: send('t-after') });
    const { outcome, calls } = await runGraph(g, {
      // Not flagged non-retryable here: the workflow's retry policy names the type.
      webhook: () => {
        throw ApplicationFailure.create({ type: 'WebhookRefused', message: 'The receiver answered 404', details: [{ status: 404 }] });
      },
    });
    expect(outcome).toEqual(completed(2));
    expect(calls.webhook).toHaveLength(1);
    expect(finishedOf(calls)[0]).toMatchObject({ stepId: 'w', type: 'WEBHOOK', seq: 1, outcome: { ok: false, error: 'The receiver answered 404' } });
    expect(calls.send.map((c) => c.stepId)).toEqual(['s']);
  });

  test('EXIT ends the run there (a transition out of it, which validation never lets through, is not followed)', async () => {
    const g = graph({ s1: send('t-1', 'x'), x: { type: 'EXIT', config: {}, exits: { next: 's2' } }, s2: send('t-2') });
    const { outcome, calls } = await runGraph(g);
    expect(outcome).toEqual(completed(2));
    expect(calls.send.map((c) => c.stepId)).toEqual(['s1']);
    expect(calls.progress.at(-1)).toEqual({ ...omitAutomation(base), finished: expect.objectContaining({ stepId: 'x', type: 'EXIT', seq: 2, outcome: { exited: true } }), end: { status: 'COMPLETED', reason: null } });
  });

  describe('the contact deleted under the run: CANCELLED', () => {
    test('found by automationProgress before a step: the step is not taken', async () => {
      const g = graph({ s1: send('t-1', 's2'), s2: send('t-2') });
      const { outcome, calls } = await runGraph(g, { progress: (i) => ({ contactGone: i.next?.stepId === 's2' }) });
      expect(outcome).toEqual({ ok: true, value: { status: 'CANCELLED', steps: 1, reason: 'The contact was deleted' } });
      expect(calls.send.map((c) => c.stepId)).toEqual(['s1']);
      // s1's end was recorded with the progress call that found the contact gone; the end call repeats nothing.
      expect(calls.progress.at(-2)).toMatchObject({ finished: { stepId: 's1', seq: 1 }, next: { stepId: 's2' } });
      expect(calls.progress.at(-1)).toEqual({ ...omitAutomation(base), finished: null, end: { status: 'CANCELLED', reason: 'The contact was deleted' } });
    });

    test('reported by a step: recorded with that step, and the run goes no further', async () => {
      const g = graph({ u: { type: 'UPDATE_CONTACT', config: { subscribed: false }, exits: { next: 's' } }, s: send('t-after') });
      const { outcome, calls } = await runGraph(g, { update: () => ({ contactGone: true }) });
      expect(outcome).toEqual({ ok: true, value: { status: 'CANCELLED', steps: 1, reason: 'The contact was deleted' } });
      expect(calls.send).toEqual([]);
      expect(calls.progress.at(-1)).toEqual({
        ...omitAutomation(base),
        finished: expect.objectContaining({ stepId: 'u', type: 'UPDATE_CONTACT', seq: 1, outcome: { contactGone: true } }),
        end: { status: 'CANCELLED', reason: 'The contact was deleted' },
      });
    });
  });

  test('cancelled during a DELAY: CANCELLED recorded (outside the cancelled scope), no later step, and the workflow ends cancelled', async () => {
    const g = graph({ s1: send('t-1', 'd'), d: delay(30 * DAY, 's2'), s2: send('t-2') });
    const recordedEnds: ProgressInput[] = [];
    const { outcome, calls } = await runUntilWaiting(g, 'd', async (h) => void (await h.cancel()), {
      progress: async (i) => {
        if (i.end) {
          await new Promise((r) => setTimeout(r, 200)); // the workflow waits for the record before it ends
          recordedEnds.push(i);
        }
        return {};
      },
    });
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(calls.send.map((c) => c.stepId)).toEqual(['s1']);
    // s1's end and the DELAY's wait are written by s1's own activity (the record after the send); the end adds nothing.
    expect(calls.progress[1]).toMatchObject({ finished: { stepId: 's1', seq: 1 }, next: { stepId: 'd', status: 'WAITING', wakeInMs: 30 * DAY } });
    expect(recordedEnds).toEqual([{ ...omitAutomation(base), finished: null, end: { status: 'CANCELLED', reason: 'Cancelled' } }]);
    expect(calls.progress.at(-1)).toBe(recordedEnds[0]);
  });

  test('a graph that names a missing step: FAILED recorded with the reason, and the workflow fails', async () => {
    const g = graph({ s1: send('t-1', 'nowhere') });
    const { outcome, calls } = await runGraph(g);
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(WorkflowFailedError);
    expect(calls.progress.at(-1)).toEqual({
      ...omitAutomation(base),
      finished: expect.objectContaining({ stepId: 's1', seq: 1 }),
      end: { status: 'FAILED', reason: 'The graph has no step nowhere' },
    });
  });
});

describe('automationCancelAll workflow', () => {
  test('asks page after page until the cursor is null, and returns how many runs were asked', async () => {
    const pages: Record<string, { cancelled: number; cursor: string | null }> = { start: { cancelled: 200, cursor: 'c-200' }, 'c-200': { cancelled: 200, cursor: 'c-400' }, 'c-400': { cancelled: 17, cursor: null } };
    const input = { projectId: 'p-1', automationId: 'a-1', before: '2030-01-01T00:00:00.000Z' };
    const { outcome, calls } = await withWorker({ cancelPage: (i) => pages[i.cursor ?? 'start']! }, (taskQueue) =>
      env.client.workflow.execute<typeof automationCancelAll>('automationCancelAll', { taskQueue, workflowId: workflowIds.automationCancelAll('a-1', `r-${Math.random()}`), args: [input] }),
    );
    expect(outcome).toEqual({ ok: true, value: { cancelled: 417 } });
    expect(calls.cancelPages).toEqual([
      { automationId: 'a-1', before: input.before, cursor: null },
      { automationId: 'a-1', before: input.before, cursor: 'c-200' },
      { automationId: 'a-1', before: input.before, cursor: 'c-400' },
    ]);
  });
});

/** The run reference the local activities get (without the automation id). */
function omitAutomation(ref: typeof base) {
  const { automationId: _ignored, ...rest } = ref;
  return rest;
}
