import { z } from 'zod';
import { IdCursor, Limit } from '../contacts/schema';
import { EventName, TrackBody } from '../track/schema';

export const ListEventsQuery = z.object({ limit: Limit, cursor: IdCursor, name: z.string().max(200).optional() });

export const ContactEventsParams = z.object({ contactId: z.uuid({ error: 'Must be a contact id (UUID)' }) });

export const StatsQuery = z.object({
  days: z.coerce.number().int().min(1).max(365).default(30).meta({ description: 'Window in days (1-365, default 30).' }),
});

export const EventNameParams = z.object({ eventName: z.string().min(1).max(200) });

/** Only client-tracked names can be deleted: the service's own events are its record of what happened. */
export const DeletableEventNameParams = z.object({ eventName: EventName });

export const DashboardTrackBody = TrackBody.extend({ projectId: z.uuid() }).meta({ id: 'DashboardTrackRequest' });

export const StatsSchema = z
  .object({
    windowDays: z.number().int(),
    total: z.number().int(),
    inWindow: z.number().int(),
    last24h: z.number().int(),
    uniqueContacts: z.number().int(),
    byName: z.array(z.object({ name: z.string(), count: z.number().int() })),
    daily: z.array(z.object({ date: z.string(), count: z.number().int() })),
  })
  .meta({ id: 'EventStats' });

export const NamesSchema = z
  .object({ data: z.array(z.object({ name: z.string(), count: z.number().int(), lastSeenAt: z.iso.datetime(), source: z.enum(['TRACKED', 'SYSTEM']) })) })
  .meta({ id: 'EventNames' });
