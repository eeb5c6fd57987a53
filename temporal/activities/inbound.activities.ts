import type { ActivityDeps } from './deps';
import { processInboundMessage, type InboundOutcome } from '../../domain/inbound/inbound-apply';

export function createInboundActivities(deps: ActivityDeps) {
  return {
    /**
     * Classifies and applies stored inbound messages, one after another, each in a transaction of its own (idempotent:
     * a processed message answers its outcome, so a retried batch redoes only what did not commit).
     */
    async processInbound(inboundIds: string[]): Promise<InboundOutcome[]> {
      const outcomes: InboundOutcome[] = [];
      for (const id of inboundIds) outcomes.push(await processInboundMessage(deps.orm.em.fork(), deps.config, id));
      return outcomes;
    },
  };
}

export type InboundActivities = ReturnType<typeof createInboundActivities>;
