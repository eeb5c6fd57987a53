import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { workflowTestEnv } from '../helpers/workflow-env';
import type { CampaignActivities } from '../../temporal/activities/campaign.activities';
import type { campaignSend } from '../../temporal/workflows/campaign-send.workflow';
import type { PartitionResult } from '../../domain/campaigns/campaign-send';
import { campaignShareQueue } from '../../temporal/definitions';

/**
 * The campaign-send workflow's orchestration with activity doubles: the history stays bounded (continue-as-new with
 * the shares' cursors carried over), retry passes start again from the beginning of each share, and an unexpected
 * failure ends the campaign FAILED instead of leaving it SENDING.
 */
let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

beforeAll(async () => {
  ({ env, bundle } = await workflowTestEnv());
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

type PartitionCall = Parameters<CampaignActivities['sendCampaignPartition']>[0];
type FinishCall = Parameters<CampaignActivities['finishCampaignSend']>[0];

const round = (over: Partial<PartitionResult>): PartitionResult => ({
  done: false,
  cursor: null,
  stopped: null,
  sent: 0,
  skipped: 0,
  rejected: 0,
  invalid: 0,
  retry: 0,
  ...over,
});

async function run(partition: (call: PartitionCall) => Promise<PartitionResult>, opts: { partitions?: number; retryDelaysMs?: number[]; log?: string[] } = {}) {
  const partitionCalls: PartitionCall[] = [];
  const finishCalls: FinishCall[] = [];
  const taskQueue = `test-${Math.random()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: {
      beginCampaignSend: async () => ({ state: 'started' as const, audience: 1000, partitions: opts.partitions ?? 2, retryDelaysMs: opts.retryDelaysMs ?? [50] }),
      finishCampaignSend: async (call: FinishCall) => {
        finishCalls.push(call);
        opts.log?.push(`finish ${call.outcome}`);
        return { status: call.outcome === 'completed' ? 'SENT' : call.outcome === 'cancelled' ? 'CANCELLED' : 'FAILED', settled: 0 };
      },
    },
  });
  // The shares have a task queue of their own, as the worker process polls it (temporal/worker.ts).
  const shareWorker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: campaignShareQueue(taskQueue),
    activities: {
      sendCampaignPartition: async (call: PartitionCall) => {
        partitionCalls.push(call);
        return partition(call);
      },
    },
  });
  const workflowId = `campaign-send/test-${Math.random()}`;
  const handle = await env.client.workflow.start<typeof campaignSend>('campaignSend', {
    taskQueue,
    workflowId,
    args: [{ projectId: 'p', campaignId: 'c', scheduledFor: null }],
  });
  const outcome = await worker.runUntil(
    shareWorker.runUntil(
      handle.result().then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
    ),
  );
  const runs = await env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` });
  let runCount = 0;
  for await (const _ of runs) runCount++;
  return { outcome, partitionCalls, finishCalls, runCount };
}

describe('campaignSend workflow', () => {
  test('continues as new every 200 rounds, carrying each share cursor on, and counts every round of every run', async () => {
    const ROUNDS = 230;
    const { outcome, partitionCalls, finishCalls, runCount } = await run(
      async (call) => {
        const n = call.cursor === null ? 1 : Number(call.cursor) + 1;
        return round({ cursor: String(n), done: n >= ROUNDS, sent: 10 });
      },
      { partitions: 2 },
    );
    expect(outcome).toEqual({ ok: true, value: { status: 'SENT', audience: 1000, sent: 2 * ROUNDS * 10, skipped: 0, rejected: 0, settled: 0 } });
    expect(runCount).toBe(2);
    expect(partitionCalls).toHaveLength(2 * ROUNDS);
    // Each share's calls continue from the cursor its previous call returned, across the continue-as-new.
    for (const share of [0, 1]) {
      const cursors = partitionCalls.filter((c) => c.partition === share).map((c) => c.cursor);
      expect(cursors).toEqual([null, ...Array.from({ length: ROUNDS - 1 }, (_, i) => String(i + 1))]);
    }
    expect(finishCalls).toEqual([{ campaignId: 'c', outcome: 'completed' }]);
  }, 120_000);

  test('transient failures get retry passes from the start of every share, then the send completes', async () => {
    const { outcome, partitionCalls, finishCalls } = await run(
      async (call) => (call.pass === 1 ? round({ done: true, cursor: 'end', sent: 5, retry: call.partition === 0 ? 2 : 0 }) : round({ done: true, cursor: 'end', sent: call.partition === 0 ? 2 : 0 })),
      { partitions: 2, retryDelaysMs: [50, 50] },
    );
    expect(outcome).toMatchObject({ ok: true, value: { status: 'SENT', sent: 12 } });
    // The shares of a round run in parallel: compare in (pass, share) order.
    const byPassAndShare = (a: [number, number, null], b: [number, number, null]) => a[0] - b[0] || a[1] - b[1];
    expect(partitionCalls.map((c) => [c.pass, c.partition, c.cursor] as [number, number, null]).sort(byPassAndShare)).toEqual([
      [1, 0, null],
      [1, 1, null],
      [2, 0, null],
      [2, 1, null],
    ]);
    expect(finishCalls).toEqual([{ campaignId: 'c', outcome: 'completed' }]);
  });

  test('an activity that fails for good ends the campaign FAILED (never left SENDING) and fails the run', async () => {
    const { outcome, finishCalls } = await run(async () => {
      throw ApplicationFailure.create({ nonRetryable: true, message: 'the sky fell' });
    });
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(WorkflowFailedError);
    expect(finishCalls).toEqual([{ campaignId: 'c', outcome: 'failed', reason: expect.stringContaining('the sky fell') }]);
  });

  test('a share that fails for good while another still sends: the campaign is settled only after that call ended', async () => {
    const log: string[] = [];
    const { outcome, finishCalls } = await run(
      async (call) => {
        if (call.partition === 0) throw ApplicationFailure.create({ nonRetryable: true, message: 'the sky fell' });
        await new Promise((r) => setTimeout(r, 1_000));
        log.push('share 1 ended');
        return round({ sent: 5 });
      },
      { partitions: 2, log },
    );
    expect(outcome.ok).toBe(false);
    expect(finishCalls).toEqual([{ campaignId: 'c', outcome: 'failed', reason: expect.stringContaining('the sky fell') }]);
    // Settling while share 1 still sent would mark rows FAILED whose messages then went out.
    expect(log).toEqual(['share 1 ended', 'finish failed']);
  });

  test('a share that finds the campaign CANCELLED ends the run with the rest cancelled', async () => {
    const { outcome, finishCalls } = await run(async () => round({ stopped: 'CANCELLED' }));
    expect(outcome).toMatchObject({ ok: true, value: { status: 'CANCELLED' } });
    expect(finishCalls).toEqual([{ campaignId: 'c', outcome: 'cancelled' }]);
  });
});
