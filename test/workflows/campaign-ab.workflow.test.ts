import fs from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker, type WorkflowBundle } from '@temporalio/worker';
import { TEMPORAL_TEST_SERVER_HELP } from '../../scripts/services/temporal-test-server';
import { HISTORIES_DIR } from '../helpers/histories';
import { within } from '../helpers/wait';
import { latestCommandIsTimer } from '../helpers/workflow-env';
import type { CampaignActivities } from '../../temporal/activities/campaign.activities';
import type { campaignSend } from '../../temporal/workflows/campaign-send.workflow';
import { campaignAbQuery, campaignShareQueue, campaignWakeSignal } from '../../temporal/definitions';
import { decideWinner } from '../../domain/campaigns/ab-test';
import type { PartitionResult } from '../../domain/campaigns/campaign-send';

/**
 * The A/B test of the campaign-send workflow with activity doubles, on the time-skipping test server (a test wait of
 * hours takes no time): the split into variant shares, the durable wait, an automatic and a manual decision, a cancel
 * and a worker restart during the wait, a sender domain lost during the wait. With RECORD_HISTORIES=1 each run's
 * history is saved under test/histories/ (campaign-send-ab-*.json), which replay.test.ts replays against the code.
 * Without a time-skipping server (see automation-run.workflow.test.ts) the file is skipped.
 */
const TEST_SERVER = process.env.TEMPORAL_TEST_SERVER_PATH;
const timeSkipping = Boolean(TEST_SERVER && fs.existsSync(TEST_SERVER));
const skippingTest = (title: string, fn: () => Promise<void>) =>
  timeSkipping ? test(title, fn, 60_000) : test.skip(`${title} (skipped without a time-skipping test server: ${TEMPORAL_TEST_SERVER_HELP})`, fn);

const HOURS_4 = 4 * 3600;
/**
 * Test-time sleeps end half an hour off the run's hourly re-read of the campaign: a signal sent as a re-read timer
 * fell due made the time-skipping test server refuse the workflow task that cancelled that timer ("invalid history
 * builder state for action"), after which the run and the server's time skipping stood still (once in a few runs).
 */
const HALF_HOUR_MS = 1_800_000;

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundle;

const startServer = () => TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER! } } });

