import { continueAsNew, ParentClosePolicy, proxyActivities, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import type { WebhookOutActivities } from '../activities/webhook-out.activities';
import type { ReplayCursor, ReplayRequest } from '../../domain/webhook-endpoints/webhook-replay';
import { webhookReplayProgressQuery, workflowIds } from '../definitions';
import { webhookDelivery } from './webhook-delivery.workflow';

const { queueWebhookReplayPage } = proxyActivities<WebhookOutActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '2 seconds', maximumInterval: '1 minute' },
});

/** Deliveries per `webhook-delivery` child (as the outbox consumer's batches). */
const BATCH = 100;
/** Pages per run before it continues as new (each page: one activity and up to five children). */
const PAGES_PER_RUN = 100;

interface WebhookReplayInput extends ReplayRequest {
  /** Where the previous run stopped (continue-as-new). */
  after?: ReplayCursor;
  /** Totals of the previous runs. */
  events?: number;
  queued?: number;
}

/**
 * `webhook-replay/<endpointId>/<replayId>` (search attribute ProjectId): pages through the project's events of the
 * range in recorded order and queues those the endpoint wants (domain/webhook-endpoints/webhook-replay.ts), handing
 * each page's deliveries to `webhook-delivery/<endpointId>/<first>/replay/<replayId>` children that outlive it
 * (ParentClosePolicy ABANDON): the replay ends once everything is queued, its deliveries go on with their retries.
 * Its progress (events read, deliveries queued, done) answers the `progress` query.
 */
export async function webhookReplay(input: WebhookReplayInput): Promise<{ events: number; queued: number }> {
  let { after, events = 0, queued = 0 } = input;
  let done = false;
  setHandler(webhookReplayProgressQuery, () => ({ from: input.from, to: input.to, events, queued, done }));
  const request: ReplayRequest = { replayId: input.replayId, projectId: input.projectId, endpointId: input.endpointId, from: input.from, to: input.to };
  for (let page = 0; ; page++) {
    const r = await queueWebhookReplayPage({ request, after: after ?? null });
    events += r.events;
    queued += r.deliveries.length;
    for (let i = 0; i < r.deliveries.length; i += BATCH) {
      const batch = r.deliveries.slice(i, i + BATCH);
      await startChild(webhookDelivery, {
        workflowId: `${workflowIds.webhookDelivery(input.endpointId, batch[0]!.id)}/replay/${input.replayId}`,
        args: [{ projectId: input.projectId, endpointId: input.endpointId, deliveryIds: batch.map((d) => d.id), contactIds: batch.map((d) => d.contactId) }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: workflowInfo().typedSearchAttributes,
      });
    }
    if (!r.next) {
      done = true;
      return { events, queued };
    }
    after = r.next;
    if (page + 1 >= PAGES_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof webhookReplay>({ ...input, after, events, queued });
    }
  }
}
