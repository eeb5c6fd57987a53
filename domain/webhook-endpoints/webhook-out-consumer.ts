import { sql } from '../db/sql';
import { uuidv7 } from '../ids';
import type { EventConsumer, OutboxEvent } from '../events/event-consumer';
import { endpointWants, eventPayload, webhookTypeOf } from './standard-webhooks';

/** Deliveries per `webhook-delivery` workflow (one endpoint each). */
const WEBHOOK_DELIVERY_BATCH = 100;

/** What the consumer needs of Temporal: the start of one endpoint's batch of deliveries. */
export interface WebhookDeliveryControl {
  startWebhookDelivery(input: { projectId: string; endpointId: string; deliveryIds: string[]; contactIds?: (string | null)[] }): Promise<string>;
}

/** A batch's input: its deliveries in id order, with the contact of each (a contact's run one after another). */
function deliveryBatch(deliveries: readonly { id: string; contactId: string | null }[]): { deliveryIds: string[]; contactIds: (string | null)[] } {
  return { deliveryIds: deliveries.map((d) => d.id), contactIds: deliveries.map((d) => d.contactId) };
}

interface EndpointMatch {
  id: string;
  projectId: string;
  eventTypes: string[];
}

/**
 * The webhooks-out consumer (`webhooks-out`): each recorded event becomes one delivery row per enabled endpoint of its
 * project that wants its type (unique by endpoint and event, so a redelivered event finds its rows), and each
 * endpoint's new deliveries are handed to a `webhook-delivery/<endpointId>/<first delivery id>` workflow, which makes
 * the HTTP calls. The consumer itself never calls a receiver: a slow or dead endpoint holds up no event.
 */
export function createWebhookOutConsumer(control: () => Promise<WebhookDeliveryControl>): EventConsumer {
  return {
    name: 'webhooks-out',
    // Events of a project without an enabled endpoint are not even queued (migration 20261127190000).
    projectScoped: true,
    async handle(events: OutboxEvent[], { pool }) {
      const db = sql(pool);
      const projects = [...new Set(events.map((e) => e.projectId))];
      const endpoints = await db.query<EndpointMatch>(
        `select id, project_id as "projectId", event_types as "eventTypes" from webhook_endpoints where project_id = any($1::uuid[]) and enabled`,
        [projects],
      );
      if (endpoints.length === 0) return;
      const wanted = events.flatMap((e) => endpoints.filter((ep) => ep.projectId === e.projectId && endpointWants(ep.eventTypes, webhookTypeOf(e.name))).map((ep) => ({ e, ep })));
      if (wanted.length === 0) return;
      const contacts = new Map(
        (
          await db.query<{ id: string; email: string }>('select id, email from contacts where id = any($1::uuid[])', [[...new Set(wanted.map((w) => w.e.contactId))]])
        ).map((c) => [c.id, c.email]),
      );
      const rows = wanted.map(({ e, ep }) => ({
        id: uuidv7(),
        endpointId: ep.id,
        projectId: e.projectId,
        eventId: e.id,
        contactId: e.contactId,
        type: webhookTypeOf(e.name),
        payload: JSON.stringify(eventPayload({ ...e, contactEmail: contacts.get(e.contactId) ?? null })),
      }));
      // A redelivered event's rows exist already: they come back too (the no-op update), so their batch starts again;
      // a delivery that succeeded meanwhile is skipped by the activity.
      const stored = await db.query<{ id: string; endpointId: string; projectId: string; contactId: string | null; status: string }>(
        `insert into webhook_deliveries (id, endpoint_id, project_id, event_id, contact_id, type, payload)
         select * from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::text[], $7::jsonb[])
         on conflict (endpoint_id, event_id) do update set endpoint_id = excluded.endpoint_id
         returning id, endpoint_id as "endpointId", project_id as "projectId", contact_id as "contactId", status`,
        [rows.map((r) => r.id), rows.map((r) => r.endpointId), rows.map((r) => r.projectId), rows.map((r) => r.eventId), rows.map((r) => r.contactId), rows.map((r) => r.type), rows.map((r) => r.payload)],
      );
      const byEndpoint = new Map<string, { projectId: string; deliveries: { id: string; contactId: string | null }[] }>();
      for (const d of stored.filter((s) => s.status === 'PENDING').sort((a, b) => (a.id < b.id ? -1 : 1))) {
        const group = byEndpoint.get(d.endpointId) ?? { projectId: d.projectId, deliveries: [] };
        group.deliveries.push(d);
        byEndpoint.set(d.endpointId, group);
      }
      const temporal = await control();
      for (const [endpointId, { projectId, deliveries }] of byEndpoint) {
        for (let i = 0; i < deliveries.length; i += WEBHOOK_DELIVERY_BATCH) {
          await temporal.startWebhookDelivery({ projectId, endpointId, ...deliveryBatch(deliveries.slice(i, i + WEBHOOK_DELIVERY_BATCH)) });
        }
      }
    },
  };
}
