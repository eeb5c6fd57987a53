import type { EntityManager } from '@mikro-orm/postgresql';
import type { Address } from './email.entity';
import type { ContactData } from '../contacts/contact.entity';
import type { ContactIntake } from '../contacts/contact-intake';
import { assertSenderDomain, type DomainStatusCache } from '../domains/domain.service';
import { dispatchEvents, type RecordedEvent } from '../events/event.service';
import { renderTemplate } from '../rendering/render';
import type { EmailIntake, NewEmail } from './email-intake';
import { uuidv7 } from '../ids';

export interface SendRequest {
  projectId: string;
  to: Address[];
  from: Address;
  replyTo?: string;
  subject: string;
  html: string;
  subscribed?: boolean;
  data?: ContactData;
  headers?: Record<string, string>;
}

export interface AcceptedEmail {
  contactId: string;
  contactEmail: string;
  emailId: string;
}


/**
 * Accepts a transactional send: each recipient in sequence gets its own contact upsert and rendering, and one email
 * row each; then the emails are handed to delivery. The call returns only once the emails are
 * durably stored and their delivery workflow has started (see EmailIntake).
 */
export async function acceptSend(
  em: EntityManager,
  deps: { intake: EmailIntake; contacts: ContactIntake; domainCache?: DomainStatusCache },
  req: SendRequest,
): Promise<AcceptedEmail[]> {
  await assertSenderDomain(em, req.projectId, req.from.email, { cache: deps.domainCache });
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
    const variables = {
      ...up.variables,
      id: up.contact.id,
      email: up.contact.email,
      mailwright_id: up.contact.id,
      mailwright_email: up.contact.email,
    };
    const emailId = uuidv7();
    emails.push({
      id: emailId,
      projectId: req.projectId,
      contactId: up.contact.id,
      kind: 'TRANSACTIONAL',
      toEmail: up.contact.email,
      toName: recipient.name ?? null,
      fromEmail: req.from.email,
      fromName: req.from.name ?? null,
      replyTo: req.replyTo ?? null,
      subject: renderTemplate(req.subject, variables),
      html: renderTemplate(req.html, variables),
      headers: req.headers ?? {},
    });
    accepted.push({ contactId: up.contact.id, contactEmail: up.contact.email, emailId });
  }
  await dispatchEvents(emitted);
  await deps.intake.submit(req.projectId, emails);
  return accepted;
}
