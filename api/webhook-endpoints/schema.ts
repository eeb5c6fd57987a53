import { z } from 'zod';
import { IdCursor, Limit } from '../contacts/schema';
import { NO_LINE_BREAKS } from '../validation';
import { WEBHOOK_URL } from '../automations/schema';
import { EVENT_NAME_RE } from '../../domain/events/event-names';
import { WEBHOOK_DELIVERY_STATUSES } from '../../domain/webhook-endpoints/webhook-endpoint.entity';

const EventTypes = z
  .array(z.string().regex(EVENT_NAME_RE, 'an event type is 1-200 printable characters'))
  .min(1, 'Give at least one event type (or `*`)')
  .max(100, 'At most 100 event types')
  .meta({
    description:
      'What it receives: `email.sent`, `email.delivered`, `email.opened`, `email.clicked`, `email.bounced`, `email.complained`, `email.failed`, ' +
      '`email.replied`, `email.auto_replied`, `contact.subscribed`, `contact.unsubscribed`, `segment.<slug>.entry`, `segment.<slug>.exit`, ' +
      'any tracked event name, or `*` for every event.',
  });

const Url = z
  .string()
  .max(2048)
  .regex(WEBHOOK_URL, 'url must be an https URL to a host name or IPv4 address, without credentials')
  .meta({ description: 'https (http only for an internal receiver the SSRF guard allows: WEBHOOK_ALLOWED_NETWORKS); an address the guard refuses is 422 `invalid_url`.' });
const Description = z.string().max(500).regex(new RegExp(NO_LINE_BREAKS), 'description cannot contain line breaks').nullable();

export const CreateWebhookEndpointBody = z
  .object({ url: Url, eventTypes: EventTypes, description: Description.optional(), enabled: z.boolean().optional().meta({ description: 'Default true.' }) })
  .meta({ id: 'CreateWebhookEndpointRequest' });

export const UpdateWebhookEndpointBody = z
  .object({ url: Url.optional(), eventTypes: EventTypes.optional(), description: Description.optional(), enabled: z.boolean().optional() })
  .meta({ id: 'UpdateWebhookEndpointRequest' });

export const ListWebhookEndpointsQuery = z.object({ limit: Limit, cursor: IdCursor });

export const ListWebhookDeliveriesQuery = z.object({ limit: Limit, cursor: IdCursor, status: z.enum(WEBHOOK_DELIVERY_STATUSES).optional() });

export const ReplayWebhookEventsBody = z
  .object({
    from: z.iso.datetime({ offset: true }).meta({ description: 'Events recorded at or after this time...' }),
    to: z.iso.datetime({ offset: true }).meta({ description: '...and before this one; after `from`, at most 31 days later.' }),
  })
  .meta({ id: 'ReplayWebhookEventsRequest' });

export const WebhookReplaySchema = z
  .object({
    replayId: z.string(),
    endpointId: z.string(),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    workflowId: z.string().meta({ description: 'The replay\'s workflow in Temporal (`webhook-replay/<endpointId>/<replayId>`).' }),
  })
  .meta({ id: 'WebhookReplay' });

export const WebhookReplayStatusSchema = WebhookReplaySchema.extend({
  state: z
    .enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT'])
    .meta({ description: 'RUNNING while events are read and queued; COMPLETED once all are queued (the deliveries go on with their retries); otherwise how an operator or Temporal ended it.' }),
  events: z.number().int().meta({ description: 'Events of the range read so far (of every type).' }),
  queued: z.number().int().meta({ description: 'Deliveries queued so far: the events the endpoint wants, less those already PENDING or SUCCEEDED.' }),
  deliveries: z
    .object(Object.fromEntries(WEBHOOK_DELIVERY_STATUSES.map((s) => [s, z.number().int()])) as Record<(typeof WEBHOOK_DELIVERY_STATUSES)[number], z.ZodNumber>)
    .meta({ description: "The queued deliveries by their status now (a later replay that queues one again counts it as its own)." }),
}).meta({ id: 'WebhookReplayStatus' });

export const ReplayParams = z.object({ id: z.uuid({ error: 'Must be a UUID' }), replayId: z.uuid({ error: 'Must be a UUID' }) });

export const DeliveryParams = z.object({ id: z.uuid({ error: 'Must be a UUID' }), deliveryId: z.uuid({ error: 'Must be a UUID' }) });
