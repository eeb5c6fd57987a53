import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { resolveTemporalBinary } from '../../scripts/services/temporal-server';
import { retryDelayMs } from '../../temporal/workflows/email-delivery.workflow';
import type { DeliveryOutcome } from '../../domain/emails/delivery';

/**
 * The delivery workflow's orchestration with activity doubles, on a throw-away Temporal dev server: which emails are
 * retried, when the workflow gives up, and what it reports.
 */
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  const binary = resolveTemporalBinary(() => undefined);
  env = await TestWorkflowEnvironment.createLocal({
    server: binary ? { executable: { type: 'existing-path', path: binary } } : undefined,
  });
});

afterAll(async () => {
  await env?.teardown();
});

async function run(
  deliverEmails: (input: { emailIds: string[]; attempt: number }) => Promise<DeliveryOutcome[]>,
  input: { emailIds: string[]; retryWindowMs?: number },
) {
  const failed: { emailIds: string[]; reason: string }[] = [];
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowsPath: path.join(__dirname, '..', '..', 'temporal', 'workflows'),
    activities: {
      deliverEmails,
      markEmailsFailed: async (i: { emailIds: string[]; reason: string }) => void failed.push(i),
    },
  });
  const result = await worker.runUntil(
    env.client.workflow.execute('emailDelivery', { taskQueue, workflowId: `wf-${Math.random()}`, args: [{ projectId: 'p', ...input }] }),
  );
  return { result, failed };
}

describe('emailDelivery workflow', () => {
  test('only the emails with a transient failure are attempted again', async () => {
    const calls: { emailIds: string[]; attempt: number }[] = [];
    const { result, failed } = await run(
      async (i) => {
        calls.push(i);
        return i.emailIds.map((emailId): DeliveryOutcome =>
          emailId === 'b' && i.attempt === 1
            ? { emailId, status: 'RETRY', error: '451' }
            : emailId === 'c'
              ? { emailId, status: 'REJECTED', response: '550', suppressed: true }
              : { emailId, status: 'SENT', messageId: `<${emailId}>`, response: '250' },
        );
      },
      { emailIds: ['a', 'b', 'c'] },
    );
    expect(calls).toEqual([
      { emailIds: ['a', 'b', 'c'], attempt: 1 },
      { emailIds: ['b'], attempt: 2 },
    ]);
    expect(result).toEqual({ sent: 2, rejected: 1, failed: 0, skipped: 0 });
    expect(failed).toEqual([]);
  }, 30_000);

  test('when the retry window is used up the pending emails are marked FAILED with the last error', async () => {
    const { result, failed } = await run(
      async (i) => i.emailIds.map((emailId): DeliveryOutcome => ({ emailId, status: 'RETRY', error: `Attempt ${i.attempt}: 421 busy` })),
      { emailIds: ['x', 'y'], retryWindowMs: 1_000 },
    );
    expect(result).toEqual({ sent: 0, rejected: 0, failed: 2, skipped: 0 });
    expect(failed).toHaveLength(1);
    expect(failed[0]!.emailIds).toEqual(['x', 'y']);
    expect(failed[0]!.reason).toMatch(/gave up after 1 attempts: Attempt 1: 421 busy/);
  }, 30_000);

  test('an activity error (database down) is retried by Temporal, and the batch completes', async () => {
    let calls = 0;
    const { result } = await run(
      async (i) => {
        if (++calls === 1) throw new Error('connect ECONNREFUSED');
        return i.emailIds.map((emailId): DeliveryOutcome => ({ emailId, status: 'SENT', messageId: '<m>', response: '250' }));
      },
      { emailIds: ['a'] },
    );
    expect(calls).toBe(2);
    expect(result).toEqual({ sent: 1, rejected: 0, failed: 0, skipped: 0 });
  }, 30_000);
});

describe('retryDelayMs', () => {
  test.each([
    [1, 5_000],
    [2, 10_000],
    [3, 20_000],
    [10, 30 * 60_000],
    [40, 30 * 60_000],
  ])('attempt %i waits %i ms', (attempt, ms) => expect(retryDelayMs(attempt)).toBe(ms));
});
