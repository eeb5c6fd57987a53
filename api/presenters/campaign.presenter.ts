import { z } from 'zod';
import { AUDIENCE_TYPES, CAMPAIGN_STATUSES, type CampaignRow } from '../../domain/campaigns/campaign.entity';
import { iso } from './time';

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
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
  };
}
