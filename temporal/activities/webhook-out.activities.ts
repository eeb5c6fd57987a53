import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { WEBHOOK_RETRY, webhookBackoffMs, webhookRetryDelayMs } from '../webhook-retry';

/** How long the first pass starts attempts for (each bounded by WEBHOOK_TIMEOUT; the activity has 3 minutes). */
const FIRST_PASS_MS = 60_000;

/**
 * How long the first pass keeps looking at a delivery held behind an earlier one of its contact that is on its first
 * attempt (in another batch's pass): it is usually done within a second, and waiting here costs no Temporal call.
 */
const FIRST_PASS_HOLD_MS = 20_000;

/** The first pass records its successes together: up to this many, or what came within this long, in one statement. */
const SUCCESS_BUFFER = { max: 64, delayMs: 20 };

/** The longest wait between two looks of a held delivery at the earlier one it waits for. */
const HOLD_MAX_WAIT_MS = 30_000;
import type { ActivityDeps } from './deps';
import { SecretBox } from '../../domain/domains/secret-box';
import { noticeEndpointDisabled } from '../../domain/webhook-endpoints/endpoint-notice';
import { queueReplayPage, type ReplayCursor, type ReplayRequest } from '../../domain/webhook-endpoints/webhook-replay';
import { attemptDelivery, firstPass, giveUpDelivery, readBatchTargets, successBuffer, type AttemptOutcome, type AttemptSettings, type FirstPass } from '../../domain/webhook-endpoints/webhook-attempt';

export function createWebhookOutActivities(deps: ActivityDeps) {
  const box = new SecretBox(deps.config.appSecret); // unseals the endpoints' signing secrets
  const settings: AttemptSettings = {
    allowPrivateNetworks: deps.config.automations.webhookAllowPrivateNetworks,
    allowedNetworks: deps.config.automations.webhookAllowedNetworks,
    timeoutMs: deps.config.automations.webhookTimeoutMs,
    disableAfterMs: deps.config.webhooksOut.disableAfterMs,
    noticeDisabled: (endpointId) => noticeEndpointDisabled(deps.orm.em.fork(), { transport: deps.transport, config: deps.config }, endpointId),
  };
  return {
    /**
     * One attempt of one delivery, recorded whatever its outcome. A failure worth retrying throws a retryable failure
     * (the workflow's retry policy is the backoff); one that cannot succeed throws a non-retryable one.
     */
    async deliverWebhook(input: { deliveryId: string }): Promise<AttemptOutcome> {
      const ctx = Context.current();
      // Held looks are activity attempts but not attempts of the delivery: they are counted in the heartbeat details
      // (which the next attempt receives), so the backoff follows the delivery's own attempts.
      const held = Number((ctx.info.heartbeatDetails as { held?: number } | undefined)?.held ?? 0);
      const attempt = Math.max(1, ctx.info.attempt - held);
      const outcome = await attemptDelivery(deps.orm.em.fork(), box, settings, input.deliveryId);
      if (outcome.outcome === 'held') {
        // Not an attempt: asked again 5 s later, doubling to 30 s, until the earlier delivery is no longer pending.
        ctx.heartbeat({ held: held + 1 });
        const nextRetryDelay = Math.min(HOLD_MAX_WAIT_MS, webhookBackoffMs(held + 1));
        throw ApplicationFailure.create({ message: `Held behind the earlier delivery ${outcome.behind} of the same contact`, type: 'WebhookDeliveryHeld', nextRetryDelay });
      }
      if (outcome.outcome === 'retry') {
        // The policy's backoff for the delivery's own attempt; a Retry-After (429, 503...) waits at least that long.
        ctx.heartbeat({ held });
        const nextRetryDelay = webhookRetryDelayMs(attempt, outcome.retryAfterMs) ?? webhookBackoffMs(attempt);
        throw ApplicationFailure.create({ message: outcome.error, type: 'WebhookAttemptFailed', details: [outcome], nextRetryDelay });
      }
      if (outcome.outcome === 'failed') throw ApplicationFailure.create({ message: outcome.error, type: 'WebhookAttemptFailed', nonRetryable: true, details: [outcome] });
      return outcome;
    },

    /**
     * The first attempt of every delivery of a batch in one activity (README › Webhooks out › How deliveries run): what
     * it settles, and the wait before the next attempt of each delivery it stopped at (a failure: the policy's first
     * wait, or the receiver's Retry-After; held: the first look's).
     */
    async deliverWebhookFirstPass(input: { chains: string[][]; concurrency: number }): Promise<FirstPass> {
      const em = deps.orm.em.fork();
      const targets = await readBatchTargets(em, input.chains.flat());
      const successes = successBuffer(em, SUCCESS_BUFFER);
      const pass = await firstPass((id) => attemptDelivery(em.fork(), box, settings, id, { read: targets.get(id), recordSuccess: successes.add }), input.chains, {
        concurrency: input.concurrency,
        deadlineMs: Date.now() + FIRST_PASS_MS,
        holdForMs: FIRST_PASS_HOLD_MS,
        waitOf: (o) => (o?.outcome === 'retry' ? (webhookRetryDelayMs(1, o.retryAfterMs) ?? WEBHOOK_RETRY.initialIntervalMs) : WEBHOOK_RETRY.initialIntervalMs),
      });
      // Not settled until stored: a write that fails fails the pass, and the batch goes the slow way (at least once).
      await successes.flush();
      return pass;
    },

    /** One page of a replay: the deliveries it queued (in id order) and where to go on. */
    async queueWebhookReplayPage(input: { request: ReplayRequest; after: ReplayCursor | null }) {
      return queueReplayPage(deps.orm.em.fork(), input.request, input.after);
    },

    /** The delivery's retries ran out: it ends FAILED. */
    async giveUpWebhookDelivery(input: { deliveryId: string }): Promise<void> {
      await giveUpDelivery(deps.orm.em.fork(), input.deliveryId);
    },
  };
}

export type WebhookOutActivities = ReturnType<typeof createWebhookOutActivities>;
