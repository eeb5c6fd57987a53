import type { EntityManager } from '@mikro-orm/postgresql';
import { upsertContact } from '../contacts/contact.repository';
import { splitContactData } from '../contacts/contact-data';
import type { ContactData } from '../contacts/contact.entity';
import { dispatchEvents, type RecordedEvent } from './event.service';

export interface TrackInput {
  email: string;
  event: string;
  subscribed?: boolean;
  data?: ContactData;
}

/**
 * POST /v1/track: upsert the contact (new contacts are subscribed unless `subscribed` says otherwise), then record the
 * event, all in one statement. The event carries the call's data values (stored and non-persistent ones alike), so
 * workflow conditions can read them; the contact keeps only the persistent ones.
 */
export async function trackEvent(
  em: EntityManager,
  projectId: string,
  input: TrackInput,
): Promise<{ contactId: string; eventId: string; timestamp: Date }> {
  const changes = splitContactData(input.data);
  const result = await upsertContact(em, {
    projectId,
    email: input.email,
    subscribed: input.subscribed,
    data: input.data,
    defaultSubscribed: true,
    source: { via: 'track', event: input.event },
    track: { name: input.event, data: { ...changes.set, ...changes.transient } },
  });
  const tracked = result.trackedEvent!;
  await dispatchEvents([result.subscriptionEvent, tracked].filter((e): e is RecordedEvent => Boolean(e)));
  return { contactId: result.contact.id, eventId: tracked.id, timestamp: tracked.createdAt };
}
