import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { messageIdFor } from '../emails/message-id';
import { parseOurMessageId } from '../webhooks/ses-reports';
import type { InboundBounce, InboundComplaint } from './inbound-message';

/**
 * The last proof of a report read from the bounce mailbox (source `imap`, README › Bounce mailbox (IMAP)), used only
 * when no signed token names the email: the returned original's Message-ID is one of ours (the email's id at its
 * sender domain, exactly as we wrote it) AND the report names that email's recipient as the one that failed (DSN
 * Final-Recipient or Original-Recipient; ARF Original-Rcpt-To, else the original's To).
 *
 * Why it is enough there and not for the inbound SMTP server: the relay rewrote the envelope sender, so its bounces
 * reach the operator's own mailbox, which the relay writes to, instead of our signed return path. Message-IDs are not
 * secret, but a forger would need the email's Message-ID and its recipient, which only the recipient (or whoever saw
 * the message) has, and could only bounce that one address: the same reach as a return path quoted in a forged
 * report. A report naming another recipient changes nothing.
 */
export async function emailProvenByMessageId(tx: EntityManager, message: InboundBounce | InboundComplaint): Promise<string | undefined> {
  const ours = parseOurMessageId(message.originalMessageId);
  if (!ours) return undefined;
  const email = await sql(tx).one<{ id: string; fromEmail: string; toEmail: string }>(`select id, from_email as "fromEmail", to_email as "toEmail" from emails where id = $1`, [ours.emailId]);
  if (!email || messageIdFor(email.id, email.fromEmail).toLowerCase() !== ours.messageId) return undefined;
  const named = message.kind === 'bounce' ? message.recipients.map((r) => r.recipient) : [message.originalRecipient];
  const to = email.toEmail.toLowerCase();
  return named.some((r) => r?.trim().toLowerCase() === to) ? email.id : undefined;
}
