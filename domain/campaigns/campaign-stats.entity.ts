import { defineEntity, p } from '@mikro-orm/core';
import { Email } from '../emails/email.entity';

/** Outcomes a campaign counts once per email (the `*_unique` counters and delivered, bounced, complained, unsubscribed). */
const CAMPAIGN_EMAIL_MARKS = ['delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed'] as const;
export type CampaignEmailMarkKind = (typeof CAMPAIGN_EMAIL_MARKS)[number];

/**
 * "This outcome of this campaign email is counted" (migration 20261124110000), written by the campaign-stats consumer
 * (campaign-stats.ts): the insert that finds the row new is the one that counts. Goes with its email.
 */
export const CampaignEmailMark = defineEntity({
  name: 'CampaignEmailMark',
  tableName: 'campaign_email_marks',
  properties: {
    email: () => p.manyToOne(Email).primary().deleteRule('cascade').updateRule('no action'),
    kind: p.enum([...CAMPAIGN_EMAIL_MARKS]).primary(),
  },
});

/**
 * An open or click event already added to its campaign's totals (so a redelivery adds nothing); pruned by the
 * consumer once its event cannot come again.
 */
export const CampaignEventReceipt = defineEntity({
  name: 'CampaignEventReceipt',
  tableName: 'campaign_event_receipts',
  properties: {
    eventId: p.uuid().primary(),
    /** No foreign key (see the migration). */
    campaignId: p.uuid(),
  },
});
