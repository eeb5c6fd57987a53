import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { reasonOfSuppressedError } from '../suppressions/suppression.service';
import type { Address } from './email.entity';
import type { ContactData } from '../contacts/contact.entity';
import type { ContactIntake } from '../contacts/contact-intake';
import type { ProjectSettings } from '../projects/project.entity';
import { assertSenderDomain, type DomainStatusCache } from '../domains/domain.service';
import { validationError, AppError } from '../errors';
import { templateForSend, type TemplateCache } from '../templates/template.service';
import { composeEmail, newEmailOf, prepareMessage, resolveMessage, type ComposedEmail } from '../compose/composer';
import type { EmailIntake, NewEmail } from './email-intake';
import { deleteUnsentAttachments, storeAttachments, type AttachmentInput, type DecodedAttachment } from './attachments';
import type { BillingGuard } from '../billing/billing.service';
import type { SuppressionReason } from '../suppressions/suppression.entity';

export interface SendRequest {
  projectId: string;
  settings: ProjectSettings;
  to: Address[];
  templateId?: string;
  from?: Address;
  replyTo?: string;
  subject?: string;
  body?: string;
  subscribed?: boolean;
  data?: ContactData;
  headers?: Record<string, string>;
  attachments?: AttachmentInput[];
  tracking?: { opens?: boolean; clicks?: boolean };
}

export interface AcceptedEmail {
  contactId: string;
  contactEmail: string;
  emailId: string;
  /** Set when the address is on the suppression list: the email is stored SUPPRESSED and never sent. */
  suppressed?: SuppressionReason;
}

export interface SendLimits {
  /** Decoded bytes of one email's attachments together. */
  attachmentsBytes: number;
  /** The whole message as sent. */
  messageBytes: number;
}

