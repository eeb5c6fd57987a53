import type { Sql } from '../db/sql';
import { markInboundStarted } from './inbound.repository';

/** What starts `inbound-mail` workflows (temporal/client.ts › TemporalGateway). */
export interface InboundMailStarter {
  startInboundMail(input: { inboundIds: string[] }): Promise<string>;
}

/**
 * Hands stored messages to their processing: starts `inbound-mail/<first id>` (a repeated start is harmless) and notes
 * the run on their rows, so the sweeper of api/inbound.ts leaves them alone. Used by the inbound server's batcher and
 * sweeper and by the bounce mailbox's poll.
 */
export async function startInboundProcessing(temporal: InboundMailStarter, db: Sql, inboundIds: string[]): Promise<string> {
  const workflowId = await temporal.startInboundMail({ inboundIds });
  await markInboundStarted(db, inboundIds, workflowId);
  return workflowId;
}
