import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * A provider's webhook event already applied (by the provider and its event id), stored in the same transaction as
 * its effects, so a redelivered or replayed report changes nothing. Kept PROVIDER_EVENT_RETENTION_MS (providers stop
 * retrying within three days).
 */
export const ProcessedProviderEvent = defineEntity({
  name: 'ProcessedProviderEvent',
  tableName: 'provider_webhook_events',
  indexes: [{ properties: ['receivedAt'] }],
  properties: {
    provider: p.string().length(32).primary(),
    eventId: p.string().primary(),
    receivedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type ProcessedProviderEvent = InferEntity<typeof ProcessedProviderEvent>;
