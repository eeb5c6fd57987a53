import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * A customer's own HTTPS receiver of the project's events (README › Webhooks out; migration 20261127170000). The
 * signing secret is stored sealed with APP_SECRET (SecretBox, context `webhook-endpoint:<id>`); after a rotation the
 * previous one keeps signing too until `previousSecretExpiresAt`.
 */
export const WebhookEndpoint = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  indexes: [{ name: 'webhook_endpoints_project_id_id_index', properties: ['project', 'id'] }],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    url: p.string().length(2048),
    description: p.string().length(500).nullable(),
    /** Event types it receives (`email.sent`, `segment.<slug>.entry`, a tracked name, or `*` for all). */
    eventTypes: p.json<string[]>(),
    enabled: p.boolean().default(true),
    secret: p.text(),
    previousSecret: p.text().nullable(),
    previousSecretExpiresAt: p.datetime().nullable(),
    /** The first failed attempt since the last success (null when the last attempt succeeded). */
    failingSince: p.datetime().nullable(),
    /** Why the service disabled it (null when enabled, or disabled by the API). */
    disabledReason: p.string().length(500).nullable(),
    /** When the owners were told that the service disabled it (null: not disabled by the service, or not told yet). */
    ownersNotifiedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type WebhookEndpoint = InferEntity<typeof WebhookEndpoint>;

export const WEBHOOK_DELIVERY_STATUSES = ['PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/**
 * One event for one endpoint: its body is fixed when the delivery is made (every retry sends the same bytes, under the
 * same `webhook-id`, `msg_<id>`). At most one per (endpoint, event): a redelivered outbox event finds its row.
 */
export const WebhookDelivery = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  uniques: [{ name: 'webhook_deliveries_endpoint_id_event_id_unique', properties: ['endpoint', 'eventId'] }],
  indexes: [
    { name: 'webhook_deliveries_endpoint_id_id_index', properties: ['endpoint', 'id'] },
    {
      name: 'webhook_deliveries_pending_contact_index',
      expression:
        'create index "webhook_deliveries_pending_contact_index" on "webhook_deliveries" ("endpoint_id", "contact_id", "id") where status = \'PENDING\' and contact_id is not null',
    },
    {
      name: 'webhook_deliveries_replay_id_index',
      expression: 'create index "webhook_deliveries_replay_id_index" on "webhook_deliveries" ("replay_id") where replay_id is not null',
    },
  ],
  properties: {
    id: p.uuid().primary(),
    endpoint: () => p.manyToOne(WebhookEndpoint).deleteRule('cascade').updateRule('no action'),
    projectId: p.uuid(),
    /** The recorded event (null for `webhook.test`). */
    eventId: p.uuid().nullable(),
    /** The event's contact (null for `webhook.test`): a contact's deliveries to an endpoint are attempted one at a time, in id order. */
    contactId: p.uuid().nullable(),
    type: p.string().length(200),
    payload: p.json<Record<string, unknown>>(),
    status: p.enum([...WEBHOOK_DELIVERY_STATUSES]).default('PENDING'),
    attempts: p.integer().default(0),
    lastResponseCode: p.integer().nullable(),
    /** The replay (POST .../replay) that queued it, or queued it again, last. */
    replayId: p.uuid().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type WebhookDelivery = InferEntity<typeof WebhookDelivery>;

/** One HTTP call of a delivery: its outcome, the receiver's status, how long it took, the start of its answer. */
export const WebhookAttempt = defineEntity({
  name: 'WebhookAttempt',
  tableName: 'webhook_attempts',
  indexes: [{ name: 'webhook_attempts_delivery_id_id_index', properties: ['delivery', 'id'] }],
  properties: {
    id: p.uuid().primary(),
    delivery: () => p.manyToOne(WebhookDelivery).deleteRule('cascade').updateRule('no action'),
    succeeded: p.boolean(),
    responseCode: p.integer().nullable(),
    durationMs: p.integer(),
    /** The first 1 KB of the answer. */
    responseBody: p.text().nullable(),
    error: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
