import { ActivityFailure, patched, proxyActivities, sleep } from '@temporalio/workflow';
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
// The first pass: every delivery's first attempt in one activity (Temporal's cost is per activity, and most first
// attempts succeed). Not retried: whatever it did not settle goes the one-activity-per-delivery way.
const { deliverWebhookFirstPass } = proxyActivities<WebhookOutActivities>({
  startToCloseTimeout: '3 minutes',
  retry: { maximumAttempts: 1 },
});
const { giveUpWebhookDelivery } = proxyActivities<WebhookOutActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', maximumInterval: '5 minutes' },
});

/** Deliveries of one batch in flight at once: a batch is one endpoint's, so this bounds what one receiver gets from us. */
const CONCURRENCY = 8;

type Result = { deliveryId: string } & (AttemptOutcome | { outcome: 'gave_up'; error: string });

/**
 * The batch's deliveries as chains, in the order of each chain's first: a contact's deliveries (in the order given,
 * id order) form one chain, a delivery without a contact (or a batch without `contactIds`) a chain of its own.
 */
function chainsOf(deliveryIds: readonly string[], contactIds: readonly (string | null)[] | undefined): string[][] {
  const chains: string[][] = [];
  const byContact = new Map<string, string[]>();
  deliveryIds.forEach((id, i) => {
    const contact = contactIds?.[i];
    const chain = contact ? byContact.get(contact) : undefined;
    if (chain) return void chain.push(id);
    const fresh = [id];
    chains.push(fresh);
    if (contact) byContact.set(contact, fresh);
  });
  return chains;
}

/**
 * `webhook-delivery/<endpointId>/<first delivery id>` (search attribute ProjectId): one endpoint's batch of
 * deliveries, each retried on its own, at most CONCURRENCY at once. A workflow per endpoint batch, so a slow or dead
 * receiver delays only its own deliveries. A contact's deliveries run one after another, each once the one before it
 * succeeded or ended (README › Webhooks out › Order); across batches the activity holds a delivery back while an earlier
 * one of its contact is pending. The outcomes are the result, for Temporal Web UI.
 */
export async function webhookDelivery(input: { projectId: string; endpointId: string; deliveryIds: string[]; contactIds?: (string | null)[] }): Promise<Result[]> {
  const results: Result[] = [];
  let queue = chainsOf(input.deliveryIds, input.contactIds);
  // How long a delivery whose first attempt (in the first pass) failed or was held waits before its next one.
  let waits: Record<string, number> = {};
  if (patched('webhook-delivery-first-pass')) {
    try {
      const pass = await deliverWebhookFirstPass({ chains: queue, concurrency: CONCURRENCY });
      results.push(...pass.settled);
      const settled = new Set(pass.settled.map((r) => r.deliveryId));
      queue = queue.map((chain) => chain.filter((id) => !settled.has(id))).filter((chain) => chain.length > 0);
      waits = pass.waits;
    } catch (err) {
      if (!(err instanceof ActivityFailure)) throw err; // the worker died mid-pass: every delivery goes the slow way
    }
  }
  const lane = async () => {
    for (let chain = queue.shift(); chain !== undefined; chain = queue.shift()) {
      for (const id of chain) {
        if (waits[id]) await sleep(waits[id]);
        try {
          results.push({ deliveryId: id, ...(await deliverWebhook({ deliveryId: id })) });
        } catch (err) {
          if (!(err instanceof ActivityFailure)) throw err;
          await giveUpWebhookDelivery({ deliveryId: id });
          results.push({ deliveryId: id, outcome: 'gave_up', error: err.cause?.message ?? err.message });
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, lane));
  return results;
}
