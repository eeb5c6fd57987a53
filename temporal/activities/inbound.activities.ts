import type { ActivityDeps } from './deps';
import { processInboundMessage, type InboundOutcome } from '../../domain/inbound/inbound-apply';

export function createInboundActivities(deps: ActivityDeps) {
  return {
    /** Classifies and applies one stored inbound message (idempotent: a processed message answers its outcome). */
    async processInbound(inboundId: string): Promise<InboundOutcome> {
      return processInboundMessage(deps.orm.em.fork(), deps.config, inboundId);
    },
  };
}

export type InboundActivities = ReturnType<typeof createInboundActivities>;
