import { z } from 'zod';
import { SuppressionReasonSchema } from '../presenters/suppression.presenter';
import { NO_LINE_BREAKS, emailString, nameText, senderName as FromName } from '../validation';
import { IdCursor, Limit } from '../contacts/schema';
import { FilterSchema } from '../../domain/filters';
import { AUDIENCE_TYPES, CAMPAIGN_STATUSES } from '../../domain/campaigns/campaign.entity';
import { MAX_TEMPLATE_BODY_BYTES } from '../../domain/templates/template.service';
import { AB_AFTER_TEST, AB_METRICS, MAX_VARIANTS, MIN_VARIANTS } from '../../domain/campaigns/ab-test';

const Name = nameText(
  200,
  { required: 'name is required', tooLong: 'name is at most 200 characters' },
  z.string({ error: (issue) => (issue.input === undefined ? 'name is required' : 'name must be a string') }),
);

const Description = z.string().max(2000, 'description is at most 2000 characters');

const Subject = z
  .string()
  .min(1, 'subject cannot be empty (set null to use the template\'s)')
  .max(998, 'subject is at most 998 characters')
  .refine((s) => !/[\r\n]/.test(s), { message: 'subject cannot contain newlines', params: { code: 'invalid_subject' } })
  .meta({ description: 'Liquid template, 1 to 998 characters, no CR or LF. Overrides the template\'s subject when `templateId` is set.', pattern: NO_LINE_BREAKS });

const Body = z
  .string()
  .min(1, 'body cannot be empty (set null to use the template\'s)')
  .refine((s) => Buffer.byteLength(s, 'utf8') <= MAX_TEMPLATE_BODY_BYTES, {
    message: `body is at most ${MAX_TEMPLATE_BODY_BYTES / 1024} KB (${MAX_TEMPLATE_BODY_BYTES} bytes of UTF-8)`,
    params: { code: 'too_big' },
  })
  .meta({ description: `HTML or MJML with Liquid, at most ${MAX_TEMPLATE_BODY_BYTES} bytes of UTF-8. Overrides the template's body when \`templateId\` is set.` });

const TemplateId = z.uuid({ error: 'templateId must be a template id (UUID)' }).meta({
  description: 'A stored template of the project supplying subject and body; an explicit `subject` or `body` overrides its own when the campaign is sent.',
});

const From = emailString.meta({ description: 'Sender address; must be on a VERIFIED domain of the project (403 DOMAIN_NOT_VERIFIED).' });


const ReplyTo = emailString.meta({ description: 'Reply-To address (any domain).' });

const AudienceType = z.enum(AUDIENCE_TYPES, {
  error: (issue) => (issue.input === undefined ? 'audienceType is required (ALL, SEGMENT or FILTERED)' : 'audienceType is ALL, SEGMENT or FILTERED'),
});

const SegmentId = z.uuid({ error: 'segmentId must be a segment id (UUID)' }).meta({ description: 'Required when audienceType is SEGMENT, refused otherwise.' });

const Tracking = (what: string) => z.boolean().nullable().meta({ description: `Track ${what} for this campaign; null (default) follows the project's setting.` });

/** RFC 3339 date-time (the document's `date-time`), seconds required, never a leap second (Date cannot hold one). */
const INSTANT = /^(\d{4})-(\d{2})-(\d{2})[Tt](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)$/;

/** Whether the calendar has the date (Date itself would turn February 30th into March 1st). */
function isRealDate(s: string): boolean {
  const parts = INSTANT.exec(s);
  if (!parts) return true; // the pattern's own issue says what is wrong
  const [y, m, d] = parts.slice(1, 4).map(Number) as [number, number, number];
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999 (year 0 is a leap year, 1900 is not).
  const lastDay = new Date(0);
  lastDay.setUTCFullYear(y, m, 0);
  return m >= 1 && m <= 12 && d >= 1 && d <= lastDay.getUTCDate();
}

