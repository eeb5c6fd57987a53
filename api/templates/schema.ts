import { z } from 'zod';
import { NO_LINE_BREAKS, emailString, nameText, senderName as FromName } from '../validation';
import { IdCursor, Limit } from '../contacts/schema';
import { TEMPLATE_TYPES } from '../../domain/templates/template.entity';
import { MAX_TEMPLATE_BODY_BYTES, MAX_TEMPLATE_NAME } from '../../domain/templates/template.service';

const required = (field: string, kind: string) => ({
  error: (issue: { input: unknown }) => (issue.input === undefined ? `${field} is required` : `${field} must be ${kind}`),
});

const Name = nameText(MAX_TEMPLATE_NAME, { required: 'name is required', tooLong: `name is at most ${MAX_TEMPLATE_NAME} characters` }, z.string(required('name', 'a string')));

const Subject = z
  .string(required('subject', 'a string'))
  .min(1, 'subject is required')
  .max(998, 'subject is at most 998 characters')
  .refine((s) => !/[\r\n]/.test(s), { message: 'subject cannot contain newlines', params: { code: 'invalid_subject' } })
  .meta({ description: 'Liquid template, 1 to 998 characters, no CR or LF.', pattern: NO_LINE_BREAKS });

const Body = z
  .string(required('body', 'a string'))
  .min(1, 'body is required')
  .refine((s) => Buffer.byteLength(s, 'utf8') <= MAX_TEMPLATE_BODY_BYTES, {
    message: `body is at most ${MAX_TEMPLATE_BODY_BYTES / 1024} KB (${MAX_TEMPLATE_BODY_BYTES} bytes of UTF-8)`,
    params: { code: 'too_big' },
  })
  .meta({ description: `HTML or MJML with Liquid, at most ${MAX_TEMPLATE_BODY_BYTES} bytes of UTF-8.` });

const Type = z.enum(TEMPLATE_TYPES, { error: (issue) => (issue.input === undefined ? 'type is required (TRANSACTIONAL or MARKETING)' : 'type is TRANSACTIONAL or MARKETING') });

const From = emailString.meta({ description: 'Sender address; must be on a VERIFIED domain of the project.' });


const ReplyTo = emailString.meta({ description: 'Reply-To address (any domain).' });

export const CreateTemplateBody = z
  .object({
    name: Name,
    subject: Subject,
    body: Body,
    type: Type,
    from: From.nullable().optional(),
    fromName: FromName.nullable().optional(),
    replyTo: ReplyTo.nullable().optional(),
  })
  .strict()
  .meta({ id: 'CreateTemplateRequest' });

export const UpdateTemplateBody = z
  .object({
    name: Name.optional(),
    subject: Subject.optional(),
    body: Body.optional(),
    type: Type.optional(),
    from: From.nullable().optional().meta({ description: 'null removes the sender address.' }),
    fromName: FromName.nullable().optional(),
    replyTo: ReplyTo.nullable().optional(),
  })
  .strict()
  .meta({ id: 'UpdateTemplateRequest' });

export const ListTemplatesQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
  type: z.enum(TEMPLATE_TYPES, { error: 'type is TRANSACTIONAL or MARKETING' }).optional(),
  search: z.string().max(200).optional().meta({ description: 'Case-insensitive substring of the name or the subject.' }),
});

export const TemplateIdParams = z.object({ id: z.uuid({ error: 'Must be a template id (UUID)' }) });

export const DuplicateTemplateResponse = z.object({ id: z.string() }).meta({ id: 'DuplicatedTemplate' });

const Reference = z.object({
  id: z.string(),
  name: z.string(),
  where: z.string().optional().meta({ description: 'Where inside it (e.g. the workflow step).' }),
  active: z.boolean().meta({ description: 'A scheduled or sending campaign, an enabled workflow: blocks DELETE.' }),
});

export const TemplateUsageResponse = z
  .object({ campaigns: z.array(Reference), workflows: z.array(Reference) })
  .meta({ id: 'TemplateUsage' });
