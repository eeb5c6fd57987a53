import { proxyActivities } from '@temporalio/workflow';
import type { ReputationActivities } from '../activities/reputation.activities';

const { evaluateReputation } = proxyActivities<ReputationActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 5 },
});

/**
 * Runs on a schedule (`reputation-check`, every REPUTATION_CHECK_INTERVAL): evaluates the bounce and complaint rates
 * of every project that sent in the window (domain/reputation/reputation.ts). Answers the projects it suspended.
 */
export async function reputationCheck(): Promise<{ suspended: string[] }> {
  return { suspended: await evaluateReputation() };
}
