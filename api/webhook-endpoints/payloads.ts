import { z } from 'zod';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';

/**
 * The bodies Mailwright POSTs to webhook endpoints, one per event type, as OpenAPI 3.1 `webhooks` of /openapi.json
 * (README › Webhooks out › Payloads). `data.properties` is the recorded event's payload (domain/events/event-writer.ts
 * `SystemEventData`); keys that are unknown for an event are left out, never null, and new optional keys may appear.
 */

const Contact = z.object({ id: z.string(), email: z.string().nullable().meta({ description: 'null when the contact was deleted meanwhile.' }) });

const ReportSource = z.string().meta({ description: '`smtp`, `ses`, `dsn`, `arf`, `sendgrid`, `mailgun`, `postmark` or `resend`: who reported it.' });
const ProviderIds = { providerEventId: z.string().optional(), providerMessageId: z.string().optional() };
const optionalStrings = (...keys: string[]) => Object.fromEntries(keys.map((k) => [k, z.string().optional()]));

const PROPERTIES: Record<string, { description: string; properties: z.ZodType }> = {
  'email.sent': { description: 'The relay accepted the email.', properties: z.object({ messageId: z.string(), response: z.string() }) },
  'email.delivered': {
    description: 'A delivery report said the email was delivered.',
    properties: z.looseObject({ source: ReportSource, processingTimeMillis: z.number().optional(), ...optionalStrings('smtpResponse', 'reportingMTA', 'timestamp', 'sesMessageId'), ...ProviderIds }),
  },
  'email.bounced': {
    description: 'The email bounced. `Permanent` ends it as BOUNCED (and suppresses the address); `Transient` and `Undetermined` are reports only.',
    properties: z.looseObject({
      source: ReportSource,
      bounceType: z.enum(['Permanent', 'Transient', 'Undetermined']),
      transient: z.literal(true).optional(),
      attempt: z.number().int().optional(),
      ...optionalStrings('response', 'campaignId', 'bounceSubType', 'diagnosticCode', 'status', 'action', 'reportingMTA', 'feedbackId', 'timestamp', 'sesMessageId', 'inboundId', 'format'),
      ...ProviderIds,
    }),
  },
  'email.complained': {
    description: 'The recipient reported the email as spam.',
    properties: z.looseObject({
      source: ReportSource,
      ...optionalStrings('complaintFeedbackType', 'complaintSubType', 'userAgent', 'arrivalDate', 'feedbackId', 'timestamp', 'sesMessageId', 'inboundId', 'format'),
      ...ProviderIds,
    }),
  },
  'email.opened': { description: 'The open pixel was loaded (recorded as `email.open`).', properties: z.object({}) },
  'email.clicked': { description: 'A tracked link was followed (recorded as `email.click`).', properties: z.object({ url: z.string() }) },
  'email.failed': { description: 'The email could not be sent.', properties: z.object({ reason: z.string() }) },
  'email.replied': {
    description: 'A person answered the email (the inbound server received the reply).',
    properties: z.object({ inboundId: z.string(), from: z.string(), subject: z.string(), excerpt: z.string() }),
  },
  'email.auto_replied': {
    description: 'An automatic answer to the email (out-of-office, RFC 3834 responders).',
    properties: z.object({ inboundId: z.string(), from: z.string().optional(), subject: z.string(), reason: z.string() }),
  },
  'contact.subscribed': { description: 'The contact was subscribed.', properties: z.looseObject({ via: z.string() }) },
  'contact.unsubscribed': { description: 'The contact was unsubscribed.', properties: z.looseObject({ via: z.string() }) },
  'segment.{slug}.entry': {
    description: 'The contact entered the segment `<slug>` (the type names the segment: `segment.vip.entry`).',
    properties: z.object({ segmentId: z.string(), segmentName: z.string(), via: z.string() }),
  },
  'segment.{slug}.exit': { description: 'The contact left the segment `<slug>`.', properties: z.object({ segmentId: z.string(), segmentName: z.string(), via: z.string() }) },
  '{tracked event name}': { description: 'A tracked event (POST /v1/track, /events/track): the type is its name, `properties` its `data`.', properties: z.record(z.string(), z.unknown()) },
};

const HEADERS =
  'Headers (Standard Webhooks): `webhook-id` (`msg_...`, the same on every attempt of this delivery), `webhook-timestamp` (Unix seconds of the attempt), ' +
  '`webhook-signature` (`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed with the bytes of the whsec_ secret>`, one space-separated entry per secret in use). ' +
  'Answer 2xx within WEBHOOK_TIMEOUT; anything else is retried with backoff (5 s doubling to an hour) for three days, and a `Retry-After` ' +
  '(seconds or an HTTP date) on a retryable answer such as 429 or 503 sets the next wait (at least it, at most an hour). ' +
  "Order: a contact's deliveries to one endpoint are attempted one at a time in the order they were made (the events' recorded order): a later " +
  'one waits while an earlier one is retried. No order across contacts, nor after an earlier delivery ended FAILED or CANCELLED, nor for a retry or replay.';

const webhookResponses = { 200: { description: 'Any 2xx: received. Anything else, or no answer in time, is retried.' } };

/** Adds the payload of every event type to the document's `webhooks`. */
export function registerWebhookPayloads(registry: OpenAPIRegistry): void {
  const entries: [string, string, z.ZodType][] = [
    ...Object.entries(PROPERTIES).map(([type, p]) => [type, p.description, z.object({ eventId: z.string(), contact: Contact, emailId: z.string().nullable(), properties: p.properties })] as [string, string, z.ZodType]),
    ['webhook.test', 'POST /webhook-endpoints/:id/test.', z.object({ endpointId: z.string(), message: z.string() })],
  ];
  for (const [type, description, data] of entries) {
    const id = `WebhookPayload_${type.replace(/[^A-Za-z0-9]+/g, '_').replace(/^_|_$/g, '')}`;
    registry.registerWebhook({
      method: 'post',
      path: type,
      summary: `\`${type}\``,
      description: `${description} ${HEADERS}`,
      tags: ['Webhook events'],
      request: {
        body: {
          content: {
            'application/json': {
              schema: z
                .object({
                  type: type.includes('{') ? z.string().meta({ description: 'The event type.' }) : z.literal(type),
                  timestamp: z.iso.datetime().meta({ description: 'When the event was recorded.' }),
                  data,
                })
                .meta({ id }),
            },
          },
        },
      },
      responses: webhookResponses,
    });
  }
}
