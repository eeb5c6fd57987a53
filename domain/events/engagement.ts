/**
 * What the service's own events report about an email, for everything that counts them (campaign stats, analytics
 * rollups): one reading of which event is which outcome, and of what does not count yet.
 */
const OUTCOME_OF = {
  'email.delivered': 'delivered',
  'email.open': 'opened',
  'email.click': 'clicked',
  'email.bounced': 'bounced',
  'email.complained': 'complained',
  'contact.unsubscribed': 'unsubscribed',
} as const;

export type EngagementOutcome = (typeof OUTCOME_OF)[keyof typeof OUTCOME_OF];

/** The event names that report an outcome. */
export const ENGAGEMENT_EVENT_NAMES = Object.keys(OUTCOME_OF);

/**
 * The outcome an event counts toward, or undefined. A transient bounce report is not a bounce (yet): the provider
 * retries, and a later report says how it ended.
 */
export function engagementOutcome(e: { name: string; data: Record<string, unknown> }): EngagementOutcome | undefined {
  const outcome = (OUTCOME_OF as Record<string, EngagementOutcome>)[e.name];
  if (outcome === 'bounced' && e.data.transient === true) return undefined;
  return outcome;
}