beforeAll(async () => {
  if (!timeSkipping) return;
  const quiet = { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  [env, bundle] = await Promise.all([startServer(), bundleWorkflowCode({ workflowsPath: path.join(__dirname, '..', '..', 'temporal', 'workflows'), logger: quiet })]);
}, 120_000);

/**
 * Set when a scenario ended without its result: past its deadline, or failed on the way. After a hang the test
 * server's time skipping stood still, and every later scenario of the file hung too, so the next scenario gets a test
 * server of its own: a hang fails its scenario alone (a fresh server after a plain failure costs a few seconds).
 */
let serverStuck = false;

beforeEach(async () => {
  if (!timeSkipping || !serverStuck) return;
  serverStuck = false;
  await env.teardown().catch(() => undefined);
  env = await startServer();
}, 120_000);

/**
 * The runs the tests started, and their results still awaited. A scenario that hangs leaves both: a scenario past its
 * deadline, and the file's end, end every open run and wait for the result calls before going on. A call still open
 * at teardown was retried on the closed connection, and that failure (thrown in a timer) failed whichever test file
 * ran next. (That alone did not save the file's later scenarios: after a hang the server's time skipping stayed stuck,
 * ended runs or not; `serverStuck` gives them a fresh server.)
 */
const runs: WorkflowHandle<typeof campaignSend>[] = [];
const awaited = new Set<Promise<unknown>>();

async function endOpenRuns(): Promise<void> {
  await Promise.all(runs.splice(0).map((h) => h.terminate('the test ended without its result').catch(() => undefined)));
  await within(Promise.allSettled(awaited), 20_000, 'the result calls did not end').catch(() => undefined);
}

afterAll(async () => {
  if (env) await endOpenRuns();
  await env?.teardown();
});

type PartitionCall = Parameters<CampaignActivities['sendCampaignPartition']>[0];
type FinishCall = Parameters<CampaignActivities['finishCampaignSend']>[0];

/** What the doubles read as "the database": the campaign's status, a person's pick, whether the sender domain is gone. */
interface Db {
  status: 'SENDING' | 'PAUSED' | 'CANCELLED';
  pick: number | null;
  senderLost?: boolean;
}

interface Calls {
  begin: number;
  partitions: PartitionCall[];
  decide: number;
  finish: FinishCall[];
}

const done = (sent: number): PartitionResult => ({ done: true, cursor: 'end', stopped: null, sent, skipped: 0, rejected: 0, invalid: 0, retry: 0 });

function activities(db: Db, calls: Calls, afterTest: 'auto' | 'manual') {
  return {
    beginCampaignSend: async () => {
      calls.begin++;
      return { state: 'started' as const, audience: 100, partitions: 2, retryDelaysMs: [], throttled: false, ab: { variants: 2, testDurationSeconds: HOURS_4, afterTest } };
    },
    abWaitState: async () => ({ status: db.status, pick: db.pick, decided: false }),
    decideCampaignWinner: async () => {
      calls.decide++;
      if (db.senderLost) return { senderProblem: 'The winner was not sent: the sender domain is not verified' };
      // B has more opens; a pick overrides.
      return { decision: decideWinner({ metric: 'unique_opens', samples: [{ sent: 10, opens: 2, clicks: 0 }, { sent: 10, opens: 6, clicks: 0 }], pick: db.pick }) };
    },
    finishCampaignSend: async (call: FinishCall) => {
      calls.finish.push(call);
      return { status: call.outcome === 'completed' ? ('SENT' as const) : call.outcome === 'cancelled' ? ('CANCELLED' as const) : ('FAILED' as const), settled: 0 };
    },
  };
}

/** The workers of one task queue (workflows, and the shares' queue), polling while `fn` runs. */
async function withWorkers<T>(taskQueue: string, db: Db, calls: Calls, afterTest: 'auto' | 'manual', fn: () => Promise<T>, opts: { noCache?: boolean } = {}): Promise<T> {
  // noCache: no sticky queue, which the test server would keep sending the run's tasks to after the worker stopped.
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: activities(db, calls, afterTest),
    ...(opts.noCache ? { maxCachedWorkflows: 0 } : {}),
  });
  const shareWorker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue: campaignShareQueue(taskQueue),
    activities: {
      sendCampaignPartition: async (call: PartitionCall) => {
        calls.partitions.push(call);
        return done(5);
      },
    },
  });
  // A deadline: a run that hangs fails its test while runUntil shuts the workers down. Left to jest's timeout, the
  // workers kept polling after the test, held the connection past teardown and kept the test process from ending.
  const run = within(fn(), 40_000, 'the scenario had no result').catch(async (err: unknown) => {
    serverStuck = true;
    await endOpenRuns();
    throw err;
  });
  return worker.runUntil(shareWorker.runUntil(run));
}

async function start(taskQueue: string): Promise<WorkflowHandle<typeof campaignSend>> {
  const handle = await env.client.workflow.start<typeof campaignSend>('campaignSend', {
    taskQueue,
    workflowId: `campaign-send/ab-${Math.random()}`,
    args: [{ projectId: 'p', campaignId: 'c', scheduledFor: null }],
  });
  runs.push(handle);
  return handle;
}

/**
 * Waits (in real time: time skipping is locked while no result is awaited) until the run waits for its decision: its
 * progress says so, and its last command was the wait's timer, so no re-read of the campaign is in flight.
 * A cancel while that activity had been handed to the worker (started, not yet completed) made the time-skipping test
 * server refuse the run's next workflow task ("ACTIVITY_UNKNOWN for scheduledEventId"), after which the run and the
 * server's time skipping stood still (a loaded host, once in a few runs). The real server has no such case; this test
 * is about the wait, and now acts during it.
 */
