import { z } from 'zod';
import type { EmailRecord } from '../../domain/emails/email.service';
import { EMAIL_STATUSES } from '../../domain/emails/email.entity';
import { iso } from './time';

export const EmailSchema = z
  .object({
    id: z.string(),
    kind: z.enum(['TRANSACTIONAL', 'MARKETING']),
    status: z.enum(EMAIL_STATUSES).meta({
      description: 'QUEUED, SENDING, SENT, DELIVERED, or final without delivery: BOUNCED, FAILED, CANCELLED, SUPPRESSED (the address is on the suppression list; `error` says why).',
    }),
    contact: z.string().nullable(),
    template: z.string().nullable(),
    to: z.object({ email: z.string(), name: z.string().nullable() }),
    from: z.object({ email: z.string(), name: z.string().nullable() }),
    replyTo: z.string().nullable(),
    subject: z.string(),
    messageId: z.string().nullable().meta({ description: 'The Message-ID header, derived from the email id.' }),
    smtpResponse: z.string().nullable().meta({ description: "The relay's last reply (e.g. `250 2.0.0 Ok: queued`)." }),
    error: z.string().nullable(),
    attempts: z.number().int(),
    attachments: z.number().int(),
    sentAt: z.iso.datetime().nullable(),
    deliveredAt: z.iso.datetime().nullable(),
    firstOpenedAt: z.iso.datetime().nullable(),
    firstClickedAt: z.iso.datetime().nullable(),
    opens: z.number().int(),
    clicks: z.number().int(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'Email', description: 'One message: what was accepted and what happened to it.' });
export type EmailView = z.infer<typeof EmailSchema>;

export function presentEmail(e: EmailRecord): EmailView {
  return {
    id: e.id,
    kind: e.kind,
    status: e.status,
    contact: e.contactId,
    template: e.templateId,
    to: { email: e.toEmail, name: e.toName },
    from: { email: e.fromEmail, name: e.fromName },
    replyTo: e.replyTo,
    subject: e.subject,
    messageId: e.messageId,
    smtpResponse: e.smtpResponse,
    error: e.error,
    attempts: e.attempts,
    attachments: e.attachments,
    sentAt: iso(e.sentAt),
    deliveredAt: iso(e.deliveredAt),
    firstOpenedAt: iso(e.firstOpenedAt),
    firstClickedAt: iso(e.firstClickedAt),
    opens: e.openCount,
    clicks: e.clickCount,
    createdAt: iso(e.createdAt),
    updatedAt: iso(e.updatedAt),
  };
}
