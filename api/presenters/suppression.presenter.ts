import { z } from 'zod';
import { SUPPRESSION_REASONS, type SuppressionRow } from '../../domain/suppressions/suppression.entity';
import { iso } from './time';

export const SuppressionReasonSchema = z.enum(SUPPRESSION_REASONS).meta({
  id: 'SuppressionReason',
  description:
    '`hard_bounce`: the address bounced permanently (a 5xx about the recipient while sending, or a permanent bounce report); `complaint`: ' +
    'the recipient reported mail as spam; `soft_bounce_limit`: SUPPRESS_SOFT_BOUNCES transient bounces of different emails within ' +
    'SUPPRESS_SOFT_BOUNCE_WINDOW_DAYS; `manual`: added through POST /suppressions.',
});

export const SuppressionSchema = z
  .object({
    id: z.string(),
    email: z.string().meta({ description: 'The address, trimmed and lowercased as contacts store it.' }),
    reason: SuppressionReasonSchema,
    source: z.string().meta({ description: 'Who reported it: `smtp` (the relay while sending), `dsn`, `arf` (mail that came back), `ses`, `api`.' }),
    detail: z.string().nullable().meta({ description: "What the reporter said: the relay's reply, a bounce's diagnostic code, a complaint's feedback type, or the note given." }),
    emailId: z.string().nullable().meta({ description: 'The email whose bounce or complaint suppressed the address (GET /emails/:id).' }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime().meta({ description: 'Differs from createdAt when a soft-bounce limit was replaced by a hard bounce or complaint.' }),
  })
  .meta({ id: 'Suppression', description: 'An address that no send of the project mails.' });

export function presentSuppression(s: SuppressionRow): z.infer<typeof SuppressionSchema> {
  return { id: s.id, email: s.email, reason: s.reason, source: s.source, detail: s.detail, emailId: s.emailId, createdAt: iso(s.createdAt), updatedAt: iso(s.updatedAt) };
}
