import { z } from 'zod';
import { WEBHOOK_DELIVERY_STATUSES } from '../../domain/webhook-endpoints/webhook-endpoint.entity';
import type { AttemptRow, DeliveryRow, EndpointRow } from '../../domain/webhook-endpoints/webhook-endpoint.service';
import { iso } from './time';

export const WebhookEndpointSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    eventTypes: z.array(z.string()).meta({ description: 'The event types it receives; `*` is every type.' }),
    enabled: z.boolean(),
    disabledReason: z.string().nullable().meta({ description: 'Set when the service disabled it because every attempt failed for WEBHOOK_ENDPOINT_DISABLE_AFTER.' }),
    failingSince: z.iso.datetime().nullable().meta({ description: 'The first failed attempt since the last success; null when the last attempt succeeded.' }),
    previousSecretExpiresAt: z.iso
      .datetime()
      .nullable()
      .meta({ description: 'After a rotation: until when the previous secret signs too (a second `v1,` entry in `webhook-signature`).' }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'WebhookEndpoint', description: "A receiver of the project's events (README › Webhooks out). Its secret is shown only when created or rotated." });

export const WebhookEndpointWithSecretSchema = WebhookEndpointSchema.extend({
  secret: z.string().meta({ description: '`whsec_` and 32 random bytes in base64: the HMAC key of `webhook-signature`. Shown this once; store it now.' }),
}).meta({ id: 'WebhookEndpointWithSecret' });

export function presentEndpoint(e: EndpointRow): z.infer<typeof WebhookEndpointSchema> {
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    eventTypes: e.eventTypes,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    failingSince: iso(e.failingSince),
    previousSecretExpiresAt: iso(e.previousSecretExpiresAt),
    createdAt: iso(e.createdAt),
    updatedAt: iso(e.updatedAt),
  };
}

const AttemptSchema = z
  .object({
    id: z.string(),
    succeeded: z.boolean(),
    responseCode: z.number().int().nullable().meta({ description: "The receiver's HTTP status; null when none came (timeout, network, refused address)." }),
    durationMs: z.number().int(),
    responseBody: z.string().nullable().meta({ description: 'The first 1 KB of the answer.' }),
    error: z.string().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'WebhookAttempt' });

export const WebhookDeliverySchema = z
  .object({
    id: z.string(),
    webhookId: z.string().meta({ description: 'The `webhook-id` header: the same on every attempt.' }),
    eventId: z.string().nullable().meta({ description: 'The recorded event; null for `webhook.test`.' }),
    type: z.string(),
    status: z.enum(WEBHOOK_DELIVERY_STATUSES).meta({
      description: '`PENDING`: being attempted (or waiting for its next attempt); `SUCCEEDED`: a 2xx came; `FAILED`: retries ran out or it cannot succeed; `CANCELLED`: the endpoint was disabled.',
    }),
    attempts: z.number().int(),
    lastResponseCode: z.number().int().nullable(),
    payload: z.record(z.string(), z.unknown()).meta({ description: 'The body sent, `{ type, timestamp, data }`.' }),
    attemptList: z.array(AttemptSchema).meta({ description: 'Every attempt, oldest first.' }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'WebhookDelivery' });

export function presentDelivery(d: DeliveryRow & { attemptList?: AttemptRow[] }, webhookId: string): z.infer<typeof WebhookDeliverySchema> {
  return {
    id: d.id,
    webhookId,
    eventId: d.eventId,
    type: d.type,
    status: d.status,
    attempts: d.attempts,
    lastResponseCode: d.lastResponseCode,
    payload: d.payload as unknown as Record<string, unknown>,
    attemptList: (d.attemptList ?? []).map((a) => ({
      id: a.id,
      succeeded: a.succeeded,
      responseCode: a.responseCode,
      durationMs: a.durationMs,
      responseBody: a.responseBody,
      error: a.error,
      createdAt: iso(a.createdAt),
    })),
    createdAt: iso(d.createdAt),
    updatedAt: iso(d.updatedAt),
  };
}
