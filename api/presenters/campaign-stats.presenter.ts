import { z } from 'zod';
import type { CampaignStatsView } from '../../domain/campaigns/campaign-stats';
import { iso } from './time';
import { AB_AFTER_TEST, AB_METRICS, type AbDecision } from '../../domain/campaigns/ab-test';
import type { AbStatsView } from '../../domain/campaigns/campaign-ab';
import { AbDecisionSchema } from './campaign.presenter';

const count = (description: string) => z.number().int().min(0).meta({ description });
const rate = (description: string) => z.number().min(0).meta({ description: `${description}; 0 when the denominator is 0, 4 decimals.` });

const GroupCounts = {
  recipients: count('Recipients in the group (not counting those the suppression list kept from the send).'),
  sent: count('Messages handed to the relay.'),
  opens: count('Emails opened at least once.'),
  clicks: count('Emails with at least one tracked click.'),
  bounces: count('Emails bounced.'),
  unsubscribes: count('Recipients who unsubscribed through this mail.'),
};

export const AbStatsSchema = z
  .object({
    metric: z.enum(AB_METRICS),
    afterTest: z.enum(AB_AFTER_TEST),
    variants: z.array(z.object({ variant: z.number().int(), label: z.string(), ...GroupCounts })).meta({ description: "Each variant's test share." }),
    finalSend: z
      .object({ winner: z.number().int().nullable().meta({ description: 'The variant sent to the remainder (null before the decision).' }), ...GroupCounts })
      .meta({ description: 'The remainder of the audience, sent the winner after the decision.' }),
    decision: AbDecisionSchema.nullable().meta({ description: 'The decision as recorded (its numbers are those it was made on); null while the test runs.' }),
    current: AbDecisionSchema.meta({
      description: 'The same analysis on the test shares as they are now (opens and clicks keep arriving after the decision); not a decision.',
    }),
  })
  .meta({ id: 'CampaignAbStats', description: "An A/B test's groups and how its winner was chosen (README, A/B-tested campaigns)." });

export function presentAbStats(ab: AbStatsView): z.infer<typeof AbStatsSchema> {
  const group = ({ recipients, sent, opens, clicks, bounces, unsubscribes }: AbStatsView['finalSend']) => ({ recipients, sent, opens, clicks, bounces, unsubscribes });
  return {
    metric: ab.metric,
    afterTest: ab.afterTest,
    variants: ab.variants.map((v) => ({ variant: v.variant!, label: v.label, ...group({ ...v, winner: null }) })),
    finalSend: { winner: ab.finalSend.winner, ...group(ab.finalSend) },
    decision: ab.decision satisfies AbDecision | null,
    current: ab.current,
  };
}


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
  abTest: AbStatsSchema.optional().meta({ description: 'Only for an A/B-tested campaign: each variant, the final send, and the decision explained.' }),
}).meta({ id: 'CampaignSendStats', description: "A campaign's counters and rates (as CampaignStats), and its recipients kept from the send by the suppression list." });

export function presentCampaignSendStats(s: CampaignStatsView & { suppressed: number }, ab: AbStatsView | null = null): z.infer<typeof CampaignSendStatsSchema> {
  return { ...presentCampaignStats(s), suppressed: s.suppressed, ...(ab ? { abTest: presentAbStats(ab) } : {}) };
}
