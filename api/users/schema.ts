import { z } from 'zod';

export const CreateProjectBody = z.object({ name: z.string().trim().min(1).max(200) }).meta({ id: 'CreateProjectRequest' });

export const UpdateProjectBody = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    settings: z.object({ trackOpens: z.boolean().optional(), trackClicks: z.boolean().optional() }).strict().optional(),
  })
  .strict()
  .meta({ id: 'UpdateProjectRequest' });
