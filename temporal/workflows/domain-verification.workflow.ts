import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  log,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { DomainActivities } from '../activities/domain.activities';
import { checkNowUpdate, removeSignal } from '../definitions';
import type { DomainCheckResult } from '../../domain/domains/domain.service';

interface DomainVerificationInput {
  projectId: string;
  domainId: string;
  /** Checks per run before the loop continues as new, which bounds the history (default 100). */
  checksPerRun?: number;
}

export interface DomainVerificationResult {
  /** REMOVED: the remove signal; DOMAIN_GONE: a check found no domain row (deleted while nobody signalled). */
  ended: 'REMOVED' | 'DOMAIN_GONE';
  checks: number;
}

const DEFAULT_CHECKS_PER_RUN = 100;
/** After a check that failed (database down), the next try comes at most this soon. */
const RETRY_AFTER_FAILURE_MS = 60_000;

const { checkDomain } = proxyActivities<DomainActivities>({
  // DNS lookups are bounded per lookup (DNS_TIMEOUT); this covers a slow database as well.
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

/**
 * The verification loop of one sender domain (id `domain-verification/<domainId>`). Each check is an activity that
 * looks the domain's DNS records up, stores every record's status and moves the domain between PENDING and VERIFIED.
 * The activity says when to check next (the worker's DOMAIN_CHECK_INTERVAL while pending, DOMAIN_RECHECK_INTERVAL once
 * verified). The `checkNow` update runs a check at once and returns it; checks never overlap. The loop ends on the
 * `remove` signal or when the domain row is gone, and continues as new every `checksPerRun` checks.
 */
export async function domainVerification(input: DomainVerificationInput): Promise<DomainVerificationResult> {
  let removed = false;
  let checks = 0;
  let gone = false;
  let queue: Promise<unknown> = Promise.resolve();

  /** Checks run one at a time, in the order asked for. */
  const check = (): Promise<DomainCheckResult> => {
    const run = queue.then(async () => {
      const result = await checkDomain({ domainId: input.domainId });
      checks++;
      if (!result.exists) gone = true;
      return result;
    });
    queue = run.catch(() => undefined);
    return run;
  };

  setHandler(removeSignal, () => {
    removed = true;
  });
  setHandler(
    checkNowUpdate,
    async () => {
      try {
        return await check();
      } catch (err) {
        throw ApplicationFailure.create({
          nonRetryable: true,
          type: 'DomainCheckFailed',
          message: `The check could not run: ${err instanceof Error ? err.message : String(err)}`,
        });
      }
    },
    {
      validator: () => {
        if (removed || gone) throw new Error('The domain has been removed');
      },
    },
  );

  const checksPerRun = input.checksPerRun ?? DEFAULT_CHECKS_PER_RUN;
  for (;;) {
    let nextInMs = RETRY_AFTER_FAILURE_MS;
    try {
      const result = await check();
      nextInMs = result.nextCheckInMs;
    } catch (err) {
      log.warn('domain check failed; trying again later', { domainId: input.domainId, error: String(err) });
    }
    if (removed || gone) break;
    // Wakes early on `remove`; a `checkNow` runs in its handler and does not disturb this timer.
    await condition(() => removed || gone, nextInMs);
    if (removed || gone) break;
    if (checks >= checksPerRun || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      if (removed || gone) break;
      await continueAsNew<typeof domainVerification>(input);
    }
  }
  await condition(allHandlersFinished);
  return { ended: removed ? 'REMOVED' : 'DOMAIN_GONE', checks };
}
