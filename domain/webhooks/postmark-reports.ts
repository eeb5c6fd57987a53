import { z } from 'zod';
import { parseWebhookJson, readWebhookEvent, type ProviderReport, type ReportEffect, type SkippedEvent } from './provider-reports';
import { parseOurMessageId } from './ses-reports';

/**
 * Postmark's webhooks: one record per request, by `RecordType` (Delivery, Bounce, SpamComplaint, SubscriptionChange).
 * `MessageID` is Postmark's id of the message (matched with `emails.provider_message_id`); a bounce with its content
 * ("Include bounce content") also carries our Message-ID in the original headers. Postmark signs nothing: the request
 * is authenticated by the HTTP Basic credentials set on the webhook, and a record is applied once by its id (`ID` of a
 * bounce or complaint; message, recipient and time for the others).
 */

const text = z.string().max(100_000);
const PostmarkRecord = z.object({
  RecordType: text,
  ID: z.union([z.number(), text]).optional(),
  MessageID: text.optional(),
  Type: text.optional(),
  TypeCode: z.number().optional(),
  Email: text.optional(),
  Recipient: text.optional(),
  Details: text.optional(),
  Description: text.optional(),
  DeliveredAt: text.optional(),
  BouncedAt: text.optional(),
  ChangedAt: text.optional(),
  SuppressSending: z.boolean().optional(),
  SuppressionReason: text.nullish(),
  Content: z.string().max(1_000_000).nullish(),
});
type PostmarkRecord = z.infer<typeof PostmarkRecord>;

/** Bounce types by TypeCode, for a record that gives the code only. */
const TYPE_BY_CODE: Record<number, string> = {
  1: 'HardBounce', 2: 'Transient', 16: 'Unsubscribe', 32: 'Subscribe', 64: 'AutoResponder', 128: 'AddressChange', 256: 'DnsError',
  512: 'SpamNotification', 1024: 'OpenRelayTest', 2048: 'Unknown', 4096: 'SoftBounce', 8192: 'VirusNotification', 16384: 'ChallengeVerification',
  100000: 'BadEmailAddress', 100001: 'SpamComplaint', 100002: 'ManuallyDeactivated', 100003: 'Unconfirmed', 100006: 'Blocked', 100007: 'SMTPApiError',
  100008: 'InboundError', 100009: 'DMARCPolicy', 100010: 'TemplateRenderingFailed',
};
/** The address does not exist: the email is BOUNCED and the address suppressed. */
const HARD = new Set(['HardBounce', 'BadEmailAddress']);
/** The mailbox failed for now (full, its domain's DNS): recorded, counted towards the soft-bounce limit. */
const SOFT = new Set(['SoftBounce', 'Transient', 'DnsError']);
/** Not a bounce of a message we sent (an auto-reply, a challenge, ...): acknowledged and ignored. */
const NOT_BOUNCES = new Set(['AutoResponder', 'Subscribe', 'AddressChange', 'OpenRelayTest', 'ChallengeVerification', 'Unconfirmed', 'InboundError']);

/** Our Message-ID among the headers of a bounce's content (the bounce's own Message-ID comes first and is not ours). */
function ourMessageIdIn(content: string | null | undefined): string | undefined {
  for (const m of (content ?? '').matchAll(/^Message-ID:\s*(<[^<>\s]+>)/gim)) if (parseOurMessageId(m[1])) return m[1];
  return undefined;
}

function bounceEffect(r: PostmarkRecord, type: string): ReportEffect | null {
  if (type === 'SpamComplaint') return { kind: 'complained', feedbackType: 'abuse', timestamp: r.BouncedAt };
  if (type === 'Unsubscribe') return { kind: 'unsubscribed', detail: 'Unsubscribe' };
  if (NOT_BOUNCES.has(type)) return null;
  const common = { bounceSubType: type, diagnosticCode: r.Details || r.Description, timestamp: r.BouncedAt };
  if (HARD.has(type)) return { kind: 'bounced', permanent: true, suppression: 'hard_bounce', ...common };
  // Blocked, SpamNotification, DMARCPolicy, Unknown, ...: about the message or the sender, not the mailbox.
  return { kind: 'bounced', permanent: false, ...(SOFT.has(type) ? { suppression: 'soft_bounce' as const } : {}), ...common };
}

/** The record of a request whose credentials were checked; 400 when the body is not JSON. */
export function readPostmarkRecord(rawBody: string): ProviderReport | SkippedEvent {
  const read = readWebhookEvent(PostmarkRecord, parseWebhookJson(rawBody, 'Postmark webhooks post one JSON record.'), 'RecordType');
  if ('skipped' in read) return read;
  const r = read.event;
  const recipient = r.Email ?? r.Recipient;
  const find = { providerMessageId: r.MessageID, recipient, messageIdHeader: ourMessageIdIn(r.Content) };
  const missingId = (what: string): SkippedEvent => ({ skipped: 'invalid', type: r.RecordType, detail: `${what} is missing` });
  switch (r.RecordType) {
    case 'Delivery':
      if (!r.MessageID) return missingId('MessageID');
      return { ...find, type: 'Delivery', eventId: `Delivery:${r.MessageID}:${recipient ?? ''}`, effect: { kind: 'delivered', at: r.DeliveredAt, smtpResponse: r.Details } };
    case 'Bounce':
    case 'SpamComplaint': {
      if (r.ID === undefined) return missingId('ID');
      // A SpamComplaint record is a complaint whatever its TypeCode says (Postmark's examples give 512, SpamNotification's code).
      const bounceType = r.RecordType === 'SpamComplaint' ? 'SpamComplaint' : (r.Type ?? (r.TypeCode !== undefined ? TYPE_BY_CODE[r.TypeCode] : undefined) ?? 'Unknown');
      const effect = bounceEffect(r, bounceType);
      const eventId = `${r.RecordType}:${r.ID}`;
      if (!effect) return { skipped: 'ignored', type: `${r.RecordType}/${bounceType}`, eventId };
      return { ...find, type: `${r.RecordType}/${bounceType}`, eventId, effect };
    }
    case 'SubscriptionChange': {
      if (!r.MessageID) return missingId('MessageID');
      const eventId = `SubscriptionChange:${r.MessageID}:${recipient ?? ''}:${r.ChangedAt ?? ''}`;
      // A reactivation (SuppressSending false) does not resubscribe anyone: subscribing is the contact's own act.
      if (!r.SuppressSending) return { skipped: 'ignored', type: 'SubscriptionChange', eventId };
      return { ...find, type: 'SubscriptionChange', eventId, effect: { kind: 'unsubscribed', detail: r.SuppressionReason ?? 'SubscriptionChange' } };
    }
    default:
      return { skipped: 'ignored', type: r.RecordType };
  }
}
