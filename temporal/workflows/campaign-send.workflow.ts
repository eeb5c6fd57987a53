import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  ContinueAsNew,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  sleep,
  upsertMemo,
  workflowInfo,
} from '@temporalio/workflow';
import type { Duration } from '@temporalio/common';
import type { CampaignActivities } from '../activities/campaign.activities';
import { campaignAbQuery, campaignShareQueue, campaignWakeSignal, type CampaignAbProgress } from '../definitions';

interface CampaignSendInput {
  projectId: string;
  campaignId: string;
  /** When to start (ISO); null: now. The database's `scheduled_at` is the truth; this is the first guess. */
  scheduledFor: string | null;
  /** Carried over continue-as-new once the snapshot is taken. */
  sending?: SendingState;
}

interface SendingState {
  partitions: number;
  /** Per share: where the current pass continues (a contact id), or done. */
  cursors: (string | null)[];
  done: boolean[];
  /** Pass 1 sends; later passes retry the transient failures of the earlier ones. */
  pass: number;
  /** Transient failures seen in the current pass. */
  retry: number;
  /** Pauses before each retry pass (from the worker's CAMPAIGN_RETRY_DELAYS when the send began). */
  retryDelaysMs: number[];
  audience: number;
  totals: { sent: number; skipped: number; rejected: number };
  /**
   * Sent at a rate (split evenly over the shares, so they must all send at once): its shares stay on the workflow's
   * task queue, with no per-worker limit. Unset in runs begun before it existed.
   */
  throttled?: boolean;
  /** An A/B-tested campaign (absent otherwise, and in every run recorded before variants existed). */
  ab?: AbState;
}

interface AbState {
  variants: number;
  testDurationSeconds: number;
  afterTest: 'auto' | 'manual';
  /** test: the shares are variant x partition (variant-major); remainder: the partitions, sending `winner`. */
  phase: 'test' | 'remainder';
  winner?: number;
}

interface CampaignSendResult {
  status: string;
  audience: number;
  sent: number;
  skipped: number;
  rejected: number;
  /** Rows settled at the end (given up after the retry passes, or not sent because of a cancel). */
  settled: number;
}

const { beginCampaignSend, finishCampaignSend, abWaitState, decideCampaignWinner } = proxyActivities<CampaignActivities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

// One call sends a share for up to a round (see the activity); it heartbeats every chunk, so a killed worker is noticed
// within the heartbeat timeout and the call is retried from the round's cursor on another (or the restarted) worker.
// A cancelled run waits for its calls to stop at a chunk boundary before it settles the rest.
const SHARE_CALL = {
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '20 seconds',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
} as const;
/** Share calls on the workflow's queue: runs recorded before the shares had a queue of their own, and throttled campaigns. */
const { sendCampaignPartition: sendShareOnWorkflowQueue } = proxyActivities<CampaignActivities>(SHARE_CALL);

/** A paused or scheduled run re-reads its campaign at least this often, in case a wake-up signal was lost. */
const RECHECK = '1 hour';
/** Rounds before the run continues as new, keeping its history short at any audience size. */
const ROUNDS_PER_RUN = 200;

/**
 * A campaign's send (`campaign-send/<campaignId>`, search attributes ProjectId and CampaignId). It waits durably for
 * the scheduled time, snapshots the audience, then sends the snapshot in shares (`partitions`), each share walked by
 * one activity call at a time, round after round, until every share is done; transient failures get retry passes.
 * The database holds the campaign's status: a pause, resume, new time or cancel through the API changes it and wakes
 * the run (signal `wake`), and the activities stop at a chunk boundary when it is no longer SENDING. Cancelling the
 * run in Temporal Web UI cancels the campaign.
 */
