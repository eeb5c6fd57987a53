import { z } from 'zod';
import { parseWebhookJson, readWebhookEvent, type ProviderReport, type ReportEffect, type SkippedEvent } from './provider-reports';

/**
 * Resend's webhooks (Standard Webhooks, signed as Svix signs): one event per request, `{ type, created_at, data }`,
 * applied once by its `svix-id`. Our email is found by the Message-ID among `data.headers` when Resend echoes it, or by
 * `data.email_id` (Resend's id of the message, matched with `emails.provider_message_id`).
 */

const text = z.string().max(10_000);
const ResendEvent = z.object({
  type: text,
  created_at: text.optional(),
  data: z.object({
    email_id: text.optional(),
    to: z.union([z.array(text), text]).optional(),
    created_at: text.optional(),
    headers: z.array(z.object({ name: text, value: text })).optional(),
    bounce: z.object({ type: text.optional(), subType: text.optional(), message: text.optional() }).optional(),
  }),
});
type ResendEvent = z.infer<typeof ResendEvent>;

/** Transient bounce subtypes about the mailbox (Resend reports Amazon SES's). */
const MAILBOX_SOFT_BOUNCES = new Set(['General', 'MailboxFull']);

function effectOf(e: ResendEvent): ReportEffect | null {
  const at = e.created_at ?? e.data.created_at;
  switch (e.type) {
    case 'email.delivered':
      return { kind: 'delivered', at };
    case 'email.bounced': {
      const b = e.data.bounce ?? {};
      const common = { bounceSubType: b.subType ?? b.type, diagnosticCode: b.message, timestamp: at };
      // Resend sends email.bounced for permanent rejections; a bounce object saying otherwise (SES's types) is heard.
      if (b.type === 'Transient') return { kind: 'bounced', permanent: false, ...(MAILBOX_SOFT_BOUNCES.has(b.subType ?? 'General') ? { suppression: 'soft_bounce' as const } : {}), ...common };
      if (b.type === 'Undetermined') return { kind: 'bounced', permanent: false, ...common };
      return { kind: 'bounced', permanent: true, suppression: 'hard_bounce', ...common };
    }
    case 'email.complained':
      return { kind: 'complained', feedbackType: 'abuse', timestamp: at };
    case 'email.delivery_delayed':
      // Resend keeps trying; the final word comes as email.delivered or email.bounced.
      return { kind: 'bounced', permanent: false, bounceSubType: 'delivery_delayed', timestamp: at };
    default:
      return null; // email.sent, email.opened, email.clicked, contact.*, domain.*, ...
  }
}

/** The event of a verified request (`eventId`: its svix-id); 400 when the body is not JSON. */
export function readResendEvent(rawBody: string, eventId: string): ProviderReport | SkippedEvent {
  const read = readWebhookEvent(ResendEvent, parseWebhookJson(rawBody, 'Resend posts one JSON event.'), 'type', eventId);
  if ('skipped' in read) return read;
  const e = read.event;
  const effect = effectOf(e);
  if (!effect) return { skipped: 'ignored', type: e.type, eventId };
  const to = Array.isArray(e.data.to) ? e.data.to[0] : e.data.to;
  const messageIdHeader = e.data.headers?.find((h) => h.name.toLowerCase() === 'message-id')?.value;
  return { eventId, type: e.type, messageIdHeader, providerMessageId: e.data.email_id, recipient: to, effect };
}
