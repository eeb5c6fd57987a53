import { z } from 'zod';
import { badRequest } from '../errors';
import { parseWebhookJson, readWebhookEvent, type ProviderReport, type ReportEffect, type SkippedEvent } from './provider-reports';

/**
 * SendGrid's Event Webhook: a JSON array of events, each with its `sg_event_id`. Our email is found by `smtp-id` (the
 * Message-ID header of the message as SendGrid received it: ours) or by `sg_message_id`, whose part before the first
 * dot is the id SendGrid's SMTP reply named (`250 Ok: queued as <id>`, stored as `emails.provider_message_id`).
 */

const text = z.string().max(10_000);
const SendgridEvent = z.object({
  event: text,
  sg_event_id: z.string().min(1).max(255),
  email: text.optional(),
  timestamp: z.number().optional(),
  'smtp-id': text.optional(),
  sg_message_id: text.optional(),
  response: text.optional(),
  reason: text.optional(),
  status: text.optional(),
  type: text.optional(),
  attempt: z.union([text, z.number()]).optional(),
  useragent: text.optional(),
});
type SendgridEvent = z.infer<typeof SendgridEvent>;

/** Reasons for `dropped` that are about the address (SendGrid has it on its bounce or invalid list). */
const ADDRESS_DROPS = /bounced address|invalid/i;

const iso = (seconds: number | undefined) => (seconds === undefined ? undefined : new Date(seconds * 1000).toISOString());

function effectOf(e: SendgridEvent): ReportEffect | null {
  const at = iso(e.timestamp);
  switch (e.event) {
    case 'delivered':
      return { kind: 'delivered', at, smtpResponse: e.response };
    case 'bounce':
      // `blocked`: the receiver refused this message (content, the sending IP's reputation), not the address.
      return e.type === 'blocked'
        ? { kind: 'bounced', permanent: false, bounceSubType: 'blocked', diagnosticCode: e.reason, status: e.status, timestamp: at }
        : { kind: 'bounced', permanent: true, suppression: 'hard_bounce', bounceSubType: e.type ?? 'bounce', diagnosticCode: e.reason, status: e.status, timestamp: at };
    case 'dropped':
      // SendGrid never sent it: the email ends as BOUNCED; the address is suppressed only when the reason is about it.
      return { kind: 'bounced', permanent: true, ...(ADDRESS_DROPS.test(e.reason ?? '') ? { suppression: 'hard_bounce' as const } : {}), bounceSubType: 'dropped', diagnosticCode: e.reason, timestamp: at };
    case 'deferred':
      // SendGrid keeps retrying; the final word comes as `delivered` or `bounce`.
      return { kind: 'bounced', permanent: false, bounceSubType: 'deferred', diagnosticCode: e.response, timestamp: at };
    case 'spamreport':
      return { kind: 'complained', feedbackType: 'abuse', userAgent: e.useragent, timestamp: at };
    case 'unsubscribe':
    case 'group_unsubscribe':
      return { kind: 'unsubscribed', detail: e.event };
    default:
      return null; // processed, open, click, ...
  }
}

/** The events of a verified body; 400 when it is not a JSON array. Each event that cannot be read is skipped as invalid. */
export function readSendgridEvents(rawBody: string): (ProviderReport | SkippedEvent)[] {
  const json = parseWebhookJson(rawBody, 'SendGrid posts a JSON array of events.');
  if (!Array.isArray(json)) throw badRequest('The body is not a JSON array of events');
  return json.map((raw: unknown): ProviderReport | SkippedEvent => {
    const read = readWebhookEvent(SendgridEvent, raw, 'event');
    if ('skipped' in read) return read;
    const e = read.event;
    const effect = effectOf(e);
    if (!effect) return { skipped: 'ignored', type: e.event, eventId: e.sg_event_id };
    return {
      eventId: e.sg_event_id,
      type: e.event,
      messageIdHeader: e['smtp-id'],
      providerMessageId: e.sg_message_id?.split('.')[0] || undefined,
      recipient: e.email,
      effect,
    };
  });
}