/** An instant: an RFC 3339 date-time with a time zone (`Z` or an offset), as a Date. */
export const Instant = (field: string) =>
  z
    .string()
    .regex(INSTANT, { error: `${field} must be an RFC 3339 date-time with seconds and a time zone, e.g. 2030-01-31T09:00:00Z` })
    .refine(isRealDate, { message: `${field} is not a date of the calendar`, params: { code: 'invalid_date' } })
    .transform((s) => new Date(s))
    .meta({ format: 'date-time', pattern: INSTANT.source });

const Preheader = z
  .string()
  .min(1, 'preheader cannot be empty (set null for none)')
  .max(500, 'preheader is at most 500 characters')
  .refine((s) => !/[\r\n]/.test(s), { message: 'preheader cannot contain newlines', params: { code: 'invalid_preheader' } })
  .meta({ description: 'The preview line mail clients show after the subject: a hidden first line of the body.', pattern: NO_LINE_BREAKS });

const Variant = z
  .object({
    subject: Subject.nullable().optional(),
    body: Body.nullable().optional(),
    templateId: TemplateId.nullable().optional(),
    fromName: FromName.nullable().optional(),
    preheader: Preheader.nullable().optional(),
  })
  .strict()
  .meta({
    id: 'CampaignVariant',
    description:
      "What this variant changes of the campaign's content; a field left out (or null) keeps the campaign's. The from address is the " +
      "campaign's for every variant (one sender domain). Variants are named A, B, C... in order.",
  });

const TestShare = z
  .union([
    z.object({ percent: z.number().gt(0, 'percent must be above 0').max(50, 'percent is at most 50') }).strict(),
    z.object({ count: z.number().int('count must be a whole number').min(1, 'count is at least 1').max(1_000_000, 'count is at most 1000000') }).strict(),
  ])
  .meta({
    description:
      "Each variant's test share: `percent` of the audience snapshot (rounded down) or a fixed `count`. Every variant needs at least one " +
      'recipient and at least one must be left for the winner, or the send is refused (422 `audience_too_small`).',
  });

const AbTestBody = z
  .object({
    variants: z
      .array(Variant)
      .min(MIN_VARIANTS, `At least ${MIN_VARIANTS} variants`)
      .max(MAX_VARIANTS, `At most ${MAX_VARIANTS} variants`),
    testShare: TestShare,
    metric: z.enum(AB_METRICS).meta({ description: 'How the winner is chosen: unique opens / sent, unique clicks / sent, or unique clicks / unique opens.' }),
    testDurationSeconds: z
      .number()
      .int('testDurationSeconds must be a whole number')
      .min(1, 'testDurationSeconds is at least 1')
      .max(30 * 86_400, 'testDurationSeconds is at most 30 days')
      .meta({ description: 'How long after the test shares were sent the metric is read.' }),
    afterTest: z
      .enum(AB_AFTER_TEST)
      .meta({ description: 'auto: the best variant goes to the remainder when the test ends; manual: the remainder waits for POST /campaigns/:id/winner.' }),
  })
  .strict()
  .meta({ id: 'CampaignAbTestRequest', description: 'Makes the campaign an A/B test (README, A/B-tested campaigns); null: none.' });

const fields = {
  name: Name,
  description: Description.nullable().optional(),
  subject: Subject.nullable().optional(),
  body: Body.nullable().optional(),
  templateId: TemplateId.nullable().optional(),
  from: From,
  fromName: FromName.nullable().optional(),
  replyTo: ReplyTo.nullable().optional(),
  audienceType: AudienceType,
  segmentId: SegmentId.nullable().optional(),
  // A union rather than .nullable(): the Filter component's own JSON Schema (type: object) would hide the null.
  audienceFilter: z
    .union([FilterSchema, z.null()])
    .optional()
    .meta({ description: 'Required when audienceType is FILTERED, refused otherwise; the filter language of segments (null: none).' }),
  trackOpens: Tracking('opens').optional(),
  trackClicks: Tracking('clicks').optional(),
  abTest: AbTestBody.nullable().optional(),
};

/**
 * The rules between fields, checked by the service (domain/campaigns/campaign.service.ts) and stated here for clients
 * that validate against the document: content is a template or both subject and body, and the audience takes exactly
 * the reference its type needs.
 */