async function untilWaiting(handle: WorkflowHandle<typeof campaignSend>): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const progress = await handle.query(campaignAbQuery).catch(() => null);
    if (progress?.phase === 'waiting' && (await latestCommandIsTimer(handle))) return;
    if (Date.now() > deadline) throw new Error(`the run is not waiting: ${JSON.stringify(progress)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function outcomeOf(handle: WorkflowHandle<typeof campaignSend>) {
  const outcome = handle.result().then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  awaited.add(outcome);
  return outcome.finally(() => awaited.delete(outcome));
}

async function record(handle: WorkflowHandle<typeof campaignSend>, name: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  fs.mkdirSync(HISTORIES_DIR, { recursive: true });
  fs.writeFileSync(path.join(HISTORIES_DIR, `${name}.json`), historyToJSON(await handle.fetchHistory()));
}

/** The shares called, as [variant, partition, remainder], sorted. */
const shares = (calls: PartitionCall[]) => calls.map((c) => [c.variant ?? null, c.partition, c.remainder === true] as const).sort((a, b) => String(a).localeCompare(String(b)));

const newCalls = (): Calls => ({ begin: 0, partitions: [], decide: 0, finish: [] });

/**
 * One run on fresh workers: started, then (with `duringWait`) waited for until it waits for its decision and acted on,
 * then its outcome, and its progress query while a worker still polls (queries are answered by a worker).
 */
async function scenario(afterTest: 'auto' | 'manual', db: Db, duringWait?: (handle: WorkflowHandle<typeof campaignSend>, calls: Calls) => Promise<void>) {
  const taskQueue = `ab-${Math.random()}`;
  const calls = newCalls();
  const run = await withWorkers(taskQueue, db, calls, afterTest, async () => {
    const handle = await start(taskQueue);
    if (duringWait) {
      await untilWaiting(handle);
      await duringWait(handle, calls);
    }
    const outcome = await outcomeOf(handle);
    return { handle, outcome, progress: outcome.ok ? await handle.query(campaignAbQuery) : null };
  });
  return { ...run, calls };
}

/** The durations of the timers the run started (seconds). */
async function timerSeconds(handle: WorkflowHandle<typeof campaignSend>): Promise<number[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).flatMap((e) => (e.timerStartedEventAttributes ? [Number(e.timerStartedEventAttributes.startToFireTimeout?.seconds ?? 0)] : []));
}

describe('campaignSend of an A/B-tested campaign', () => {
  skippingTest('the split: each variant goes to its own shares; the run waits the test duration, decides by the metric, and sends the winner to the remainder', async () => {
    const { handle, outcome, progress, calls } = await scenario('auto', { status: 'SENDING', pick: null });
    expect(outcome).toEqual({ ok: true, value: { status: 'SENT', audience: 100, sent: 30, skipped: 0, rejected: 0, settled: 0 } });
    // Test shares (variant x partition), then the remainder's partitions with the winner (B: more opens).
    expect(shares(calls.partitions.slice(0, 4))).toEqual([
      [0, 0, false],
      [0, 1, false],
      [1, 0, false],
      [1, 1, false],
    ]);
    expect(shares(calls.partitions.slice(4))).toEqual([
      [1, 0, true],
      [1, 1, true],
    ]);
    expect(calls.decide).toBe(1);
    // The wait is one durable timer of the test's duration (from the end of the test sends, less the re-read's time).
    const timers = await timerSeconds(handle);
    expect(timers).toHaveLength(1);
    expect(timers[0]).toBeGreaterThan(HOURS_4 - 60);
    expect(timers[0]).toBeLessThanOrEqual(HOURS_4);
    expect(progress).toMatchObject({ phase: 'remainder', winner: 1, note: expect.stringContaining('Variant B') });
    const { memo } = await handle.describe();
    expect(memo).toMatchObject({ abWinner: 'B', abDecidedBy: 'auto' });
    await record(handle, 'campaign-send-ab-auto');
  });

  skippingTest("manual: the run waits past the test's end until a person picks, then sends the pick", async () => {
    const db: Db = { status: 'SENDING', pick: null };
    const { handle, outcome, progress, calls } = await scenario('manual', db, async (handle, calls) => {
      // Past the test's end (4 hours): no decision without a pick.
      await env.sleep(5 * 3_600_000 + HALF_HOUR_MS);
      expect(calls.decide).toBe(0);
      expect(calls.partitions).toHaveLength(4);
      db.pick = 0;
      await handle.signal(campaignWakeSignal);
    });
    expect(outcome).toMatchObject({ ok: true, value: { status: 'SENT' } });
    expect(shares(calls.partitions.slice(4))).toEqual([
      [0, 0, true],
      [0, 1, true],
    ]);
    expect(progress).toMatchObject({ phase: 'remainder', winner: 0, note: expect.stringContaining('picked by a person') });
    await record(handle, 'campaign-send-ab-manual');
  });

  skippingTest('a cancel during the wait ends the run: the remainder is settled as cancelled, nothing decided or sent', async () => {
    const db: Db = { status: 'SENDING', pick: null };
    const { handle, outcome, calls } = await scenario('auto', db, async (handle) => {
      db.status = 'CANCELLED';
      await handle.cancel();
    });
    expect(outcome.ok).toBe(false);
    expect((outcome as { error: unknown }).error).toBeInstanceOf(WorkflowFailedError);
    expect(calls.decide).toBe(0);
    expect(calls.partitions).toHaveLength(4);
    expect(calls.finish).toEqual([{ campaignId: 'c', outcome: 'cancelled' }]);
    await record(handle, 'campaign-send-ab-cancelled');
  });

  skippingTest('a worker restart during the wait: the new worker resumes the timer from history; nobody is sent twice, the decision is made once', async () => {
    const taskQueue = `ab-${Math.random()}`;
    const db: Db = { status: 'SENDING', pick: null };
    const calls = newCalls();
    const handle = await withWorkers(taskQueue, db, calls, 'auto', async () => {
      const handle = await start(taskQueue);
      await untilWaiting(handle);
      return handle;
    }, { noCache: true });
    // The first workers are shut down (runUntil ended); new ones start with empty caches and replay the history.
    expect(calls.partitions).toHaveLength(4);
    const outcome = await withWorkers(taskQueue, db, calls, 'auto', () => outcomeOf(handle));
    expect(outcome).toMatchObject({ ok: true, value: { status: 'SENT', sent: 30 } });
    expect(calls.begin).toBe(1);
    expect(calls.decide).toBe(1);
    expect(shares(calls.partitions)).toEqual([
      [0, 0, false],
      [0, 1, false],
      [1, 0, false],
      [1, 0, true],
      [1, 1, false],
      [1, 1, true],
    ]);
    await record(handle, 'campaign-send-ab-worker-restart');
  });

  skippingTest('a pause during the wait holds the decision past the test end; the resume decides at once', async () => {
    const db: Db = { status: 'SENDING', pick: null };
    const { handle, outcome, calls } = await scenario('auto', db, async (handle, calls) => {
      db.status = 'PAUSED';
      await handle.signal(campaignWakeSignal);
      await env.sleep(HOURS_4 * 1000 * 2 + HALF_HOUR_MS);
      expect(calls.decide).toBe(0);
      db.status = 'SENDING';
      await handle.signal(campaignWakeSignal);
    });
    expect(outcome).toMatchObject({ ok: true, value: { status: 'SENT' } });
    expect(calls.decide).toBe(1);
    await record(handle, 'campaign-send-ab-paused-resumed');
  });

  skippingTest('a sender domain that lost its verification during the wait: the campaign fails with the reason, no remainder is sent', async () => {
    const { outcome, calls } = await scenario('auto', { status: 'SENDING', pick: null, senderLost: true });
    expect(outcome).toMatchObject({ ok: true, value: { status: 'FAILED' } });
    expect(calls.partitions).toHaveLength(4);
    expect(calls.finish).toEqual([{ campaignId: 'c', outcome: 'failed', reason: expect.stringContaining('not verified') }]);
  });
});
