import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { webhookDelivery } from '../../temporal/workflows/webhook-delivery.workflow';

/**
 * The webhook-delivery workflow's orchestration with activity doubles: every delivery of the batch is attempted, at
 * most 8 at once; one that cannot succeed is given up (FAILED) without holding back the others.
 */
let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  ({ env, bundle } = await workflowTestEnv());
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

test('attempts every delivery, at most 8 at once; a delivery that cannot succeed is given up, the others complete', async () => {
  const ids = Array.from({ length: 20 }, (_, i) => `d${String(i).padStart(2, '0')}`);
  let inFlight = 0;
  let maxInFlight = 0;
  const attempted: string[] = [];
  const gaveUp: string[] = [];
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: {
      deliverWebhook: async ({ deliveryId }: { deliveryId: string }) => {
        attempted.push(deliveryId);
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((r) => setTimeout(r, 50));
        inFlight--;
        if (deliveryId === 'd03') throw ApplicationFailure.create({ message: 'The webhook address is refused', nonRetryable: true });
        return { outcome: 'done', status: 200 };
      },
      giveUpWebhookDelivery: async ({ deliveryId }: { deliveryId: string }) => void gaveUp.push(deliveryId),
    },
  });
  const result = await worker.runUntil(
    env.client.workflow.execute<typeof webhookDelivery>('webhookDelivery', {
      taskQueue,
      workflowId: `webhook-delivery/test-${Math.random()}`,
      args: [{ projectId: 'p', endpointId: 'e', deliveryIds: ids }],
    }),
  );
  expect([...attempted].sort()).toEqual(ids);
  expect(maxInFlight).toBe(8);
  expect(gaveUp).toEqual(['d03']);
  expect(result.filter((r) => r.outcome === 'done').map((r) => r.deliveryId).sort()).toEqual(ids.filter((id) => id !== 'd03'));
  expect(result.find((r) => r.deliveryId === 'd03')).toMatchObject({ outcome: 'gave_up', error: 'The webhook address is refused' });
});
