import { z } from 'zod';
import { NO_LINE_BREAKS, emailString } from '../validation';
import { CONTROL, SPACE, caseInsensitive } from '../../domain/text';
import { SuppressionReasonSchema } from '../presenters/suppression.presenter';

export const MAX_RECIPIENTS = 50;
const MAX_ATTACHMENTS = 10;

const AddressObject = z.object({ name: z.string().max(200).optional(), email: emailString });
const Recipient = z.union([emailString, AddressObject]);

/** RFC 5322 field names: printable ASCII except ":"; values must not break out of the header. */
const HEADER_NAME = /^[!-9;-~]+$/;
/**
 * Headers the service writes itself: addressing, MIME structure, authentication, tracing, and the unsubscribe
 * headers of marketing mail (RFC 8058 requires them to be the service's own signed links).
 */
const STRUCTURAL_HEADERS = new Set([
  'from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'reply-to', 'sender', 'return-path',
  'mime-version', 'content-type', 'content-transfer-encoding', 'content-disposition', 'content-id', 'dkim-signature',
  'received', 'list-unsubscribe', 'list-unsubscribe-post', 'in-reply-to', 'references',
]);

const Headers = z
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
  })
  .meta({
    description: 'Custom headers. Names: printable ASCII without ":"; values: at most 998 characters, no CR or LF. Structural headers (From, To, Subject, Message-ID, Content-*, List-Unsubscribe, ...) cannot be set.',
    // The rules above, for clients that validate against the document (header names compare case-insensitively).
    propertyNames: { pattern: `^(?!(?:${[...STRUCTURAL_HEADERS].map(caseInsensitive).join('|')})$)${HEADER_NAME.source.slice(1, -1)}$` },
    additionalProperties: { type: 'string', maxLength: 998, pattern: NO_LINE_BREAKS },
  });

/**
 * Strict base64 (RFC 4648 § 4; whitespace is removed first, as MIME bodies wrap lines): a character-class scan plus a
 * length check, because a grouped pattern recurses per 4 characters and overflows the stack on megabytes.
 */
const isBase64 = (s: string) => s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);
/**
 * The same rule as a pattern for the document (whole groups of four, `=` padding at the end, whitespace anywhere).
 * Never run here: on megabytes its groups would overflow the regex engine's stack, which is why isBase64 exists.
 */
const B64 = `[A-Za-z0-9+/][${SPACE}]*`;
const BASE64_PATTERN = `^[${SPACE}]*(?:(?:${B64}){4})*(?:(?:${B64}){2}=[${SPACE}]*=[${SPACE}]*|(?:${B64}){3}=[${SPACE}]*)?$`;
/** A file name, not a path: no separators, no control characters. */
const FILENAME = new RegExp(`^[^/\\\\${CONTROL}]+$`);

const Attachment = z
  .object({
    filename: z.string().min(1).max(255).regex(FILENAME, 'A file name without "/", "\\" or control characters'),
    content: z
      .string()
      .min(1, 'An attachment needs content')
      .transform((s) => s.replace(/\s+/g, ''))
      .refine(isBase64, { message: 'Content must be base64-encoded', params: { code: 'invalid_base64' } })
      .meta({ contentEncoding: 'base64', pattern: BASE64_PATTERN, description: 'The file, base64-encoded (whitespace and line breaks are ignored).' }),
    contentType: z.string().max(255).regex(/^[A-Za-z0-9_!#$&^.+-]+\/[A-Za-z0-9_!#$&^.+-]+$/, 'A MIME type such as application/pdf').optional(),
    disposition: z.enum(['attachment', 'inline']).optional(),
    contentId: z.string().min(1).max(255).regex(new RegExp(`^[^<>${SPACE}${CONTROL}]+$`), 'A content id without "<", ">", spaces or control characters (reference it as cid:<contentId>)').optional(),
  })
  .superRefine((a, ctx) => {
    if (a.disposition === 'inline' && !a.contentId) {
      ctx.addIssue({ code: 'custom', path: ['contentId'], message: 'An inline attachment needs a contentId (referenced in the body as cid:<contentId>)', params: { code: 'required' } });
    }
  })
  .meta({ id: 'Attachment', description: 'A file: base64 `content`; `disposition: inline` with a `contentId` embeds it (e.g. `<img src="cid:logo">`).' });

const subject = z
  .string()
  .min(1)
  .max(998)
  .refine((s) => !/[\r\n]/.test(s), { message: 'Subject cannot contain newlines', params: { code: 'invalid_subject' } })
  .meta({ pattern: NO_LINE_BREAKS });

export const SendBody = z
  .object({
    to: z.union([Recipient, z.array(Recipient).min(1).max(MAX_RECIPIENTS)]),
    template: z.uuid({ error: 'Must be a template id' }).optional().meta({ description: "A template's id: its subject, body, sender and reply-to are used unless given here." }),
    subject: subject.optional().meta({ description: 'Required without a template; overrides the template\'s.' }),
    body: z.string().min(1).optional().meta({ description: 'HTML or MJML (a body starting with <mjml> is compiled). Required without a template; overrides the template\'s.' }),
    from: z.union([emailString, AddressObject]).optional().meta({ description: "Required unless the template has a sender; the domain must be verified." }),
    name: z.string().max(200).optional().meta({ deprecated: true, description: 'Deprecated: use `from` as an object. Used only when `from` is a string with no name.' }),
    reply: emailString.optional(),
    subscribed: z.boolean().optional(),
    data: z.record(z.string(), z.unknown()).optional(),
    headers: Headers.optional(),
    attachments: z.array(Attachment).max(MAX_ATTACHMENTS, `At most ${MAX_ATTACHMENTS} attachments`).optional(),
    tracking: z
      .object({ opens: z.boolean().optional(), clicks: z.boolean().optional() })
      .strict()
      .optional()
      .meta({ description: "Overrides the project's open and click tracking settings for this send." }),
  })
  .superRefine((b, ctx) => {
    if (!b.template) {
      if (b.subject === undefined) ctx.addIssue({ code: 'custom', path: ['subject'], message: 'Required when no template is given', params: { code: 'required' } });
      if (b.body === undefined) ctx.addIssue({ code: 'custom', path: ['body'], message: 'Required when no template is given', params: { code: 'required' } });
      if (b.from === undefined) ctx.addIssue({ code: 'custom', path: ['from'], message: 'Required when no template is given', params: { code: 'required' } });
    }
  })
  // The rule above, for clients that validate against the document: a template, or subject, body and from.
  .meta({ id: 'SendRequest', anyOf: [{ required: ['template'] }, { required: ['subject', 'body', 'from'] }] });
export type SendBody = z.infer<typeof SendBody>;

export const SendResponse = z
  .object({
    success: z.literal(true),
    data: z.object({
      emails: z.array(
        z.object({
          contact: z.object({ id: z.string(), email: z.string() }),
          email: z.string().meta({ description: 'The email id (GET /emails/:id).' }),
          status: z.enum(['QUEUED', 'SUPPRESSED']).meta({
            description:
              'QUEUED: handed to delivery. SUPPRESSED: the address is on the suppression list; the email is stored with this final status and is never sent.',
          }),
          suppression: z
            .object({ reason: SuppressionReasonSchema })
            .optional()
            .meta({ description: 'With SUPPRESSED: why the address is suppressed (its entry: GET /suppressions?email=...).' }),
        }),
      ),
      timestamp: z.iso.datetime(),
    }),
  })
  .meta({ id: 'SendResponse' });

/** `Idempotency-Key`: printable ASCII, at most 255 characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
