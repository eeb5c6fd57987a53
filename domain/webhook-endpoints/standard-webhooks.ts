import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhooks out are signed per the Standard Webhooks specification (standardwebhooks.com): `webhook-id`,
 * `webhook-timestamp` and `webhook-signature`, the latter `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed
 * with the bytes of the `whsec_<base64>` secret; one entry per secret in use, space-separated (two during a rotation).
 */

const SECRET_PREFIX = 'whsec_';

/** A new endpoint secret: `whsec_` and 32 random bytes in base64. */
export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** The three headers of one attempt: the same id on every attempt of a delivery, the attempt's own time and signature. */
export function standardWebhookHeaders(secrets: readonly string[], webhookId: string, timestampSec: number, body: string): Record<string, string> {
  const signed = `${webhookId}.${timestampSec}.${body}`;
  const signature = secrets.map((s) => `v1,${createHmac('sha256', secretBytes(s)).update(signed).digest('base64')}`).join(' ');
  return { 'webhook-id': webhookId, 'webhook-timestamp': String(timestampSec), 'webhook-signature': signature };
}

/** The `webhook-id` of a delivery. */
export const webhookIdOf = (deliveryId: string): string => `msg_${deliveryId.replace(/-/g, '')}`;

/**
 * The public type of a recorded event: the service's own names, but `email.open` and `email.click` in the past tense
 * as the other email events are; anything else (segment transitions, tracked events) as recorded.
 */
export function webhookTypeOf(eventName: string): string {
  if (eventName === 'email.open') return 'email.opened';
  if (eventName === 'email.click') return 'email.clicked';
  return eventName;
}

/** The event types of webhook deliveries of the service's own (not recorded events). */
export const WEBHOOK_TEST_TYPE = 'webhook.test';

/** Whether an endpoint listening to `types` wants events of `type`. */
export function endpointWants(types: readonly string[], type: string): boolean {
  return types.includes('*') || types.includes(type);
}

/** The body of an event's webhook (README › Webhooks out › Payloads): the same bytes on every attempt. */
export interface WebhookPayload {
  type: string;
  /** When the event was recorded (ISO 8601). */
  timestamp: string;
  data: Record<string, unknown>;
}

/** The body for a recorded event. */
export function eventPayload(e: { id: string; name: string; contactId: string; contactEmail: string | null; emailId: string | null; data: Record<string, unknown>; createdAt: Date }): WebhookPayload {
  return {
    type: webhookTypeOf(e.name),
    timestamp: e.createdAt.toISOString(),
    data: { eventId: e.id, contact: { id: e.contactId, email: e.contactEmail }, emailId: e.emailId, properties: e.data },
  };
}
