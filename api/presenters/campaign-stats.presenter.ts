import { z } from 'zod';
import type { CampaignStatsView } from '../../domain/campaigns/campaign-stats';
import { iso } from './time';

const count = (description: string) => z.number().int().min(0).meta({ description });
const rate = (description: string) => z.number().min(0).meta({ description: `${description}; 0 when the denominator is 0, 4 decimals.` });

export const CampaignStatsSchema = z
  .object({
    campaignId: z.string(),
    audience: count('Recipients in the snapshot taken when sending started.'),
    sent: count('Messages handed to the relay: accepted, or rejected at once (those also count in bounced).'),
    delivered: count('Messages with a delivery report (needs a relay that reports, see Delivery reports); once per email.'),
    openedUnique: count('Emails opened at least once.'),
    openedTotal: count('Opens, every fetch of the pixel.'),
    clickedUnique: count('Emails with at least one tracked click.'),
    clickedTotal: count('Tracked clicks.'),
    bounced: count('Emails bounced: rejected by the relay, or a permanent bounce report (transient bounces are not counted).'),
    complained: count('Emails reported as spam (complaint reports); once per email.'),
    unsubscribed: count("Recipients who unsubscribed through this campaign's mail (its links, or a complaint); once per email."),
    failed: count('Messages given up on after temporary failures.'),
    skipped: count('Recipients not sent to because they unsubscribed (or were deleted) between the audience snapshot and their turn.'),
    deliveryRate: rate('delivered / sent'),
    openRate: rate('openedUnique / sent'),
    clickRate: rate('clickedUnique / sent'),
    clickToOpenRate: rate('clickedUnique / openedUnique (can exceed 1: a reader whose client blocks the pixel still clicks)'),
    bounceRate: rate('bounced / sent'),
    complaintRate: rate('complained / sent'),
    unsubscribeRate: rate('unsubscribed / sent'),
    updatedAt: z.iso.datetime().nullable().meta({ description: 'Last change of any counter; null before sending started.' }),
  })
  .meta({
    id: 'CampaignStats',
    description:
      "A campaign's counters, kept as its mail is sent and as opens, clicks and delivery reports arrive (engagement lags " +
      'its events by the event outbox, usually well under a second), and the rates derived from them.',
  });
export type CampaignStatsBody = z.infer<typeof CampaignStatsSchema>;

export function presentCampaignStats(s: CampaignStatsView): CampaignStatsBody {
  return {
    campaignId: s.campaignId,
    audience: s.audience,
    sent: s.sent,
    delivered: s.delivered,
    openedUnique: s.openedUnique,
    openedTotal: s.openedTotal,
    clickedUnique: s.clickedUnique,
    clickedTotal: s.clickedTotal,
    bounced: s.bounced,
    complained: s.complained,
    unsubscribed: s.unsubscribed,
    failed: s.failed,
    skipped: s.skipped,
    deliveryRate: s.deliveryRate,
    openRate: s.openRate,
    clickRate: s.clickRate,
    clickToOpenRate: s.clickToOpenRate,
    bounceRate: s.bounceRate,
    complaintRate: s.complaintRate,
    unsubscribeRate: s.unsubscribeRate,
    updatedAt: iso(s.updatedAt),
  };
}

/** GET /campaigns/:id/stats: the counters and rates, and how many recipients the suppression list kept from the send. */
export const CampaignSendStatsSchema = CampaignStatsSchema.extend({
  suppressed: count('Recipients of the snapshot whose address is on the suppression list: their emails are SUPPRESSED, never sent (not in `sent`).'),
}).meta({ id: 'CampaignSendStats', description: "A campaign's counters and rates (as CampaignStats), and its recipients kept from the send by the suppression list." });

export function presentCampaignSendStats(s: CampaignStatsView & { suppressed: number }): z.infer<typeof CampaignSendStatsSchema> {
  return { ...presentCampaignStats(s), suppressed: s.suppressed };
}
