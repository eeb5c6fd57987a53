import { emailDomain } from '../contacts/email-address';

/**
 * Message-IDs derive from the email id, so a receiver can de-duplicate a message a retry sent twice. A module of its
 * own: the campaign render threads compose with it, and delivery.ts brings the database layer with it.
 */
export function messageIdFor(emailId: string, fromEmail: string): string {
  return `<${emailId}@${emailDomain(fromEmail) || 'mailwright.local'}>`;
}
