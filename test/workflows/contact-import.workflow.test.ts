import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, WorkflowFailedError, type WorkflowHandle, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { ContactJobActivities } from '../../temporal/activities/contact-jobs.activities';
import type { contactImport, ContactImportInput } from '../../temporal/workflows/contact-import.workflow';

/**
 * The import workflow's orchestration with activity doubles, on a throw-away Temporal dev server: slices until the
 * file is done, continue-as-new, a rejected file, cancellation.
 */
let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  ({ env, bundle } = await workflowTestEnv());
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

type Doubles = Pick<ContactJobActivities, 'startContactImport' | 'importContactChunks' | 'completeContactImport' | 'endContactJob'>;

/** Runs one contactImport workflow with the given doubles until `until` settles; every activity call is recorded. */
async function run(doubles: Partial<Doubles>, input: Partial<ContactImportInput> = {}, until?: (handle: WorkflowHandle<typeof contactImport>) => Promise<unknown>) {
  const calls: { activity: keyof Doubles; input: unknown }[] = [];
  const recorded = <K extends keyof Doubles>(activity: K, fn: Doubles[K]) =>
    (async (i: unknown) => {
      calls.push({ activity, input: i });
      return (fn as (i: unknown) => Promise<unknown>)(i);
    }) as Doubles[K];
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: {
      startContactImport: recorded('startContactImport', doubles.startContactImport ?? (async () => ({ running: true }))),
      importContactChunks: recorded('importContactChunks', doubles.importContactChunks ?? (async () => ({ done: true }))),
      completeContactImport: recorded('completeContactImport', doubles.completeContactImport ?? (async () => undefined)),
      endContactJob: recorded('endContactJob', doubles.endContactJob ?? (async () => undefined)),
    },
  });
  const handle = await env.client.workflow.start<typeof contactImport>('contactImport', {
    taskQueue,
    workflowId: `contact-import/test-${Math.random()}`,
    args: [{ projectId: 'p', jobId: 'job-1', ...input }],
  });
  const outcome = await worker.runUntil((until ?? ((h) => h.result()))(handle).then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  ));
  return { calls, handle, outcome, called: (a: keyof Doubles) => calls.filter((c) => c.activity === a) };
}

/** The ids of the runs of one workflow id, first to last, following continue-as-new in each run's history. */
async function runChain(handle: WorkflowHandleWithFirstExecutionRunId): Promise<string[]> {
  const runs = [handle.firstExecutionRunId];
  for (;;) {
    const history = await env.client.workflow.getHandle(handle.workflowId, runs.at(-1)).fetchHistory();
    const next = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return runs;
    runs.push(next);
  }
}

describe('contactImport workflow', () => {
  test('imports slice after slice until the file is done, then completes the job', async () => {
    const results = [false, false, true];
    const { outcome, called } = await run({ importContactChunks: async () => ({ done: results.shift()! }) });
    expect(outcome).toEqual({ ok: true, value: undefined });
    expect(called('startContactImport')).toEqual([{ activity: 'startContactImport', input: { jobId: 'job-1' } }]);
    expect(called('importContactChunks')).toHaveLength(3);
    expect(called('completeContactImport')).toEqual([{ activity: 'completeContactImport', input: { jobId: 'job-1' } }]);
    expect(called('endContactJob')).toEqual([]);
  }, 60_000);

  test('continues as new after maxSlicesPerRun slices, keeps the limit, does not start the job again, and still completes', async () => {
    let slices = 0;
    const { outcome, called, handle } = await run({ importContactChunks: async () => ({ done: ++slices === 5 }) }, { maxSlicesPerRun: 2 });
    expect(outcome.ok).toBe(true);
    expect(called('importContactChunks')).toHaveLength(5);
    expect(called('startContactImport')).toHaveLength(1); // the continued runs are told the job is RUNNING
    expect(called('completeContactImport')).toHaveLength(1);
    // 2 + 2 + 1 slices: two continue-as-new, three runs, the last one completed with the same input otherwise.
    const runs = await runChain(handle);
    expect(runs).toHaveLength(3);
    const last = await env.client.workflow.getHandle(handle.workflowId, runs[2]).describe();
    expect(last.status.name).toBe('COMPLETED');
    const firstEvent = (await env.client.workflow.getHandle(handle.workflowId, runs[2]).fetchHistory()).events![0]!;
    const payload = firstEvent.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    expect(JSON.parse(Buffer.from(payload.data!).toString())).toEqual({ projectId: 'p', jobId: 'job-1', started: true, maxSlicesPerRun: 2 });
  }, 60_000);

  test('a file that is not usable CSV fails the job with the activity\'s message and is not retried', async () => {
    const message = 'The file is not valid CSV (near line 3): the quoted field that starts on line 3 is never closed';
    const { outcome, called } = await run({
      importContactChunks: async () => {
        throw ApplicationFailure.create({ nonRetryable: true, type: 'CsvRejected', message });
      },
    });
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as WorkflowFailedError).cause).toMatchObject({ type: 'ImportFailed', message });
    expect(called('importContactChunks')).toHaveLength(1);
    expect(called('endContactJob')).toEqual([{ activity: 'endContactJob', input: { jobId: 'job-1', status: 'FAILED', message } }]);
    expect(called('completeContactImport')).toEqual([]);
  }, 60_000);

  test('cancelling the workflow while it imports marks the job CANCELLED and ends the workflow cancelled', async () => {
    let importing!: () => void;
    const started = new Promise<void>((resolve) => (importing = resolve));
    const { outcome, called } = await run(
      {
        // Like the real activity: heartbeats while it works, until the cancellation reaches it.
        importContactChunks: async () => {
          importing();
          for (;;) {
            Context.current().heartbeat();
            await Context.current().sleep(100);
          }
        },
      },
      {},
      async (handle) => {
        await started;
        await handle.cancel();
        return handle.result();
      },
    );
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(WorkflowFailedError);
    expect((error as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(called('endContactJob')).toEqual([{ activity: 'endContactJob', input: { jobId: 'job-1', status: 'CANCELLED', message: 'The import was cancelled' } }]);
    expect(called('completeContactImport')).toEqual([]);
  }, 60_000);

  test('a job that ended before its workflow started it (cancelled while QUEUED) imports nothing', async () => {
    const { outcome, called } = await run({ startContactImport: async () => ({ running: false }) });
    expect(outcome).toEqual({ ok: true, value: undefined });
    expect(called('importContactChunks')).toEqual([]);
    expect(called('completeContactImport')).toEqual([]);
    expect(called('endContactJob')).toEqual([]);
  }, 60_000);
});
