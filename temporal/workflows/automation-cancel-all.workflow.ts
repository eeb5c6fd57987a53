import { proxyActivities } from '@temporalio/workflow';
import type { AutomationActivities } from '../activities/automation.activities';

export interface AutomationCancelAllInput {
  projectId: string;
  automationId: string;
  /** Runs started up to this time are cancelled (ISO); later ones belong to the next request. */
  before: string;
}

// A page asks up to a few hundred runs to cancel; a killed worker is noticed by the heartbeat and the page retried
// from its last heartbeat's cursor (a run asked twice to cancel is fine).
const { cancelAutomationRuns } = proxyActivities<AutomationActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * `POST /workflows/:id/executions/cancel-all`: asks every RUNNING or WAITING run of the automation, started before the
 * request, to cancel, a page at a time; each run records CANCELLED itself. Returns how many were asked.
 */
export async function automationCancelAll(input: AutomationCancelAllInput): Promise<{ cancelled: number }> {
  let cursor: string | null = null;
  let cancelled = 0;
  do {
    const page: { cancelled: number; cursor: string | null } = await cancelAutomationRuns({ automationId: input.automationId, before: input.before, cursor });
    cancelled += page.cancelled;
    cursor = page.cursor;
  } while (cursor);
  return { cancelled };
}
