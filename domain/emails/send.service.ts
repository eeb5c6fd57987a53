import type { EntityManager } from '@mikro-orm/postgresql';
import type { Address } from './email.entity';
import type { ContactData } from '../contacts/contact.entity';
import { upsertContact } from '../contacts/contact.repository';
import { assertSenderDomain, type DomainStatusCache } from '../domains/domain.service';
import { insertEvents, dispatchEvents, type NewEvent, type RecordedEvent } from '../events/event.service';
import { renderTemplate } from '../rendering/render';
import { serviceUnavailable } from '../errors';
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

/** Hands accepted emails to delivery (a Temporal workflow); must throw when they could not be enqueued. */
export type EnqueueDelivery = (batch: { projectId: string; emailIds: string[] }) => Promise<void>;

/**
 * Accepts a transactional send: each recipient in sequence gets its own contact upsert and rendering, one email row
 * each, all in one transaction; then the batch is handed to delivery. The call returns only once the emails are
 * durably stored and their delivery workflow has started; if that start fails the rows are marked FAILED and the
 * caller gets a 503, so nothing is reported accepted that will not be sent.
 */
export async function acceptSend(
  em: EntityManager,
  deps: { enqueue: EnqueueDelivery; domainCache?: DomainStatusCache },
  req: SendRequest,
): Promise<AcceptedEmail[]> {
  await assertSenderDomain(em, req.projectId, req.from.email, { cache: deps.domainCache });
  const accepted: AcceptedEmail[] = [];
  let emitted: RecordedEvent[] = [];
  await em.transactional(async (tx) => {
    const events: NewEvent[] = [];
    const rows: unknown[][] = [];
    for (const recipient of req.to) {
      const up = await upsertContact(tx, {
        projectId: req.projectId,
        email: recipient.email,
        subscribed: req.subscribed,
        data: req.data,
        defaultSubscribed: false,
      });
      if (up.subscriptionChange) {
        events.push({
          projectId: req.projectId,
          contactId: up.contact.id,
          name: `contact.${up.subscriptionChange}`,
          source: 'SYSTEM',
          data: { via: 'send' },
        });
      }
      const variables = { ...up.variables, id: up.contact.id, email: up.contact.email, mailwright_id: up.contact.id, mailwright_email: up.contact.email };
      const emailId = uuidv7();
      rows.push([
        emailId,
        req.projectId,
        up.contact.id,
        'TRANSACTIONAL',
        up.contact.email,
        recipient.name ?? null,
        req.from.email,
        req.from.name ?? null,
        req.replyTo ?? null,
        renderTemplate(req.subject, variables),
        renderTemplate(req.html, variables),
        JSON.stringify(req.headers ?? {}),
      ]);
      accepted.push({ contactId: up.contact.id, contactEmail: up.contact.email, emailId });
    }
    await tx.execute(
      `insert into emails (id, project_id, contact_id, kind, to_email, to_name, from_email, from_name, reply_to, subject, html, headers)
       values ${rows.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
      rows.flat(),
    );
    emitted = await insertEvents(tx, events);
  });
  await dispatchEvents(emitted);
  const emailIds = accepted.map((a) => a.emailId);
  try {
    await deps.enqueue({ projectId: req.projectId, emailIds });
  } catch (err) {
    await em.execute(
      `update emails set status = 'FAILED', error = ?, updated_at = now() where id in (${emailIds.map(() => '?').join(', ')})`,
      [`Could not be queued for delivery: ${(err as Error).message}`, ...emailIds],
    );
    throw serviceUnavailable('Delivery is temporarily unavailable; nothing was sent. Retry the request.');
  }
  return accepted;
}
