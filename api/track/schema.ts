import { z } from 'zod';
import { emailString } from '../validation';
import { EVENT_NAME_RE, TRACKABLE_EVENT_NAME_PATTERN, isReservedEventName } from '../../domain/events/event-names';

export const EventName = z
  .string()
  .min(1)
  .max(200)
  .regex(EVENT_NAME_RE, 'Event names have no control characters and no surrounding spaces')
  .superRefine((name, ctx) => {
    if (isReservedEventName(name)) {
      ctx.addIssue({
        code: 'custom',
        message: `"${name}" is reserved for events the service emits (email.*, contact.subscribed, contact.unsubscribed, segment.<slug>.entry/exit)`,
        params: { code: 'reserved_event' },
      });
    }
  })
  .meta({ pattern: TRACKABLE_EVENT_NAME_PATTERN, description: 'Not one of the names the service emits (email.*, contact.subscribed, contact.unsubscribed, segment.<slug>.entry/exit).' });

export const ContactDataInput = z
  .record(z.string().max(200), z.unknown())
  .meta({
    description: 'Contact data: values are stored; null deletes a key; "" is ignored; { value, persistent: false } is for this call only; reserved keys are dropped.',
    propertyNames: { maxLength: 200 },
  });

export const TrackBody = z
  .object({ email: emailString, event: EventName, subscribed: z.boolean().optional(), data: ContactDataInput.optional() })
  .meta({ id: 'TrackRequest' });

export const TrackResponse = z
  .object({ success: z.literal(true), data: z.object({ contact: z.string(), event: z.string(), timestamp: z.iso.datetime() }) })
  .meta({ id: 'TrackResponse' });
