import { z } from 'zod';
import { TEMPLATE_TYPES, type Template } from '../../domain/templates/template.entity';
import { iso } from './time';

export const TemplateSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    subject: z.string().meta({ description: 'Liquid template.' }),
    body: z.string().meta({ description: 'HTML or MJML with Liquid.' }),
    type: z.enum(TEMPLATE_TYPES),
    from: z.string().nullable().meta({ description: 'Sender address (on a verified domain), or null.' }),
    fromName: z.string().nullable(),
    replyTo: z.string().nullable(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Template' });

export function presentTemplate(t: Template): z.infer<typeof TemplateSchema> {
  return {
    id: t.id,
    name: t.name,
    subject: t.subject,
    body: t.body,
    type: t.type,
    from: t.from ?? null,
    fromName: t.fromName ?? null,
    replyTo: t.replyTo ?? null,
    createdAt: iso(t.createdAt),
    updatedAt: iso(t.updatedAt),
  };
}
