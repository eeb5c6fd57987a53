import { z } from 'zod';
import type { EventRow } from '../../domain/events/event.service';
import { iso } from './time';

export const EventSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    contactId: z.string(),
    contactEmail: z.string(),
    data: z.record(z.string(), z.unknown()),
    source: z.enum(['TRACKED', 'SYSTEM']).meta({ description: 'TRACKED: sent by a client; SYSTEM: emitted by the service (email.*, contact.*, segment.*).' }),
    emailId: z.string().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'Event' });

export function presentEvent(e: EventRow): z.infer<typeof EventSchema> {
  return { ...e, createdAt: iso(e.createdAt) };
}
