import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { SegmentActivities } from '../../temporal/activities/segment.activities';
import type { segmentCompute } from '../../temporal/workflows/segment-compute.workflow';
import type { segmentRecomputeSweep } from '../../temporal/workflows/segment-recompute-sweep.workflow';
import { workflowIds } from '../../temporal/definitions';

/** The segment compute and the recompute sweep with activity doubles: what is computed, recorded, joined and failed. */
let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  ({ env, bundle } = await workflowTestEnv({ withSearchAttributes: true }));
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

type RunInput = Parameters<SegmentActivities['runSegmentCompute']>[0];
type FailInput = Parameters<SegmentActivities['failSegmentCompute']>[0];
type Due = Awaited<ReturnType<SegmentActivities['findDueSegmentComputes']>>;

/** A worker on its own task queue with the doubles; `fn` runs while it polls. */
async function withWorker<T>(
  doubles: { run: (i: RunInput) => Promise<{ entered: number; exited: number; memberCount: number }>; due?: Due },
  fn: (taskQueue: string) => Promise<T>,
) {
  const taskQueue = `test-${Math.random()}`;
  const runs: RunInput[] = [];
  const failures: FailInput[] = [];
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: {
      runSegmentCompute: async (i: RunInput) => {
        runs.push(i);
        return doubles.run(i);
      },
      failSegmentCompute: async (i: FailInput) => void failures.push(i),
      findDueSegmentComputes: async () => doubles.due ?? [],
    },
  });
  const outcome = await worker.runUntil(fn(taskQueue).then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  ));
  return { outcome, runs, failures };
}

const result = { entered: 2, exited: 1, memberCount: 5 };

describe('segmentCompute workflow', () => {
  test('computes once with its own run id and returns the result; nothing is recorded FAILED', async () => {
    let runId = '';
    const { outcome, runs, failures } = await withWorker({ run: async () => result }, async (taskQueue) => {
      const handle = await env.client.workflow.start<typeof segmentCompute>('segmentCompute', {
        taskQueue,
        workflowId: workflowIds.segmentCompute(`s-${Math.random()}`),
        args: [{ projectId: 'p', segmentId: 's1' }],
      });
      runId = handle.firstExecutionRunId;
      return handle.result();
    });
    expect(outcome).toEqual({ ok: true, value: result });
    expect(runs).toEqual([{ projectId: 'p', segmentId: 's1', runId }]);
    expect(failures).toEqual([]);
  }, 60_000);

  test('a refusal (the segment was deleted) is not retried: recorded FAILED with its message, and the workflow fails', async () => {
    const { outcome, runs, failures } = await withWorker(
      {
        run: async () => {
          throw ApplicationFailure.create({ nonRetryable: true, type: 'NOT_FOUND', message: 'Segment not found' });
        },
      },
      (taskQueue) =>
        env.client.workflow.execute<typeof segmentCompute>('segmentCompute', {
          taskQueue,
          workflowId: workflowIds.segmentCompute(`s-${Math.random()}`),
          args: [{ projectId: 'p', segmentId: 's2' }],
        }),
    );
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: WorkflowFailedError }).error.cause).toMatchObject({ type: 'SegmentComputeFailed', message: 'Segment not found' });
    expect(runs).toHaveLength(1);
    expect(failures).toEqual([{ segmentId: 's2', runId: expect.any(String), message: 'Segment not found' }]);
  }, 60_000);

  test('cancelled while it computes: recorded FAILED ("cancelled") and the workflow ends cancelled', async () => {
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    const { outcome, failures } = await withWorker(
      {
        run: async () => {
          running();
          await Context.current().sleep(60_000); // rejects once the worker shuts down after the test
          return result;
        },
      },
      async (taskQueue) => {
        const handle = await env.client.workflow.start<typeof segmentCompute>('segmentCompute', {
          taskQueue,
          workflowId: workflowIds.segmentCompute(`s-${Math.random()}`),
          args: [{ projectId: 'p', segmentId: 's3' }],
        });
        await started;
        await handle.cancel();
        return handle.result();
      },
    );
    expect((outcome as { error: WorkflowFailedError }).error.cause).toBeInstanceOf(CancelledFailure);
    expect(failures).toEqual([{ segmentId: 's3', runId: expect.any(String), message: 'The compute was cancelled' }]);
  }, 60_000);
});

describe('segmentRecomputeSweep workflow', () => {
  test('starts segment-compute/<id> for each due segment; one already running is joined, not started twice; a failed one is counted', async () => {
    const id = () => `seg-${Math.random()}`;
    const [computed, busy, broken] = [id(), id(), id()];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let busyStarted!: () => void;
    const busyRunning = new Promise<void>((resolve) => (busyStarted = resolve));
    const { outcome, runs } = await withWorker(
      {
        due: [computed, busy, broken].map((segmentId) => ({ projectId: 'p', segmentId })),
        run: async (i) => {
          if (i.segmentId === broken) throw ApplicationFailure.create({ nonRetryable: true, message: 'Segment not found' });
          if (i.segmentId === busy) {
            busyStarted();
            await released;
          }
          return result;
        },
      },
      async (taskQueue) => {
        // A compute of `busy` started through the API and still running.
        const running = await env.client.workflow.start<typeof segmentCompute>('segmentCompute', {
          taskQueue,
          workflowId: workflowIds.segmentCompute(busy),
          args: [{ projectId: 'p', segmentId: busy }],
        });
        await busyRunning;
        const swept = await env.client.workflow.execute<typeof segmentRecomputeSweep>('segmentRecomputeSweep', {
          taskQueue,
          workflowId: `segment-recompute-sweep-${Math.random()}`,
          args: [{}],
        });
        release();
        await running.result();
        const child = await env.client.workflow.getHandle(workflowIds.segmentCompute(computed)).describe();
        return { swept, childAttributes: child.searchAttributes };
      },
    );
    expect(outcome).toEqual({ ok: true, value: { swept: { due: 3, computed: 1, running: 1, failed: 1 }, childAttributes: expect.objectContaining({ ProjectId: ['p'] }) } });
    expect(runs.map((r) => r.segmentId).sort()).toEqual([busy, computed, broken].sort());
  }, 60_000);
});
