import { z } from 'zod';
import type { MailgunSignature } from './provider-signatures';
import { parseWebhookJson, readWebhookEvent, type ProviderReport, type ReportEffect, type SkippedEvent } from './provider-reports';

/**
 * Mailgun's webhooks: one event per request, `{ signature: { timestamp, token, signature }, "event-data": {...} }`.
 * Our email is found by `message.headers.message-id` (Mailgun keeps the Message-ID we set).
 */

const text = z.string().max(10_000);
const MailgunEventData = z.object({
  id: z.string().min(1).max(255),
  event: text,
  timestamp: z.number().optional(),
  severity: text.optional(),
  reason: text.optional(),
  recipient: text.optional(),
  'delivery-status': z
    .object({ code: z.union([z.number(), text]).optional(), message: text.optional(), description: text.optional(), 'enhanced-code': text.optional() })
    .optional(),
  message: z.object({ headers: z.object({ 'message-id': text.optional() }).optional() }).optional(),
});
type MailgunEventData = z.infer<typeof MailgunEventData>;

/** The body's `signature` (verified before the event is read) and its raw `event-data`; 400 when it is not JSON. */
export function readMailgunBody(rawBody: string): { signature: Partial<MailgunSignature> | undefined; eventData: unknown } {
  const json = parseWebhookJson(rawBody, 'Mailgun webhooks post JSON (`signature` and `event-data`).');
  const body = (json && typeof json === 'object' ? json : {}) as { signature?: unknown; 'event-data'?: unknown };
  const signature = body.signature && typeof body.signature === 'object' ? (body.signature as Partial<MailgunSignature>) : undefined;
  return { signature, eventData: body['event-data'] };
}

/** Temporary failures that say nothing about the mailbox: greylisting, the receiver blocking the sender. */
const NOT_ABOUT_THE_MAILBOX = /greylist|espblock/i;

function effectOf(e: MailgunEventData): ReportEffect | null {
  const at = e.timestamp === undefined ? undefined : new Date(e.timestamp * 1000).toISOString();
  const ds = e['delivery-status'];
  const reply = ds ? [ds.code, ds.message || ds.description].filter((p) => p !== undefined && p !== '').join(' ') || undefined : undefined;
  switch (e.event) {
    case 'delivered':
      return { kind: 'delivered', at, smtpResponse: reply };
    case 'failed': {
      const permanent = e.severity === 'permanent';
      const common = { bounceSubType: e.reason ?? e.severity, diagnosticCode: reply ?? ds?.description, status: ds?.['enhanced-code'], timestamp: at };
      if (permanent) return { kind: 'bounced', permanent, suppression: 'hard_bounce', ...common };
      return { kind: 'bounced', permanent, ...(NOT_ABOUT_THE_MAILBOX.test(e.reason ?? '') ? {} : { suppression: 'soft_bounce' as const }), ...common };
    }
    case 'complained':
      return { kind: 'complained', feedbackType: 'abuse', timestamp: at };
    case 'unsubscribed':
      return { kind: 'unsubscribed', detail: 'unsubscribed' };
    default:
      return null; // accepted, opened, clicked, stored, ...
  }
}

/** The verified request's event. */
export function readMailgunEvent(eventData: unknown): ProviderReport | SkippedEvent {
  const read = readWebhookEvent(MailgunEventData, eventData, 'event');
  if ('skipped' in read) return { ...read, detail: `event-data.${read.detail}` };
  const e = read.event;
  const effect = effectOf(e);
  if (!effect) return { skipped: 'ignored', type: e.event, eventId: e.id };
  return { eventId: e.id, type: e.event, messageIdHeader: e.message?.headers?.['message-id'], recipient: e.recipient, effect };
}
