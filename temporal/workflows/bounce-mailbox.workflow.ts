import { proxyActivities } from '@temporalio/workflow';
import type { InboundActivities } from '../activities/inbound.activities';
import type { BounceMailboxPoll } from '../../domain/inbound/bounce-mailbox';

// A poll stores each message before it moves it (domain/inbound/bounce-mailbox.ts), so an attempt that dies anywhere
// is simply made again: the heartbeat timeout notices a killed worker within seconds, not at the start-to-close limit.
const { pollBounceMailbox } = proxyActivities<InboundActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 5 },
});

/**
 * `bounce-mailbox-<time>`, started by the `bounce-mailbox` schedule: one poll of the bounce mailbox (README › Bounce
 * mailbox (IMAP)). Its result (stored, duplicates, moved, the inbound-mail runs) shows in Temporal Web UI; a poll that
 * fails for good is repeated by the next one, which reads whatever is still in the folder.
 */
export async function bounceMailboxPoll(_input: Record<string, never>): Promise<BounceMailboxPoll> {
  return pollBounceMailbox({});
}
