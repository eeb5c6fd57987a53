import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { SecretBox } from '../../domain/domains/secret-box';
import { beginCampaignSend, sendCampaignPartition, settleCampaign, type BeginResult, type FinishInput, type FinishResult, type PartitionInput, type PartitionResult } from '../../domain/campaigns/campaign-send';

/** How long one partition call sends before it returns to the workflow (a round: a few history events). */
const ROUND_MS = 60_000;

export function createCampaignActivities(deps: ActivityDeps) {
  const secretBox = new SecretBox(deps.config.appSecret); // unseals the sender domain's DKIM key
  return {
    /** Starts sending once the time has come: fixes the content, snapshots the audience. Idempotent. */
    async beginCampaignSend(input: { campaignId: string }): Promise<(BeginResult & { state: 'wait' | 'ended' }) | { state: 'started'; audience: number; partitions: number }> {
      const begun = await beginCampaignSend(deps.orm.em.fork(), input.campaignId);
      return begun.state === 'started' ? { ...begun, partitions: deps.config.campaigns.partitions } : begun;
    },

    /**
     * Sends one share of the snapshot from `cursor` for up to a round. Heartbeats its cursor every chunk; a retry
     * (after a crash) starts again from the round's cursor, where only the rows whose outcome was not recorded are
     * still QUEUED.
     */
    async sendCampaignPartition(input: PartitionInput & { pass: number }): Promise<PartitionResult> {
      const ctx = Context.current();
      return sendCampaignPartition(
        { em: deps.orm.em.fork(), transport: deps.transport, config: deps.config, secretBox },
        input,
        {
          heartbeat: (cursor) => ctx.heartbeat({ cursor }),
          cancelled: () => ctx.cancellationSignal.aborted,
          budgetMs: ROUND_MS,
        },
      );
    },

    /** Settles the rows left QUEUED and the campaign's final status. Idempotent. */
    async finishCampaignSend(input: FinishInput): Promise<FinishResult> {
      return settleCampaign(deps.orm.em.fork(), input.campaignId, { outcome: input.outcome, reason: input.reason });
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
