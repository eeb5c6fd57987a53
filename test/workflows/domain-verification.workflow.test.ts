import { randomUUID } from 'node:crypto';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { DomainVerificationResult } from '../../temporal/workflows/domain-verification.workflow';
import { checkNowUpdate, removeSignal } from '../../temporal/definitions';
import type { DomainCheckResult } from '../../domain/domains/domain.service';
import { workflowTestEnv } from '../helpers/workflow-env';

/**
 * The verification loop's orchestration with an activity double, on a throw-away Temporal dev server: update semantics, no overlapping checks, continue-as-new, and how the loop ends.
 */
type Behaviour = (call: number) => Promise<DomainCheckResult>;
const behaviours = new Map<string, Behaviour>();
const calls = new Map<string, number>();
let inFlight = 0;
let maxInFlight = 0;

const taskQueue = `domains-wf-${randomUUID()}`;
let worker: Worker;
let running: Promise<void>;
let env: TestWorkflowEnvironment;
let client: Client;

const result = (over: Partial<DomainCheckResult> = {}): DomainCheckResult => ({
  exists: true,
  status: 'PENDING',
  records: [{ purpose: 'OWNERSHIP', status: 'NOT_FOUND' }],
  nextCheckInMs: 3_600_000,
  ...over,
});

beforeAll(async () => {
  const test = await workflowTestEnv();
  env = test.env;
  worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: test.bundle,
    activities: {
      async checkDomain({ domainId }: { domainId: string }): Promise<DomainCheckResult> {
        const n = (calls.get(domainId) ?? 0) + 1;
        calls.set(domainId, n);
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        try {
          return await behaviours.get(domainId)!(n);
        } finally {
          inFlight--;
        }
      },
    },
  });
  running = worker.run();
  client = env.client;
}, 60_000);

afterAll(async () => {
  worker?.shutdown();
  await running;
  await env?.teardown();
});

function start(domainId: string, behaviour: Behaviour, checksPerRun?: number) {
  behaviours.set(domainId, behaviour);
  return client.workflow.start('domainVerification', {
    taskQueue,
    workflowId: `domain-verification/${domainId}`,
    args: [{ projectId: 'p', domainId, checksPerRun }],
  });
}

async function waitUntil(what: string, ok: () => boolean, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('domainVerification workflow', () => {
  test('checks at once, then when the check says; the remove signal ends it', async () => {
    const id = randomUUID();
    const handle = await start(id, async () => result({ nextCheckInMs: 200 }));
    await waitUntil('three checks', () => (calls.get(id) ?? 0) >= 3);
    await handle.signal(removeSignal);
    expect(await handle.result()).toMatchObject<Partial<DomainVerificationResult>>({ ended: 'REMOVED' });
  });

  test('the checkNow update runs a check and returns its result; concurrent updates never overlap checks', async () => {
    const id = randomUUID();
    const handle = await start(id, async (n) => {
      await new Promise((r) => setTimeout(r, 150));
      return result({ status: n >= 2 ? 'VERIFIED' : 'PENDING', records: [{ purpose: 'DKIM', status: n >= 2 ? 'VERIFIED' : 'NOT_FOUND' }] });
    });
    await waitUntil('the first check', () => calls.get(id) === 1);
    maxInFlight = 0;
    const results = await Promise.all([1, 2, 3].map(() => handle.executeUpdate(checkNowUpdate)));
    expect(results.map((r) => r.status)).toEqual(['VERIFIED', 'VERIFIED', 'VERIFIED']);
    expect(results[0]!.records).toEqual([{ purpose: 'DKIM', status: 'VERIFIED' }]);
    expect(calls.get(id)).toBe(4);
    expect(maxInFlight).toBe(1);
    await handle.signal(removeSignal);
    await handle.result();
  });

  test('continues as new every checksPerRun checks under the same workflow id', async () => {
    const id = randomUUID();
    const handle = await start(id, async () => result({ nextCheckInMs: 100 }), 2);
    const firstRunId = handle.firstExecutionRunId;
    await waitUntil('five checks', () => (calls.get(id) ?? 0) >= 5);
    const desc = await client.workflow.getHandle(`domain-verification/${id}`).describe();
    expect(desc.runId).not.toBe(firstRunId);
    expect(desc.status.name).toBe('RUNNING');
    await client.workflow.getHandle(`domain-verification/${id}`).signal(removeSignal);
    const end = (await client.workflow.getHandle(`domain-verification/${id}`).result()) as DomainVerificationResult;
    expect(end.ended).toBe('REMOVED');
    expect(end.checks).toBeLessThanOrEqual(2);
  });

  test('a failing check fails the update (DomainCheckFailed) but not the loop', async () => {
    const id = randomUUID();
    const handle = await start(id, async (n) => {
      if (n === 2) throw ApplicationFailure.create({ nonRetryable: true, message: 'database down' });
      return result();
    });
    await waitUntil('the first check', () => calls.get(id) === 1);
    const err = await handle.executeUpdate(checkNowUpdate).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
    expect(String((err as WorkflowUpdateFailedError).cause?.message)).toMatch(/The check could not run/);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect((await handle.executeUpdate(checkNowUpdate)).exists).toBe(true);
    await handle.signal(removeSignal);
    await handle.result();
  });

  test('ends by itself when a check finds the domain gone', async () => {
    const id = randomUUID();
    const handle = await start(id, async (n) => (n === 1 ? result() : result({ exists: false, status: null, records: [], nextCheckInMs: 0 })));
    await waitUntil('the first check', () => calls.get(id) === 1);
    expect((await handle.executeUpdate(checkNowUpdate)).exists).toBe(false);
    expect(await handle.result()).toMatchObject({ ended: 'DOMAIN_GONE', checks: 2 });
  });

  test('an update after the remove signal is rejected', async () => {
    const id = randomUUID();
    const handle = await start(id, async () => {
      await new Promise((r) => setTimeout(r, 300));
      return result();
    });
    await handle.signal(removeSignal);
    await expect(handle.executeUpdate(checkNowUpdate)).rejects.toThrow();
    expect(await handle.result()).toMatchObject({ ended: 'REMOVED' });
  });
});