export async function campaignSend(input: CampaignSendInput): Promise<CampaignSendResult> {
  const { campaignId } = input;
  // Shares go to their own task queue, where each worker holds at most CAMPAIGN_SHARES_PER_WORKER of them. On the
  // workflow's queue (100 slots and several polls a worker) which worker got a share was up to the server's matching,
  // and one worker sometimes took every share (BENCHMARKS.md, campaign section). Decided, and recorded, at the first
  // round this code runs; runs recorded before replay as they were.
  // There, a share can wait for a slot while another sends: a round waits for every call to end (a cancelled run
  // settles the rest only once no call sends), where Promise.all went on at the first failure or cancellation.
  // A throttled campaign's shares stay on the workflow's queue: its rate is split over all its shares, which a share
  // waiting for a slot would not send, and a slow share would hold a worker's slot for a whole round.
  let ownQueue: boolean | undefined;
  const sendRound = <T,>(throttled: boolean, calls: (send: typeof sendShareOnWorkflowQueue) => Promise<T>[]): Promise<T[]> => {
    ownQueue ??= patched('campaign-shares-own-queue');
    if (!ownQueue || throttled) return Promise.all(calls(sendShareOnWorkflowQueue));
    return allOrFirstFailure(calls(proxyActivities<CampaignActivities>({ ...SHARE_CALL, taskQueue: campaignShareQueue(workflowInfo().taskQueue) }).sendCampaignPartition));
  };
  let wakes = 0;
  setHandler(campaignWakeSignal, () => {
    wakes++;
  });
  const waitForWake = async (seen: number, timeout: Duration) => {
    await condition(() => wakes > seen, timeout);
  };

  let progress: CampaignAbProgress | null = null;
  setHandler(campaignAbQuery, () => progress);

  // Sends every open share, round after round, with retry passes; continues as new when the history grows. Returns
  // the run's result when the send stopped for good (cancelled, failed), null when every share is done.
  const sendShares = async (state: SendingState): Promise<CampaignSendResult | null> => {
    for (let round = 0; ; round++) {
      const open = state.done.flatMap((d, i) => (d ? [] : [i]));
      if (open.length === 0) {
        if (state.retry === 0 || state.pass > state.retryDelaysMs.length) return null;
        await sleep(state.retryDelaysMs[state.pass - 1]!);
        Object.assign(state, { pass: state.pass + 1, retry: 0, cursors: state.cursors.map(() => null), done: state.done.map(() => false) });
        continue;
      }
      const seen = wakes;
      const results = await sendRound(state.throttled === true, (send) => open.map((share) => send(shareCall(campaignId, state, share))));
      const stopped = results.find((r) => r.stopped)?.stopped;
      results.forEach((r, i) => {
        const share = open[i]!;
        state.cursors[share] = r.cursor;
        state.done[share] = r.done;
        state.retry += r.retry;
        state.totals.sent += r.sent;
        state.totals.skipped += r.skipped;
        state.totals.rejected += r.rejected;
      });
      if (stopped === 'PAUSED') {
        await waitForWake(seen, RECHECK);
      } else if (stopped) {
        return finish(state, stopped === 'CANCELLED' ? 'cancelled' : 'failed');
      }
      if (round + 1 >= ROUNDS_PER_RUN || workflowInfo().continueAsNewSuggested) {
        await continueAsNew<typeof campaignSend>({ ...input, sending: state });
      }
    }
  };
  const finish = async (state: SendingState, outcome: 'completed' | 'cancelled' | 'failed', reason?: string): Promise<CampaignSendResult> => {
    const finished = await finishCampaignSend({ campaignId, outcome, ...(reason ? { reason } : {}) });
    return { ...state.totals, audience: state.audience, status: finished.status, settled: finished.settled };
  };

  try {
    let state = input.sending;
    if (!state) {
      let wakeAt = input.scheduledFor ? Date.parse(input.scheduledFor) : 0;
      for (;;) {
        const wait = wakeAt - Date.now();
        if (wait > 0) {
          await waitForWake(wakes, Math.min(wait, 3_600_000));
        }
        const seen = wakes;
        const begun = await beginCampaignSend({ campaignId });
        if (begun.state === 'wait') {
          wakeAt = Date.parse(begun.scheduledAt);
          if (wakes > seen) wakeAt = 0; // changed again while we asked: look at once
          continue;
        }
        if (begun.state === 'ended') return { status: begun.status, audience: 0, sent: 0, skipped: 0, rejected: 0, settled: 0 };
        // An A/B test sends each variant's share first: one share per variant and partition.
        const shares = begun.ab ? begun.ab.variants * begun.partitions : begun.partitions;
        state = {
          audience: begun.audience,
          partitions: begun.partitions,
          cursors: Array.from({ length: shares }, () => null),
          done: Array.from({ length: shares }, () => false),
          pass: 1,
          retry: 0,
          retryDelaysMs: begun.retryDelaysMs,
          totals: { sent: 0, skipped: 0, rejected: 0 },
          ...(begun.throttled ? { throttled: true } : {}),
          ...(begun.ab ? { ab: { ...begun.ab, phase: 'test' as const } } : {}),
        };
        break;
      }
    }
    const ab = state.ab;
    if (ab) progress = { phase: ab.phase, variants: ab.variants, testEndsAt: null, winner: ab.winner ?? null, note: null };

    const stoppedEarly = await sendShares(state);
    if (stoppedEarly) return stoppedEarly;
    if (ab?.phase === 'test') {
      const waited = await waitForDecision(state, ab);
      if (waited) return waited;
      const decided = await decideCampaignWinner({ campaignId });
      if ('senderProblem' in decided) return await finish(state, 'failed', decided.senderProblem);
      const { decision } = decided;
      ab.phase = 'remainder';
      ab.winner = decision.winner;
      progress = { phase: 'remainder', variants: ab.variants, testEndsAt: progress?.testEndsAt ?? null, winner: decision.winner, note: decision.note };
      upsertMemo({ abWinner: decision.winnerLabel, abDecidedBy: decision.decidedBy, abNote: decision.note });
      Object.assign(state, {
        pass: 1,
        retry: 0,
        cursors: Array.from({ length: state.partitions }, () => null),
        done: Array.from({ length: state.partitions }, () => false),
      });
      const stoppedLate = await sendShares(state);
      if (stoppedLate) return stoppedLate;
    }
    return await finish(state, 'completed');
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() => finishCampaignSend({ campaignId, outcome: 'cancelled' }));
      throw err;
    }
    // continueAsNew() works by throwing: it is how the run ends, not a failure.
    if (err instanceof ContinueAsNew) throw err;
    // An unexpected failure (e.g. an activity's non-retryable error) must not leave the campaign SENDING forever.
    const reason = rootMessage(err);
    await CancellationScope.nonCancellable(() => finishCampaignSend({ campaignId, outcome: 'failed', reason: `The send failed: ${reason}` }));
    throw ApplicationFailure.create({ nonRetryable: true, type: 'CampaignSendFailed', message: reason });
  }

  /**
   * The test's wait, a durable timer: it ends when the test duration has passed (auto), or at a person's pick (either
   * mode). A pause holds it (a paused campaign decides nothing; once resumed after the end it decides at once); a
   * cancel ends the run. Every wake-up (API change) re-reads the campaign. Returns the run's result if it ended.
   */
  async function waitForDecision(state: SendingState, ab: AbState): Promise<CampaignSendResult | null> {
    const endsAt = Date.now() + ab.testDurationSeconds * 1000;
    progress = { phase: 'waiting', variants: ab.variants, testEndsAt: new Date(endsAt).toISOString(), winner: null, note: null };
    upsertMemo({ abTestEndsAt: progress.testEndsAt });
    for (;;) {
      const seen = wakes;
      const now = await abWaitState({ campaignId });
      if (now.status !== 'SENDING' && now.status !== 'PAUSED') return finish(state, 'cancelled');
      if (now.pick !== null || now.decided) return null;
      const timed = now.status === 'SENDING' && ab.afterTest === 'auto';
      if (timed && Date.now() >= endsAt) return null;
      await waitForWake(seen, timed ? endsAt - Date.now() : RECHECK);
    }
  }
}

/** The activity call of share `share`: a partition of the campaign, or of a variant's test share, or of the remainder. */
function shareCall(campaignId: string, state: SendingState, share: number) {
  const base = { campaignId, partition: share, partitions: state.partitions, cursor: state.cursors[share]!, pass: state.pass };
  if (!state.ab) return base;
  if (state.ab.phase === 'test') return { ...base, partition: share % state.partitions, variant: Math.floor(share / state.partitions) };
  return { ...base, variant: state.ab.winner!, remainder: true };
}

/** Every call's result once all have ended; the first failure (in call order) once all have ended, if any failed. */
async function allOrFirstFailure<T>(calls: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(calls);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/** The innermost message of a failure chain (an ActivityFailure's own message only says that an activity failed). */
function rootMessage(err: unknown): string {
  let e = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
