import { z } from 'zod';
import { emailString } from '../validation';

export const MAX_RECIPIENTS = 50;

const AddressObject = z.object({ name: z.string().max(200).optional(), email: emailString });
const Recipient = z.union([emailString, AddressObject]);

/** RFC 5322 field names: printable ASCII except ":"; values must not break out of the header. */
const HEADER_NAME = /^[!-9;-~]+$/;
const STRUCTURAL_HEADERS = new Set([
  'from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'reply-to', 'sender', 'return-path',
  'mime-version', 'content-type', 'content-transfer-encoding', 'dkim-signature', 'received',
]);

export const Headers = z
  .record(z.string(), z.string().max(998, 'Header values are at most 998 characters'))
  .superRefine((headers, ctx) => {
    for (const [name, value] of Object.entries(headers)) {
      if (!HEADER_NAME.test(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'Header names are printable ASCII without ":", CR or LF', params: { code: 'invalid_header' } });
      } else if (STRUCTURAL_HEADERS.has(name.toLowerCase())) {
        ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is set by the service and cannot be overridden`, params: { code: 'reserved_header' } });
      }
      if (/[\r\n]/.test(value)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'Header values cannot contain CR or LF', params: { code: 'header_injection' } });
      }
    }
  });

export const SendBody = z
  .object({
    to: z.union([Recipient, z.array(Recipient).min(1).max(MAX_RECIPIENTS)]),
    subject: z.string().min(1).max(998).refine((s) => !/[\r\n]/.test(s), { message: 'Subject cannot contain newlines', params: { code: 'invalid_subject' } }),
    body: z.string().min(1),
    from: z.union([emailString, AddressObject]),
    name: z.string().max(200).optional().meta({ deprecated: true, description: 'Deprecated: use `from` as an object.' }),
    reply: emailString.optional(),
    subscribed: z.boolean().optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    headers: Headers.optional(),
  })
  .meta({ id: 'SendRequest' });
export type SendBody = z.infer<typeof SendBody>;

export const SendResponse = z
  .object({
    success: z.literal(true),
    data: z.object({
      emails: z.array(z.object({ contact: z.object({ id: z.string(), email: z.string() }), email: z.string() })),
      timestamp: z.iso.datetime(),
    }),
  })
  .meta({ id: 'SendResponse' });
