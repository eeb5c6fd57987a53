import { z } from 'zod';
import { emailString, queryBoolean } from '../validation';
import { ContactDataInput } from '../track/schema';
import { CUSTOM_FIELD_PATTERN } from '../../domain/contacts/contact-fields';
import { ID_CURSOR_PATTERN } from '../../domain/pagination';

export const Limit = z.coerce
  .number({ error: 'limit must be a whole number from 1 to 100' })
  .int('limit must be a whole number from 1 to 100')
  .min(1, 'limit must be at least 1')
  .max(100, 'limit must be at most 100')
  .default(20);

/** A cursor the document cannot describe further (the activity feed's; a Stripe invoice id). */
export const Cursor = z.string().max(200).optional().meta({ description: 'The `cursor` of the previous page.' });

/**
 * The cursor of the id-ordered lists (domain/pagination.ts): every string of its published pattern is a position, so
 * the document states exactly what the server reads.
 */
export const IdCursor = z
  .string()
  .max(200)
  .optional()
  .meta({ description: 'The `cursor` of the previous page (22 characters of base64url); empty or absent: the first page.', pattern: ID_CURSOR_PATTERN });

/**
 * The field-values cursor: `o:<offset>` (1 to 9 digits) in unpadded base64url, as GET /contacts/fields/:field/values
 * makes it. That encoding is regular, so the pattern below is exactly the set of such cursors: `o:` and the first digit
 * are `bzo` and one character; each further three digits (three bytes) are four characters. A digit byte is 0x30 +
 * d: its top six bits are 12-14 (`M`, `N`, `O` by d / 4), its low two bits (d % 4) and the next digit's top nibble (3)
 * make `D`, `T`, `j`, `z`; a digit's low nibble shifted by two is one of `A E I M Q U Y c g k`; and the low six bits
 * of a last digit of a group are 48 + d (`w x y z 0-5`). A group of one or two digits at the end stops early (a lone
 * digit's low bits, shifted by four: `A Q g w`). test/unit/openapi.test.ts checks it against every offset's encoding.
 */
const HIGH = '(?:[MN][DTjz]|O[DT])'; // a digit, and the top nibble of a digit after it
const GROUP = `${HIGH}[AEIMQUYcgk][wxyz0-5]`; // three digits
const TAIL = `(?:[MN][AQgw]|O[AQ]|${HIGH}[AEIMQUYcgk])`; // one or two digits
const OFFSET_CURSOR_PATTERN = `^(?:bzo[wxyz0-5](?:${GROUP}){0,2}${TAIL}?)?$`;
const OFFSET_CURSOR = new RegExp(OFFSET_CURSOR_PATTERN);

const OffsetCursor = z
  .string()
  .max(200)
  .refine((s) => OFFSET_CURSOR.test(s), { message: 'Invalid cursor: pass the `cursor` value of the previous page unchanged', params: { code: 'invalid_cursor' } })
  .optional()
  .meta({ description: 'The `cursor` of the previous page; empty or absent: the first page.', pattern: OFFSET_CURSOR_PATTERN });

export const ListContactsQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
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

export const FieldValuesQuery = z.object({ limit: Limit, cursor: OffsetCursor });

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
