import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { WebhookOutActivities } from '../activities/webhook-out.activities';
import type { AttemptOutcome } from '../../domain/webhook-endpoints/webhook-attempt';
import { WEBHOOK_RETRY } from '../webhook-retry';

// One attempt per activity attempt: the call is bounded by WEBHOOK_TIMEOUT inside; the retry policy is the backoff,
// 5 s doubling to an hour, for three days (about 80 attempts), README › Webhooks out › Retries. A Retry-After answer
// sets the next wait itself (the activity's nextRetryDelay).
const { deliverWebhook } = proxyActivities<WebhookOutActivities>({
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: WEBHOOK_RETRY.forMs,
  retry: { initialInterval: WEBHOOK_RETRY.initialIntervalMs, backoffCoefficient: WEBHOOK_RETRY.backoffCoefficient, maximumInterval: WEBHOOK_RETRY.maximumIntervalMs },
});
const { giveUpWebhookDelivery } = proxyActivities<WebhookOutActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', maximumInterval: '5 minutes' },
});

/** Deliveries of one batch in flight at once: a batch is one endpoint's, so this bounds what one receiver gets from us. */
const CONCURRENCY = 8;

type Result = { deliveryId: string } & (AttemptOutcome | { outcome: 'gave_up'; error: string });

/**
 * `webhook-delivery/<endpointId>/<first delivery id>` (search attribute ProjectId): one endpoint's batch of
 * deliveries, each retried on its own, at most CONCURRENCY at once. A workflow per endpoint batch, so a slow or dead
 * receiver delays only its own deliveries. The outcomes are the result, for Temporal Web UI.
 */
export async function webhookDelivery(input: { projectId: string; endpointId: string; deliveryIds: string[] }): Promise<Result[]> {
  const results: Result[] = [];
  const queue = [...input.deliveryIds];
  const lane = async () => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      try {
        results.push({ deliveryId: id, ...(await deliverWebhook({ deliveryId: id })) });
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        await giveUpWebhookDelivery({ deliveryId: id });
        results.push({ deliveryId: id, outcome: 'gave_up', error: err.cause?.message ?? err.message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, lane));
  return results;
}
