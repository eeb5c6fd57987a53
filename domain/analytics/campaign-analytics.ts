import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { validationError } from '../errors';
import type { CampaignRow } from '../campaigns/campaign.entity';
import { campaignRates, type CampaignCounters, type CampaignStatsView } from '../campaigns/campaign-stats';

/** What top-campaigns can rank by: a counter, or a rate (computed as campaignRates does, per message sent). */
export const CAMPAIGN_RANKINGS = {
  sent: 's.sent',
  delivered: 's.delivered',
  openedUnique: 's.opened_unique',
  clickedUnique: 's.clicked_unique',
  bounced: 's.bounced',
  complained: 's.complained',
  unsubscribed: 's.unsubscribed',
  deliveryRate: 's.delivered::numeric / nullif(s.sent, 0)',
  openRate: 's.opened_unique::numeric / nullif(s.sent, 0)',
  clickRate: 's.clicked_unique::numeric / nullif(s.sent, 0)',
  clickToOpenRate: 's.clicked_unique::numeric / nullif(s.opened_unique, 0)',
  bounceRate: 's.bounced::numeric / nullif(s.sent, 0)',
  complaintRate: 's.complained::numeric / nullif(s.sent, 0)',
  unsubscribeRate: 's.unsubscribed::numeric / nullif(s.sent, 0)',
} as const;
export type CampaignRanking = keyof typeof CAMPAIGN_RANKINGS;

/** `abTest` and `abDecision`: the campaign's A/B test, null without variants (its groups are counted apart, abStatsOf). */
export type CampaignBreakdown = CampaignStatsView & { name: string; status: string; startedAt: Date | null } & Pick<CampaignRow, 'abTest' | 'abDecision'>;

type Row = CampaignCounters & { campaignId: string; name: string; status: string; startedAt: Date | null; updatedAt: Date | null } & Pick<CampaignRow, 'abTest' | 'abDecision'>;

const COLUMNS = `c.id as "campaignId", c.name, c.status, c.started_at as "startedAt", c.ab_test as "abTest", c.ab_decision as "abDecision",
  s.audience, s.sent, s.delivered, s.opened_unique as "openedUnique", s.opened_total as "openedTotal", s.clicked_unique as "clickedUnique",
  s.clicked_total as "clickedTotal", s.bounced, s.complained, s.unsubscribed, s.failed, s.skipped, s.updated_at as "updatedAt"`;

const view = (r: Row): CampaignBreakdown => ({
  ...r,
  ...campaignRates(r),
});

function range(q: { from?: Date; to?: Date }): { from: Date; to: Date } {
  const to = q.to ?? new Date();
  const from = q.from ?? new Date(to.getTime() - 90 * 86_400_000);
  if (from.getTime() > to.getTime()) throw validationError([{ field: 'query.from', message: 'from must not be after to', code: 'invalid_range' }]);
  return { from, to };
}

/**
 * Campaigns that started sending in [from, to) ranked by a counter or a rate, highest first, from their counters
 * (`campaign_stats`, one row per campaign): never a scan of emails. Rates need `minSent` messages sent (default 1),
 * so a campaign of three recipients does not top the open rate.
 */
export async function topCampaigns(
  em: EntityManager,
  projectId: string,
  q: { by: CampaignRanking; limit: number; minSent: number; from?: Date; to?: Date },
): Promise<CampaignBreakdown[]> {
  const { from, to } = range(q);
  const rows = await sql(em).query<Row>(
    `select ${COLUMNS} from campaigns c join campaign_stats s on s.campaign_id = c.id
     where c.project_id = $1 and c.started_at >= $2 and c.started_at < $3 and s.sent >= $4
     order by ${CAMPAIGN_RANKINGS[q.by]} desc nulls last, c.id desc limit $5`,
    [projectId, from, to, q.minSent, q.limit],
  );
  return rows.map(view);
}

/** Every campaign that started sending in [from, to), newest first, with its counters and rates. */
export async function campaignBreakdown(em: EntityManager, projectId: string, q: { limit: number; from?: Date; to?: Date }): Promise<CampaignBreakdown[]> {
  const { from, to } = range(q);
  const rows = await sql(em).query<Row>(
    `select ${COLUMNS} from campaigns c join campaign_stats s on s.campaign_id = c.id
     where c.project_id = $1 and c.started_at >= $2 and c.started_at < $3 order by c.started_at desc, c.id desc limit $4`,
    [projectId, from, to, q.limit],
  );
  return rows.map(view);
}
