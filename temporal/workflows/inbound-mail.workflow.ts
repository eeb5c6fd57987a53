import { proxyActivities } from '@temporalio/workflow';
import type { InboundActivities } from '../activities/inbound.activities';
import type { InboundOutcome } from '../../domain/inbound/inbound-apply';

// Processing is one transaction, applied once (the message's row moves out of RECEIVED with the changes), so retries
// are safe. A report about an email not yet recorded as sent (a DSN faster than our own write of SENT) fails the
// attempt and comes again: backoff from 2 s, for up to a day, so a database outage costs no message either.
const { processInbound } = proxyActivities<InboundActivities>({
  startToCloseTimeout: '2 minutes',
  scheduleToCloseTimeout: '1 day',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '10 minutes' },
});

/**
 * `inbound-mail/<first inboundId>`: what the messages that came back within a few milliseconds of each other do (a
 * bounce, complaint, unsubscribe, reply or auto-reply each; README › Inbound mail). One activity takes the batch, each
 * message in a transaction of its own; the outcomes are the workflow's result, so Temporal Web UI shows them.
 */
export async function inboundMail(input: { inboundIds: string[] }): Promise<InboundOutcome[]> {
  return processInbound(input.inboundIds);
}
