import { z } from 'zod';
import { emailString, nameText } from '../validation';
import { customIssue } from '../validation';
import { FilterSchema } from '../../domain/filters';
import { ContactSchema } from '../presenters/contact.presenter';

const Name = nameText(200, { required: 'name is required', tooLong: 'name is at most 200 characters' });
const Description = z.string().max(2000, 'description is at most 2000 characters');

/**
 * `{ name, type, condition?, description?, trackMembership? }`, or the variant `{ name, filters, trackMembership? }`
 * (a dynamic segment whose condition is `filters`).
 */
export const CreateSegmentBody = z
  .object({
    name: Name,
    type: z.enum(['DYNAMIC', 'STATIC'], { error: 'type is DYNAMIC or STATIC' }).optional(),
    condition: FilterSchema.optional(),
    filters: FilterSchema.optional(), // the variant body: the condition of a dynamic segment
    description: Description.optional(),
    trackMembership: z.boolean().optional(),
  })
  .strict()
  .superRefine((b, ctx) => {
    if (b.filters !== undefined) {
      if (b.condition !== undefined) customIssue(ctx, 'Give either condition or filters, not both', 'invalid_combination', ['filters']);
      if (b.type === 'STATIC') customIssue(ctx, 'filters define a dynamic segment; a static segment has no filter', 'static_segment', ['filters']);
      return;
    }
    if (b.type === undefined) {
      customIssue(ctx, 'type is required (DYNAMIC or STATIC), unless the body gives filters', 'invalid_type', ['type']);
      return;
    }
    if (b.type === 'DYNAMIC' && b.condition === undefined) customIssue(ctx, 'A dynamic segment requires a condition', 'required', ['condition']);
    if (b.type === 'STATIC' && b.condition !== undefined) customIssue(ctx, 'A static segment has no condition: add members instead', 'static_segment', ['condition']);
  })
  // The rules above, for clients that validate against the document: exactly one of the three shapes.
  .meta({
    id: 'CreateSegmentRequest',
    oneOf: [
      { title: 'Dynamic', required: ['type', 'condition'], properties: { type: { const: 'DYNAMIC' } }, not: { required: ['filters'] } },
      { title: 'Static', required: ['type'], properties: { type: { const: 'STATIC' } }, not: { anyOf: [{ required: ['condition'] }, { required: ['filters'] }] } },
      { title: 'Variant: filters', required: ['filters'], properties: { type: { const: 'DYNAMIC' } }, not: { required: ['condition'] } },
    ],
  });

export const UpdateSegmentBody = z
  .object({
    name: Name.optional(),
    description: Description.nullable().optional(),
    condition: FilterSchema.optional(), // dynamic segments only (a static segment's answer is 422 static_segment)
    trackMembership: z.boolean().optional(),
  })
  .strict()
  .meta({ id: 'UpdateSegmentRequest' });

export const SegmentIdParams = z.object({ id: z.uuid({ error: 'Must be a segment id (UUID)' }) });

export const SegmentContactsQuery = z.object({
  page: z.coerce.number({ error: 'page must be a whole number of at least 1' }).int('page must be a whole number').min(1, 'page must be at least 1').max(1_000_000).default(1),
  pageSize: z.coerce
    .number({ error: 'pageSize must be a whole number from 1 to 100' })
    .int('pageSize must be a whole number')
    .min(1, 'pageSize must be at least 1')
    .max(100, 'pageSize must be at most 100')
    .default(20),
});

export const SegmentContactsResponse = z
  .object({ data: z.array(ContactSchema), total: z.number().int(), page: z.number().int(), pageSize: z.number().int() })
  .meta({ id: 'SegmentContacts' });

const Emails = z.array(emailString).min(1, 'emails needs at least one address').max(1000, 'At most 1000 emails per call');

export const AddMembersBody = z
  .object({
    emails: Emails,
    createMissing: z.boolean().optional().meta({ description: 'Create contacts for unknown emails (default false: they are reported in notFound).' }),
    subscribed: z.boolean().optional().meta({ description: 'Subscription of contacts created by createMissing (default true).' }),
  })
  .strict()
  .meta({ id: 'AddSegmentMembersRequest' });

export const AddMembersResponse = z
  .object({ added: z.number().int(), alreadyMembers: z.number().int(), created: z.number().int(), notFound: z.array(z.string()), memberCount: z.number().int() })
  .meta({ id: 'AddSegmentMembersResult' });

export const RemoveMembersBody = z.object({ emails: Emails }).strict().meta({ id: 'RemoveSegmentMembersRequest' });
export const RemoveMembersResponse = z.object({ removed: z.number().int(), memberCount: z.number().int() }).meta({ id: 'RemoveSegmentMembersResult' });
