import { z } from 'zod';
import { emailString, queryBoolean } from '../validation';
import { ContactDataInput } from '../track/schema';
import { CUSTOM_FIELD_PATTERN } from '../../domain/contacts/contact-fields';

export const Limit = z.coerce
  .number({ error: 'limit must be a whole number from 1 to 100' })
  .int('limit must be a whole number from 1 to 100')
  .min(1, 'limit must be at least 1')
  .max(100, 'limit must be at most 100')
  .default(20);

export const Cursor = z.string().max(200).optional().meta({ description: 'The `cursor` of the previous page.' });

export const ListContactsQuery = z.object({
  limit: Limit,
  cursor: Cursor,
  search: z.string().max(320).optional().meta({ description: 'Case-insensitive substring of the email.' }),
  subscribed: queryBoolean.optional(),
});

export const CreateContactBody = z
  .object({ email: emailString, subscribed: z.boolean().optional(), data: ContactDataInput.optional() })
  .meta({ id: 'CreateContactRequest' });

export const UpdateContactBody = z
  .object({ email: emailString.optional(), subscribed: z.boolean().optional(), data: ContactDataInput.optional() })
  .strict()
  .meta({ id: 'UpdateContactRequest' });

export const ContactIdParams = z.object({ id: z.uuid({ error: 'Must be a contact id (UUID)' }) });

export const LookupBody = z
  .object({ emails: z.array(emailString).min(1).max(500, 'At most 500 emails per call') })
  .meta({ id: 'ContactLookupRequest' });

export const LookupResponse = z
  .object({ results: z.array(z.object({ email: z.string(), exists: z.boolean(), id: z.string().nullable() })) })
  .meta({ id: 'ContactLookupResponse' });

export const FieldParams = z.object({
  field: z.string().min(1).max(205).meta({ pattern: CUSTOM_FIELD_PATTERN, description: 'A custom field: its data key, with or without `data.` (not a standard or reserved field).' }),
});

export const FieldValuesQuery = z.object({ limit: Limit, cursor: Cursor });

export const FieldSchema = z
  .object({
    name: z.string(),
    path: z.string().meta({ description: 'How filters address it: `email`, `subscribed`, `createdAt`, `data.<name>`.' }),
    standard: z.boolean(),
    type: z.enum(['string', 'number', 'boolean', 'date', 'object', 'array']),
    coverage: z.number().meta({ description: 'Percent of the project contacts that have the field.' }),
    count: z.number().int(),
    types: z.record(z.string(), z.number()).optional().meta({ description: 'Contacts per type when values of several types occur.' }),
  })
  .meta({ id: 'ContactField' });

export const FieldValuesResponse = z
  .object({ data: z.array(z.object({ value: z.unknown(), count: z.number().int() })), cursor: z.string().nullable(), hasMore: z.boolean(), total: z.number().int() })
  .meta({ id: 'ContactFieldValues' });

export const UsageSchema = z
  .object({
    segments: z.array(z.object({ id: z.string(), name: z.string(), where: z.string().optional() })),
    campaigns: z.array(z.object({ id: z.string(), name: z.string(), where: z.string().optional() })),
    workflows: z.array(z.object({ id: z.string(), name: z.string(), where: z.string().optional() })),
    templates: z.array(z.object({ id: z.string(), name: z.string(), where: z.string().optional() })),
  })
  .meta({ id: 'Usage' });
