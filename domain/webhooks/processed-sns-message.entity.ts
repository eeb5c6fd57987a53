import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * An SNS message already processed (by its MessageId), stored in the same transaction as its effects, so a
 * redelivered notification changes nothing. Kept 30 days (SNS stops retrying long before); older messages are refused.
 */
export const ProcessedSnsMessage = defineEntity({
  name: 'ProcessedSnsMessage',
  tableName: 'sns_messages',
  indexes: [{ properties: ['receivedAt'] }],
  properties: {
    messageId: p.string().primary(),
    receivedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type ProcessedSnsMessage = InferEntity<typeof ProcessedSnsMessage>;
