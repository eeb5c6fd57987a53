import type { ActivityDeps } from './deps';
import { processInboundBatch, type InboundOutcome } from '../../domain/inbound/inbound-apply';

export function createInboundActivities(deps: ActivityDeps) {
  return {
    /**
     * Classifies and applies a batch of stored inbound messages (idempotent: a processed message answers its outcome,
     * so a retried batch redoes only what did not commit).
     */
    async processInbound(inboundIds: string[]): Promise<InboundOutcome[]> {
      return processInboundBatch(deps.orm.em.fork(), deps.config, inboundIds);
    },
  };
}

export type InboundActivities = ReturnType<typeof createInboundActivities>;
