import { Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { SecretBox } from '../../domain/domains/secret-box';
import { createRenderPool } from '../../domain/campaigns/render-pool';
import { createSmtpPipelinePool } from '../../domain/mail/smtp-pipeline';
import { BillingGuard } from '../../domain/billing/billing.service';
import { suppressCampaignRecipients } from '../../domain/campaigns/campaign-suppression';
import { abWaitState, recordAbDecision } from '../../domain/campaigns/campaign-ab';
import { beginCampaignSend, campaignSendRate, sendCampaignPartition, settleCampaign, type BeginResult, type BegunAbTest, type FinishInput, type FinishResult, type PartitionInput, type PartitionResult } from '../../domain/campaigns/campaign-send';

/** How long one partition call sends before it returns to the workflow (a round: a few history events). */
const ROUND_MS = 60_000;

export function createCampaignActivities(deps: ActivityDeps) {
  const secretBox = new SecretBox(deps.config.appSecret); // unseals the sender domain's DKIM key
  const renderPool = deps.renderPool ?? createRenderPool(0, deps.config.database.url);
  const smtp = deps.campaignSmtp ?? createSmtpPipelinePool(deps.config.smtp.url, deps.config.smtp.poolSize);
  return {
    /**
     * Starts sending once the time has come: fixes the content, snapshots the audience, and ends the snapshot's
     * suppressed recipients as SUPPRESSED before any partition runs. Idempotent.
     */
    async beginCampaignSend(
      input: { campaignId: string },
    ): Promise<Exclude<BeginResult, { state: 'started' }> | { state: 'started'; audience: number; ab?: BegunAbTest; partitions: number; retryDelaysMs: number[]; throttled: boolean }> {
      const em = deps.orm.em.fork();
      const begun = await beginCampaignSend(em, input.campaignId, new Date(), new BillingGuard(deps.config.billing));
      if (begun.state !== 'started') return begun;
      await suppressCampaignRecipients(em, input.campaignId);
      // The run's shape comes from this worker's configuration, recorded in the history with the result.
      const throttled = (await campaignSendRate(em, input.campaignId, deps.config)) > 0;
      return { ...begun, partitions: deps.config.campaigns.partitions, retryDelaysMs: deps.config.campaigns.retryDelaysMs, throttled };
    },

    /**
     * Sends one share of the snapshot from `cursor` for up to a round. Heartbeats its cursor every chunk; a retry
     * (after a crash) starts again from the round's cursor, where only the rows whose outcome was not recorded are
     * still QUEUED.
     */
    async sendCampaignPartition(input: PartitionInput & { pass: number }): Promise<PartitionResult> {
      const ctx = Context.current();
      return sendCampaignPartition(
        { em: deps.orm.em.fork(), smtp, config: deps.config, secretBox, renderPool },
        input,
        {
          heartbeat: (cursor) => ctx.heartbeat({ cursor }),
          cancelled: () => ctx.cancellationSignal.aborted,
          budgetMs: ROUND_MS,
        },
      );
    },

    /** An A/B-tested campaign's run, waiting for its decision, reads the status, a person's pick and a decision made. */
    async abWaitState(input: { campaignId: string }) {
      return abWaitState(deps.orm.em.fork(), input.campaignId);
    },

    /** Decides and records the winner of an A/B test (once; a retry gets the recorded decision). */
    async decideCampaignWinner(input: { campaignId: string }) {
      return recordAbDecision(deps.orm.em.fork(), input.campaignId);
    },

    /** Settles the rows left QUEUED and the campaign's final status. Idempotent. */
    async finishCampaignSend(input: FinishInput): Promise<FinishResult> {
      return settleCampaign(deps.orm.em.fork(), input.campaignId, { outcome: input.outcome, reason: input.reason });
    },
  };
}

export type CampaignActivities = ReturnType<typeof createCampaignActivities>;
