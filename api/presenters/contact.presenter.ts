import { z } from 'zod';
import type { ContactRow } from '../../domain/contacts/contact.repository';
import { iso } from './time';

export const ContactSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    subscribed: z.boolean(),
    data: z.record(z.string(), z.unknown()),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Contact' });

export const ContactWithMetaSchema = ContactSchema.extend({
  _meta: z.object({ isNew: z.boolean(), isUpdate: z.boolean() }),
}).meta({ id: 'ContactUpsertResult' });

export function presentContact(c: ContactRow): z.infer<typeof ContactSchema> {
  return {
    id: c.id,
    email: c.email,
    subscribed: c.subscribed,
    data: c.data,
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
  };
}

/** Cursor list envelope (SPEC.md current variant). */
export function cursorListSchema<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({ data: z.array(item), cursor: z.string().nullable(), hasMore: z.boolean(), total: z.number().int() })
    .meta({ id, description: 'Pass `cursor` back to get the next page; `total` is given on the first page only (0 after).' });
}
