import { z } from 'zod';
import { NO_LINE_BREAKS, emailString } from '../validation';
import { IdCursor, Limit } from '../contacts/schema';
import { SuppressionReasonSchema, SuppressionSchema } from '../presenters/suppression.presenter';

/** At most this many addresses per POST /suppressions. */
export const MAX_SUPPRESSIONS_PER_CALL = 1000;

export const ListSuppressionsQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
  reason: SuppressionReasonSchema.optional(),
  email: emailString.optional().meta({ description: 'Only this address (compared as stored: trimmed, lowercased).' }),
  search: z.string().max(320).optional().meta({ description: 'Case-insensitive substring of the address (e.g. a domain).' }),
});

export const AddSuppressionsBody = z
  .object({
    emails: z
      .array(emailString)
      .min(1, 'Give at least one address')
      .max(MAX_SUPPRESSIONS_PER_CALL, `At most ${MAX_SUPPRESSIONS_PER_CALL} addresses per call`),
    detail: z.string().max(500).regex(new RegExp(NO_LINE_BREAKS), 'detail cannot contain line breaks').optional().meta({
      description: 'A note kept on the new entries (why they were added).',
    }),
  })
  .meta({ id: 'AddSuppressionsRequest' });

export const AddSuppressionsResponse = z
  .object({
    data: z.array(SuppressionSchema.extend({ _meta: z.object({ isNew: z.boolean().meta({ description: 'This call added the entry.' }) }) })),
  })
  .meta({ id: 'AddSuppressionsResult', description: 'Each distinct address once, in the order given, with its entry as it stands after the call.' });

export const SuppressionEmailParams = z.object({ email: emailString.meta({ description: 'The address (URL-encoded in the path).' }) });
