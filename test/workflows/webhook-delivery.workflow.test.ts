import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { webhookDelivery } from '../../temporal/workflows/webhook-delivery.workflow';
import { firstPass } from '../../domain/webhook-endpoints/webhook-attempt';

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

/** Runs one webhook-delivery workflow on a worker of its own with these activity doubles. */
async function runBatch(activities: object, input: Parameters<typeof webhookDelivery>[0]) {
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle, activities });
  return worker.runUntil(
    env.client.workflow.execute<typeof webhookDelivery>('webhookDelivery', { taskQueue, workflowId: `webhook-delivery/test-${Math.random()}`, args: [input] }),
  );
}

test('attempts every delivery, at most 8 at once; a delivery that cannot succeed is given up, the others complete', async () => {
  const ids = Array.from({ length: 20 }, (_, i) => `d${String(i).padStart(2, '0')}`);
  let inFlight = 0;
  let maxInFlight = 0;
  const attempted: string[] = [];
  const gaveUp: string[] = [];
  const result = await runBatch(
    {
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
    { projectId: 'p', endpointId: 'e', deliveryIds: ids },
  );
  expect([...attempted].sort()).toEqual(ids);
  expect(maxInFlight).toBe(8);
  expect(gaveUp).toEqual(['d03']);
  expect(result.filter((r) => r.outcome === 'done').map((r) => r.deliveryId).sort()).toEqual(ids.filter((id) => id !== 'd03'));
  expect(result.find((r) => r.deliveryId === 'd03')).toMatchObject({ outcome: 'gave_up', error: 'The webhook address is refused' });
});

test("a contact's deliveries run one after another in the order given, each after the one before it ended; other contacts' alongside", async () => {
  // Contact c0 has four deliveries, the second of which fails twice first; c1..c6 one each; two without a contact.
  const ids = ['a0', 'a1', 'b1', 'a2', 'b2', 'c1', 'a3', 'd1', 'e1', 'f1', 't0', 't1'];
  const contacts = ['c0', 'c0', 'c1', 'c0', 'c2', 'c3', 'c0', 'c4', 'c5', 'c6', null, null];
  const log: { id: string; event: 'start' | 'end' }[] = [];
  const failures = new Map([['a1', 2]]);
  await runBatch(
    {
      deliverWebhook: async ({ deliveryId }: { deliveryId: string }) => {
        log.push({ id: deliveryId, event: 'start' });
        await new Promise((r) => setTimeout(r, 30));
        log.push({ id: deliveryId, event: 'end' });
        const left = failures.get(deliveryId) ?? 0;
        if (left > 0) {
          failures.set(deliveryId, left - 1);
          throw ApplicationFailure.create({ message: 'The receiver answered 500', nextRetryDelay: 50 });
        }
        return { outcome: 'done', status: 200 };
      },
      giveUpWebhookDelivery: async () => undefined,
    },
    { projectId: 'p', endpointId: 'e', deliveryIds: ids, contactIds: contacts },
  );
  const c0 = ['a0', 'a1', 'a2', 'a3'];
  const starts = log.filter((l) => l.event === 'start').map((l) => l.id);
  // c0's deliveries in order, a1 three times (two failures), nothing of c0 in between.
  expect(starts.filter((id) => c0.includes(id))).toEqual(['a0', 'a1', 'a1', 'a1', 'a2', 'a3']);
  // Never two of c0 in flight at once: each start of c0 comes after the end of the one before.
  let inFlight = 0;
  for (const l of log.filter((x) => c0.includes(x.id))) {
    inFlight += l.event === 'start' ? 1 : -1;
    expect(inFlight).toBeLessThanOrEqual(1);
  }
  // The other contacts did not wait for c0: all of them started before c0's last delivery.
  expect(['b1', 'b2', 'c1', 'd1', 'e1', 'f1', 't0', 't1'].every((id) => starts.indexOf(id) < starts.indexOf('a3'))).toBe(true);
  expect(new Set(starts)).toEqual(new Set(ids));
});

test('the first pass attempts every delivery in one activity; what it could not settle goes one activity per delivery after its wait, in chain order', async () => {
  const ids = ['a0', 'a1', 'a2', 'b0', 'x0', 'c0'];
  const contacts = ['ca', 'ca', 'ca', 'cb', 'cx', 'cc'];
  const calls: string[] = [];
  const slow: string[] = [];
  let fails = new Map([['a1', 2], ['x0', 1]]);
  const attempt = async (id: string) => {
    calls.push(id);
    const left = fails.get(id) ?? 0;
    if (left > 0) {
      fails.set(id, left - 1);
      return { outcome: 'retry' as const, error: 'The receiver answered 500', status: 500 };
    }
    if (id === 'c0') return { outcome: 'failed' as const, error: 'The webhook address is refused' };
    return { outcome: 'done' as const, status: 200 };
  };
  const result = await runBatch(
    {
      deliverWebhookFirstPass: (input: { chains: string[][]; concurrency: number }) =>
        firstPass(attempt, input.chains, { concurrency: input.concurrency, deadlineMs: Date.now() + 60_000, waitOf: () => 100 }),
      deliverWebhook: async ({ deliveryId }: { deliveryId: string }) => {
        slow.push(deliveryId);
        const o = await attempt(deliveryId);
        if (o.outcome === 'retry') throw ApplicationFailure.create({ message: o.error, nextRetryDelay: 50 });
        return o;
      },
      giveUpWebhookDelivery: async () => undefined,
    },
    { projectId: 'p', endpointId: 'e', deliveryIds: ids, contactIds: contacts },
  );
  fails = new Map();
  // The first pass: a0 done, a1 failed (its chain stops: a2 not attempted), b0 done, x0 failed, c0 given up (for good).
  expect(calls.slice(0, 5).sort()).toEqual(['a0', 'a1', 'b0', 'c0', 'x0']);
  // Then one activity per delivery, from where each chain stopped: a1 (once more failing, then done), a2 after it; x0.
  expect(slow.filter((id) => id.startsWith('a'))).toEqual(['a1', 'a1', 'a2']);
  expect(slow.filter((id) => !id.startsWith('a'))).toEqual(['x0']);
  expect(result.map((r) => [r.deliveryId, r.outcome]).sort()).toEqual([
    ['a0', 'done'],
    ['a1', 'done'],
    ['a2', 'done'],
    ['b0', 'done'],
    ['c0', 'gave_up'],
    ['x0', 'done'],
  ]);
});
