import { z } from 'zod';
import { AUDIENCE_TYPES, CAMPAIGN_STATUSES, type CampaignRow } from '../../domain/campaigns/campaign.entity';
import { iso } from './time';
import { AB_AFTER_TEST, AB_METRICS, type AbDecision, type AbTest } from '../../domain/campaigns/ab-test';

const optionalText = z.string().nullable().optional();

const AbTestSchema = z
  .object({
    variants: z.array(z.object({ subject: optionalText, body: optionalText, templateId: optionalText, fromName: optionalText, preheader: optionalText })),
    testShare: z.union([z.object({ percent: z.number() }), z.object({ count: z.number().int() })]),
    metric: z.enum(AB_METRICS),
    testDurationSeconds: z.number().int(),
    afterTest: z.enum(AB_AFTER_TEST),
  })
  .meta({ id: 'CampaignAbTest', description: 'The A/B test as stored (see CampaignAbTestRequest).' });

const VariantResultSchema = z.object({
  variant: z.number().int().meta({ description: '0 is A.' }),
  label: z.string(),
  sent: z.number().int(),
  opens: z.number().int().meta({ description: 'Unique opens.' }),
  clicks: z.number().int().meta({ description: 'Unique clicks.' }),
  successes: z.number().int().meta({ description: "The metric's numerator (opens or clicks)." }),
  trials: z.number().int().meta({ description: "The metric's denominator (sent, or opens for click_to_open): the sample size." }),
  value: z.number().meta({ description: 'successes / trials, 4 decimals (0 without trials).' }),
});

export const AbDecisionSchema = z
  .object({
    winner: z.number().int(),
    winnerLabel: z.string(),
    decidedBy: z.enum(['auto', 'manual']),
    decidedAt: z.iso.datetime(),
    metric: z.enum(AB_METRICS),
    variants: z.array(VariantResultSchema),
    test: z.string().meta({ description: 'The statistical test used: a pooled two-proportion z-test, two-sided, the winner against the best other variant.' }),
    z: z.number().nullable(),
    pValue: z.number().nullable().meta({ description: 'null when no test is possible (no trials, or no variation at all).' }),
    withinNoise: z.boolean().meta({ description: 'p >= 0.05 (or no test possible): the difference may be chance.' }),
    tie: z.boolean().meta({ description: 'Another variant had the same value; the lowest variant won.' }),
    noData: z.boolean().meta({ description: 'No variant had a single open (or click): variant A was sent.' }),
    note: z.string(),
  })
  .meta({ id: 'CampaignAbDecision', description: 'How the winner of an A/B test was chosen, with the numbers it was chosen on.' });

export const CampaignSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    subject: z.string().nullable().meta({ description: 'Liquid template; null when the template supplies it.' }),
    body: z.string().nullable().meta({ description: 'HTML or MJML with Liquid; null when the template supplies it.' }),
    templateId: z.string().nullable().meta({ description: 'The stored template; explicit subject and body override its own.' }),
    from: z.string().meta({ description: 'Sender address (on a verified domain).' }),
    fromName: z.string().nullable(),
    replyTo: z.string().nullable(),
    audienceType: z.enum(AUDIENCE_TYPES),
    type: z.enum(AUDIENCE_TYPES).meta({ description: 'The same as audienceType (SPEC).' }),
    segmentId: z.string().nullable(),
    audienceFilter: z.record(z.string(), z.unknown()).nullable().meta({ description: 'The filter (FILTERED audiences).' }),
    status: z.enum(CAMPAIGN_STATUSES),
    scheduledAt: z.iso.datetime().nullable().meta({ description: 'When a SCHEDULED campaign starts sending (kept once it did).' }),
    trackOpens: z.boolean().nullable().meta({ description: "null: the project's setting." }),
    trackClicks: z.boolean().nullable().meta({ description: "null: the project's setting." }),
    audienceSize: z
      .number()
      .int()
      .nullable()
      .meta({
        description:
          'GET /campaigns/:id of a DRAFT or SCHEDULED campaign: the subscribed contacts a send would reach now (null if its segment was deleted). ' +
          'Elsewhere, and once sending started: the size of the audience snapshot taken when the send started (null before).',
      }),
    startedAt: z.iso.datetime().nullable(),
    finishedAt: z.iso.datetime().nullable().meta({ description: 'When it became SENT, CANCELLED or FAILED.' }),
    statusReason: z.string().nullable().meta({ description: 'Why it is FAILED, or how it was cancelled.' }),
    abTest: AbTestSchema.nullable().meta({ description: 'The A/B test; null: a campaign without variants.' }),
    abPick: z.number().int().nullable().meta({ description: 'The variant a person picked with POST /campaigns/{id}/winner; null when none was picked.' }),
    abDecision: AbDecisionSchema.nullable().meta({ description: 'The decision of the A/B test once made (null before, and without variants).' }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Campaign' });

export function presentCampaign(c: CampaignRow): z.infer<typeof CampaignSchema> {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    subject: c.subject,
    body: c.body,
    templateId: c.templateId,
    from: c.fromEmail,
    fromName: c.fromName,
    replyTo: c.replyTo,
    audienceType: c.audienceType,
    type: c.audienceType,
    segmentId: c.segmentId,
    audienceFilter: c.audienceFilter,
    status: c.status,
    scheduledAt: iso(c.scheduledAt),
    trackOpens: c.trackOpens,
    trackClicks: c.trackClicks,
    audienceSize: c.audienceSize,
    startedAt: iso(c.startedAt),
    finishedAt: iso(c.finishedAt),
    statusReason: c.statusReason,
    abTest: (c.abTest as AbTest | null) ?? null,
    abPick: c.abPick ?? null,
    abDecision: (c.abDecision as AbDecision | null) ?? null,
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
  };
}