/** Headers, boundaries and the MIME parts' own headers: a generous allowance on top of the bodies. */
const MIME_OVERHEAD_BYTES = 16 * 1024;
/** Base64 in MIME: 4 characters per 3 bytes, plus CRLF every 76 characters. */
const base64Size = (bytes: number) => Math.ceil(bytes / 3) * 4 * (78 / 76);

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`;

/**
 * Accepts a send: resolves the template (explicit subject, body, from and reply override it), checks the sender
 * domain and the attachments, prepares the message once (compose/composer.ts: MJML, Liquid, the links to track), then
 * gives each recipient in sequence its own contact upsert and its own composed email (Liquid over the contact's data,
 * the call's data and the always-available variables, tracking and, for marketing mail, the unsubscribe headers). The
 * call returns once the emails are stored and their delivery workflow has started (EmailIntake); an email to a
 * suppressed address is stored SUPPRESSED instead, and comes back marked (`suppressed`). Nothing is stored
 * for an invalid request: every check that can fail runs first. `hooks.beforeStore` runs once everything is checked,
 * just before the emails are stored (an idempotent request reserves its response there).
 */
export async function acceptSend(
  em: EntityManager,
  deps: { intake: EmailIntake; contacts: ContactIntake; domainCache?: DomainStatusCache; templateCache?: TemplateCache; limits: SendLimits; billing?: BillingGuard },
  req: SendRequest,
  hooks: { beforeStore?: (accepted: AcceptedEmail[]) => Promise<void> } = {},
): Promise<AcceptedEmail[]> {
  const template = req.templateId ? await templateForSend(em, req.projectId, req.templateId, deps.templateCache) : undefined;
  const resolved = resolveMessage(template, { from: req.from, replyTo: req.replyTo, subject: req.subject, body: req.body });
  const sender = await assertSenderDomain(em, req.projectId, resolved.from.email, { cache: deps.domainCache });

  const attachments = decodeAttachments(req.attachments ?? [], deps.limits);
  const attachmentsSize = attachments.reduce((n, a) => n + base64Size(a.content.length), 0);
  const message = await prepareMessage({
    ...resolved,
    headers: req.headers,
    tracking: { opens: req.tracking?.opens ?? req.settings.trackOpens, clicks: req.tracking?.clicks ?? req.settings.trackClicks },
    // For the List-Unsubscribe mailto: of marketing mail; the envelope sender is decided again when it is delivered.
    returnPathHost: sender.returnPathHost,
  });

  // The billing caps (402 BILLING_LIMIT_EXCEEDED), before any contact or email is written: every recipient is an email.
  await deps.billing?.assertEmails(em, req.projectId, req.to.length);
  await deps.billing?.assertContacts(em, req.projectId, req.to.map((r) => r.email));

  const accepted: AcceptedEmail[] = [];
  const composed: ComposedEmail[] = [];
  // Each recipient's upsert commits on its own (it is idempotent, and its subscription event commits with it).
  // The emails are stored together by the intake, so a failure part-way leaves no email without a delivery.
  for (const recipient of req.to) {
    const up = await deps.contacts.upsert({
      projectId: req.projectId,
      email: recipient.email,
      subscribed: req.subscribed,
      data: req.data,
      defaultSubscribed: false,
      source: { via: 'send' },
    });
    const email = composeEmail(message, { contactId: up.contact.id, email: up.contact.email, name: recipient.name, data: up.variables });
    const size = Buffer.byteLength(email.html) + Buffer.byteLength(email.text) + attachmentsSize + MIME_OVERHEAD_BYTES;
    if (size > deps.limits.messageBytes) {
      throw new AppError(413, 'MESSAGE_TOO_LARGE', `The message to ${up.contact.email} would be about ${mib(size)}; at most ${mib(deps.limits.messageBytes)} is allowed`, {
        suggestion: 'Send large files as links rather than attachments.',
      });
    }
    composed.push(email);
    accepted.push({ contactId: up.contact.id, contactEmail: up.contact.email, emailId: email.emailId });
  }
  const attachmentIds = attachments.length ? await storeAttachments(em, req.projectId, attachments) : [];
  const emails: NewEmail[] = composed.map((e) => newEmailOf(e, req.projectId, attachmentIds));
  let suppressed: (SuppressionReason | null)[];
  try {
    await hooks.beforeStore?.(accepted);
    suppressed = await deps.intake.submit(req.projectId, emails);
  } catch (err) {
    // The caller is told nothing was accepted: its files go too, unless some of its emails may still be sent. Best
    // effort: the caller's answer is the intake's error either way.
    if (attachmentIds.length) await deleteUnsentAttachments(em, attachmentIds, accepted.map((a) => a.emailId)).catch(() => undefined);
    throw err;
  }
  return accepted.map((a, i) => (suppressed[i] ? { ...a, suppressed: suppressed[i] } : a));
}

function decodeAttachments(items: AttachmentInput[], limits: SendLimits): DecodedAttachment[] {
  const decoded = items.map((a) => ({
    filename: a.filename,
    contentType: a.contentType ?? null,
    disposition: a.disposition ?? (a.contentId ? 'inline' : 'attachment'),
    contentId: a.contentId ?? null,
    content: Buffer.from(a.content, 'base64'),
  }));
  const total = decoded.reduce((n, a) => n + a.content.length, 0);
  if (total > limits.attachmentsBytes) {
    throw new AppError(413, 'ATTACHMENTS_TOO_LARGE', `The attachments add up to ${mib(total)}; at most ${mib(limits.attachmentsBytes)} per email is allowed`, {
      errors: [{ field: 'attachments', message: `At most ${mib(limits.attachmentsBytes)} in total`, code: 'too_large' }],
      suggestion: 'Send large files as links rather than attachments.',
    });
  }
  const ids = new Set<string>();
  decoded.forEach((a, i) => {
    if (!a.contentId) return;
    if (ids.has(a.contentId)) throw validationError([{ field: `attachments.${i}.contentId`, message: `contentId "${a.contentId}" is used twice`, code: 'duplicate' }]);
    ids.add(a.contentId);
  });
  return decoded;
}

/**
 * What the intake decided for each email of an accepted send, by id (`suppressed` set for one stored SUPPRESSED, with
 * its reason); empty when they were not stored (the intake stores a call's emails with one statement: all or none).
 */
export async function storedSend(em: EntityManager, emailIds: string[]): Promise<Map<string, { suppressed: boolean; reason?: SuppressionReason }>> {
  if (!emailIds.length) return new Map();
  const rows = await sql(em).query<{ id: string; status: string; error: string | null }>(`select id, status, error from emails where id = any($1::uuid[])`, [
    `{${emailIds.join(',')}}`,
  ]);
  return new Map(rows.map((r) => [r.id, r.status === 'SUPPRESSED' ? { suppressed: true, reason: reasonOfSuppressedError(r.error) } : { suppressed: false }]));
}
