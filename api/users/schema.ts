import { z } from 'zod';
import { nameText } from '../validation';

export const CreateProjectBody = z.object({ name: nameText(200) }).meta({ id: 'CreateProjectRequest' });

export const UpdateProjectBody = z
  .object({
    name: nameText(200).optional(),
    settings: z.object({ trackOpens: z.boolean().optional(), trackClicks: z.boolean().optional() }).strict().optional(),
  })
  .strict()
  .meta({ id: 'UpdateProjectRequest' });
