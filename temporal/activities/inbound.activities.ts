import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityDeps } from './deps';
import { processInboundBatch, type InboundOutcome } from '../../domain/inbound/inbound-apply';
import { pollBounceMailbox, type BounceMailboxPoll } from '../../domain/inbound/bounce-mailbox';
import { sql } from '../../domain/db/sql';

export function createInboundActivities(deps: ActivityDeps) {
  return {
    /**
     * Classifies and applies a batch of stored inbound messages (idempotent: a processed message answers its outcome,
     * so a retried batch redoes only what did not commit).
     */
    async processInbound(inboundIds: string[]): Promise<InboundOutcome[]> {
      return processInboundBatch(deps.orm.em.fork(), deps.config, inboundIds);
    },

    /** One poll of the bounce mailbox: store, hand on, move (domain/inbound/bounce-mailbox.ts); heartbeats per batch. */
    async pollBounceMailbox(_input: Record<string, never>): Promise<BounceMailboxPoll> {
      const mailbox = deps.config.bounceMailbox;
      // The schedule outlived its configuration (a worker without BOUNCE_MAILBOX_HOST removes it at start).
      if (!mailbox) throw ApplicationFailure.create({ nonRetryable: true, message: 'the bounce mailbox is not configured (BOUNCE_MAILBOX_HOST)' });
      const ctx = Context.current();
      ctx.heartbeat();
      return pollBounceMailbox({
        mailbox,
        maxMessageBytes: deps.config.inbound.maxMessageBytes,
        db: sql(deps.orm.em),
        temporal: deps.temporal(),
        progress: (done) => ctx.heartbeat(done),
      });
    },
  };
}

export type InboundActivities = ReturnType<typeof createInboundActivities>;
