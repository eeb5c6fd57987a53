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
      })
      .strict()
      .optional(),
  })
  .strict()
  .meta({ id: 'UpdateProjectRequest' });
