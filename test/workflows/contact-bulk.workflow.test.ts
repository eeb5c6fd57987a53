import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { ContactJobActivities } from '../../temporal/activities/contact-jobs.activities';
import type { contactBulk } from '../../temporal/workflows/contact-bulk.workflow';

/** The bulk job workflow's orchestration with activity doubles: success, a retried transient error, failure, cancellation. */
let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  ({ env, bundle } = await workflowTestEnv());
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

type Doubles = Pick<ContactJobActivities, 'runContactBulkJob' | 'endContactJob'>;

async function run(runContactBulkJob: Doubles['runContactBulkJob'], until?: (handle: WorkflowHandle<typeof contactBulk>) => Promise<unknown>) {
  const calls: { activity: keyof Doubles; input: unknown }[] = [];
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: {
      runContactBulkJob: async (i: { jobId: string }) => {
        calls.push({ activity: 'runContactBulkJob', input: i });
        return runContactBulkJob(i);
      },
      endContactJob: async (i: Parameters<Doubles['endContactJob']>[0]) => void calls.push({ activity: 'endContactJob', input: i }),
    },
  });
  const handle = await env.client.workflow.start<typeof contactBulk>('contactBulk', {
    taskQueue,
    workflowId: `contact-bulk/test-${Math.random()}`,
    args: [{ projectId: 'p', jobId: 'job-2' }],
  });
  const outcome = await worker.runUntil((until ?? ((h) => h.result()))(handle).then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  ));
  return { outcome, called: (a: keyof Doubles) => calls.filter((c) => c.activity === a) };
}

const failure = (outcome: { ok: boolean; error?: unknown }) => {
  expect(outcome.ok).toBe(false);
  expect(outcome.error).toBeInstanceOf(WorkflowFailedError);
  return (outcome.error as WorkflowFailedError).cause;
};

describe('contactBulk workflow', () => {
  test('runs the job once and completes; the job is not ended by the workflow', async () => {
    const { outcome, called } = await run(async () => undefined);
    expect(outcome).toEqual({ ok: true, value: undefined });
    expect(called('runContactBulkJob')).toEqual([{ activity: 'runContactBulkJob', input: { jobId: 'job-2' } }]);
    expect(called('endContactJob')).toEqual([]);
  }, 60_000);

  test('a transient error (database unreachable) is retried and the job completes', async () => {
    let attempts = 0;
    const { outcome, called } = await run(async () => {
      if (++attempts === 1) throw new Error('connect ECONNREFUSED');
    });
    expect(outcome.ok).toBe(true);
    expect(called('runContactBulkJob')).toHaveLength(2);
    expect(called('endContactJob')).toEqual([]);
  }, 60_000);

  test('a failure that is not retried fails the job (FAILED with a message) and the workflow', async () => {
    const { outcome, called } = await run(async () => {
      throw ApplicationFailure.create({ nonRetryable: true, message: 'broken' });
    });
    expect(failure(outcome)).toMatchObject({ type: 'BulkJobFailed', message: 'The bulk job failed' });
    expect(called('endContactJob')).toEqual([{ activity: 'endContactJob', input: { jobId: 'job-2', status: 'FAILED', message: 'The bulk job failed' } }]);
  }, 60_000);

  test('cancelling the workflow while the job runs marks it CANCELLED and ends the workflow cancelled', async () => {
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    const { outcome, called } = await run(
      async () => {
        running();
        await Context.current().sleep(60_000); // rejects once the worker shuts down after the test
      },
      async (handle) => {
        await started;
        await handle.cancel();
        return handle.result();
      },
    );
    expect(failure(outcome)).toBeInstanceOf(CancelledFailure);
    expect(called('endContactJob')).toEqual([{ activity: 'endContactJob', input: { jobId: 'job-2', status: 'CANCELLED', message: 'The bulk job was cancelled' } }]);
  }, 60_000);
});