const WHOLE_CAMPAIGN_RULES = {
  allOf: [
    {
      anyOf: [
        { title: 'Stored template', required: ['templateId'], properties: { templateId: { type: 'string' } } },
        { title: 'Inline content', required: ['subject', 'body'], properties: { subject: { type: 'string' }, body: { type: 'string' } } },
      ],
    },
    {
      oneOf: [
        { title: 'Every subscribed contact', properties: { audienceType: { const: 'ALL' }, segmentId: { type: 'null' }, audienceFilter: { type: 'null' } } },
        { title: 'A segment', required: ['segmentId'], properties: { audienceType: { const: 'SEGMENT' }, segmentId: { type: 'string' }, audienceFilter: { type: 'null' } } },
        { title: 'A filter', required: ['audienceFilter'], properties: { audienceType: { const: 'FILTERED' }, audienceFilter: { type: 'object' }, segmentId: { type: 'null' } } },
      ],
    },
  ],
  example: {
    name: 'Spring sale',
    subject: 'Hello {{ first_name ?? there }}',
    body: '<p>Our spring sale starts today.</p><p><a href="{{ unsubscribeUrl }}">Unsubscribe</a></p>',
    from: 'news@example.com',
    audienceType: 'ALL',
  },
};

export const CreateCampaignBody = z
  .object(fields)
  .strict()
  .meta({ id: 'CreateCampaignRequest', ...WHOLE_CAMPAIGN_RULES });

const ScheduledAt = Instant('scheduledAt').meta({
  description: 'A SCHEDULED campaign only: a new time in the future moves its send. A DRAFT is scheduled with POST /campaigns/:id/send { scheduledFor }.',
});

export const ReplaceCampaignBody = z
  .object({ ...fields, scheduledAt: ScheduledAt.optional() })
  .strict()
  .meta({ id: 'ReplaceCampaignRequest', ...WHOLE_CAMPAIGN_RULES });

export const UpdateCampaignBody = z
  .object({
    name: Name.optional(),
    description: fields.description,
    subject: fields.subject,
    body: fields.body,
    templateId: fields.templateId,
    from: From.optional(),
    fromName: fields.fromName,
    replyTo: fields.replyTo,
    audienceType: AudienceType.optional(),
    segmentId: fields.segmentId,
    audienceFilter: fields.audienceFilter,
    trackOpens: fields.trackOpens,
    trackClicks: fields.trackClicks,
    abTest: fields.abTest,
    scheduledAt: ScheduledAt.optional(),
  })
  .strict()
  .meta({ id: 'UpdateCampaignRequest' });

export const ListCampaignsQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
  status: z.enum(CAMPAIGN_STATUSES, { error: `status is one of ${CAMPAIGN_STATUSES.join(', ')}` }).optional(),
  search: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the name.' }),
});

export const CampaignIdParams = z.object({ id: z.uuid({ error: 'Must be a campaign id (UUID)' }) });

export const SendCampaignBody = z
  .object({
    scheduledFor: Instant('scheduledFor')
      .optional()
      .meta({ description: 'Send at this time (in the future) instead of now: the campaign becomes SCHEDULED.' }),
  })
  .strict()
  .meta({ id: 'SendCampaignRequest' });

export const PickWinnerBody = z
  .object({ variant: z.number().int('variant must be a whole number').min(0, 'variant is at least 0').max(MAX_VARIANTS - 1).meta({ description: 'The variant (0 is A).' }) })
  .strict()
  .meta({ id: 'PickWinnerRequest' });

export const TestCampaignBody = z
  .object({ email: emailString.meta({ description: 'The one address to send the test to.' }) })
  .strict()
  .meta({ id: 'TestCampaignRequest' });

export const TestCampaignResponse = z
  .object({
    emailId: z.string().meta({ description: 'The test email (GET /emails/:id).' }),
    to: z.string(),
    status: z.enum(['QUEUED', 'SUPPRESSED']).meta({ description: 'SUPPRESSED: the address is on the suppression list; the test email is stored so and not sent.' }),
    suppression: z.object({ reason: SuppressionReasonSchema }).optional().meta({ description: 'With SUPPRESSED: why the address is suppressed.' }),
  })
  .meta({ id: 'CampaignTestSend' });
