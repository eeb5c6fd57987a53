import type { EntityManager } from '@mikro-orm/postgresql';
import type { Address } from './email.entity';
import type { ContactData } from '../contacts/contact.entity';
import type { ContactIntake } from '../contacts/contact-intake';
import type { ProjectSettings } from '../projects/project.entity';
import { assertSenderDomain, type DomainStatusCache } from '../domains/domain.service';
import { dispatchEvents, type RecordedEvent } from '../events/event.service';
import { validationError, AppError } from '../errors';
import { templateForSend, type TemplateCache } from '../templates/template.service';
import { compileBody, renderBody, renderSubject } from '../rendering/render';
import { applyTracking, contactLinks, listUnsubscribeHeaders } from '../tracking';
import type { EmailIntake, NewEmail } from './email-intake';
import { deleteUnsentAttachments, storeAttachments, type AttachmentInput, type DecodedAttachment } from './attachments';
import { uuidv7 } from '../ids';

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
 * domain and the attachments, then gives each recipient in sequence its own contact upsert and its own rendering
 * (Liquid over the contact's data, the call's data and the always-available variables), tracking and, for
 * marketing mail, the unsubscribe headers. The call returns once the emails are stored and their delivery workflow
 * has started (EmailIntake). Nothing is stored for an invalid request: every check that can fail runs first.
 */
export async function acceptSend(
  em: EntityManager,
  deps: { intake: EmailIntake; contacts: ContactIntake; domainCache?: DomainStatusCache; templateCache?: TemplateCache; limits: SendLimits },
  req: SendRequest,
): Promise<AcceptedEmail[]> {
  const template = req.templateId ? await templateForSend(em, req.projectId, req.templateId, deps.templateCache) : undefined;
  const kind = template?.type ?? 'TRANSACTIONAL';
  const from: Address | undefined = req.from ?? (template?.from ? { email: template.from, name: template.fromName ?? undefined } : undefined);
  const subject = req.subject ?? template?.subject;
  const body = req.body ?? template?.body;
  const replyTo = req.replyTo ?? template?.replyTo ?? undefined;
  if (!from) throw validationError([{ field: 'from', message: 'Required: the template has no sender', code: 'required' }]);
  // Both come from a template here (the request schema requires them without one), whose own checks keep them non-empty.
  if (!subject || !body) throw validationError([{ field: subject ? 'body' : 'subject', message: 'The template has none', code: 'required' }]);
  await assertSenderDomain(em, req.projectId, from.email, { cache: deps.domainCache });

  const attachments = decodeAttachments(req.attachments ?? [], deps.limits);
  const attachmentsSize = attachments.reduce((n, a) => n + base64Size(a.content.length), 0);
  const compiled = await compileBody(body);
  const track = {
    opens: req.tracking?.opens ?? req.settings.trackOpens,
    clicks: req.tracking?.clicks ?? req.settings.trackClicks,
  };

  const accepted: AcceptedEmail[] = [];
  const emitted: RecordedEvent[] = [];
  const emails: NewEmail[] = [];
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
    if (up.subscriptionEvent) emitted.push(up.subscriptionEvent);
    const links = contactLinks(up.contact.id);
    const variables = {
      ...up.variables,
      id: up.contact.id,
      email: up.contact.email,
      mailwright_id: up.contact.id,
      mailwright_email: up.contact.email,
      unsubscribeUrl: links.unsubscribeUrl,
      subscribeUrl: links.subscribeUrl,
      manageUrl: links.manageUrl,
    };
    const emailId = uuidv7();
    const rendered = renderBody(compiled, variables);
    const text = rendered.text;
    const html = applyTracking(rendered.html, { emailId, ...track });
    const size = Buffer.byteLength(html) + Buffer.byteLength(text) + attachmentsSize + MIME_OVERHEAD_BYTES;
    if (size > deps.limits.messageBytes) {
      throw new AppError(413, 'MESSAGE_TOO_LARGE', `The message to ${up.contact.email} would be about ${mib(size)}; at most ${mib(deps.limits.messageBytes)} is allowed`, {
        suggestion: 'Send large files as links rather than attachments.',
      });
    }
    emails.push({
      id: emailId,
      projectId: req.projectId,
      contactId: up.contact.id,
      kind,
      templateId: template?.id ?? null,
      toEmail: up.contact.email,
      toName: recipient.name ?? null,
      fromEmail: from.email,
      fromName: from.name ?? null,
      replyTo: replyTo ?? null,
      subject: renderSubject(subject, variables),
      html,
      text,
      headers: { ...(req.headers ?? {}), ...(kind === 'MARKETING' ? listUnsubscribeHeaders(links, from.email) : {}) },
      attachmentIds: [],
    });
    accepted.push({ contactId: up.contact.id, contactEmail: up.contact.email, emailId });
  }
  await dispatchEvents(emitted);
  const attachmentIds = attachments.length ? await storeAttachments(em, req.projectId, attachments) : [];
  for (const e of emails) e.attachmentIds = attachmentIds;
  try {
    await deps.intake.submit(req.projectId, emails);
  } catch (err) {
    // The caller is told nothing was accepted: its files go too, unless some of its emails may still be sent. Best
    // effort: the caller's answer is the intake's error either way.
    if (attachmentIds.length) await deleteUnsentAttachments(em, attachmentIds, accepted.map((a) => a.emailId)).catch(() => undefined);
    throw err;
  }
  return accepted;
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
