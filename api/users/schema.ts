import { z } from 'zod';
import { nameText } from '../validation';
import { RESPONSE_VARIANTS } from '../variant';

export const CreateProjectBody = z.object({ name: nameText(200) }).meta({ id: 'CreateProjectRequest' });

export const UpdateProjectBody = z
  .object({
    name: nameText(200).optional(),
    settings: z
      .object({
        trackOpens: z.boolean().optional(),
        trackClicks: z.boolean().optional(),
        responseVariant: z.enum(RESPONSE_VARIANTS).optional().meta({ description: 'The response variant of secret-key requests without the Mailwright-Response-Variant header.' }),
        campaignSendRate: z
          .number({ error: 'campaignSendRate is a whole number from 1 to 1000000, or null' })
          .int('campaignSendRate is a whole number from 1 to 1000000, or null')
          .min(1, 'campaignSendRate is at least 1 (null: the deployment default)')
          .max(1_000_000, 'campaignSendRate is at most 1000000')
          .nullable()
          .optional()
          .meta({ description: "Campaign emails per second for this project; null: the deployment's CAMPAIGN_SEND_RATE." }),
        segmentRecomputeMinutes: z
          .number({ error: 'segmentRecomputeMinutes is a whole number from 5 to 10080, or null' })
          .int('segmentRecomputeMinutes is a whole number from 5 to 10080, or null')
          .min(5, 'segmentRecomputeMinutes is at least 5 (null: hourly)')
          .max(10_080, 'segmentRecomputeMinutes is at most 10080 (a week)')
          .nullable()
          .optional()
          .meta({ description: 'Minutes between scheduled recomputes of the tracked dynamic segments (5 to 10080); null: hourly (60).' }),
      })
      .strict()
      .optional(),
  })
  .strict()
  .meta({ id: 'UpdateProjectRequest' });
