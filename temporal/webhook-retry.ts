/**
 * The backoff of a webhook delivery's attempts (README › Webhooks out › Retries). Pure (no imports): the
 * webhook-delivery workflow's retry policy and the delivery activity's Retry-After handling both read it.
 */
export const WEBHOOK_RETRY = {
  initialIntervalMs: 5_000,
  backoffCoefficient: 2,
  /** The longest wait between two attempts; a receiver's Retry-After is capped to it too. */
  maximumIntervalMs: 3_600_000,
  /** How long a delivery is tried (the activity's schedule-to-close timeout). */
  forMs: 3 * 86_400_000,
} as const;

/** The policy's own wait after the `attempt`-th attempt failed (1-based), as Temporal computes it. */
export function webhookBackoffMs(attempt: number): number {
  const { initialIntervalMs, backoffCoefficient, maximumIntervalMs } = WEBHOOK_RETRY;
  return Math.min(maximumIntervalMs, initialIntervalMs * backoffCoefficient ** Math.min(Math.max(attempt - 1, 0), 30));
}

/**
 * The wait before the next attempt when the receiver answered with Retry-After (429, 503, any retryable answer):
 * at least what it asked for and at least the policy's own backoff, at most the policy's maximum interval.
 * Without Retry-After: undefined (the retry policy decides).
 */
export function webhookRetryDelayMs(attempt: number, retryAfterMs: number | undefined): number | undefined {
  if (retryAfterMs === undefined) return undefined;
  return Math.min(WEBHOOK_RETRY.maximumIntervalMs, Math.max(retryAfterMs, webhookBackoffMs(attempt)));
}
