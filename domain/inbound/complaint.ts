import { findReturnPathTokens, findUnsubscribeAddressToken } from './return-path';
import { addressIn, field, fieldGroups, messageId, returnedOriginal, untyped } from './report-fields';
import type { ComplaintFindings, MessageView } from './inbound-message';

/**
 * Feedback reports (ARF, RFC 5965) as mailbox providers send them from their feedback loops. The report part is
 * what counts; the returned original is optional here, because providers strip or redact it, and a report without it
 * still names our return path in `Original-Mail-From`.
 */

/**
 * Feedback types that are not a recipient complaining: `not-spam` says the opposite, and `auth-failure` (RFC 6591) is
 * an authentication failure report about the sending domain, not about a contact.
 */
const NOT_COMPLAINTS = new Set(['not-spam', 'auth-failure']);

/** The complaint a feedback report describes; `feedback_not_complaint` for the report types above. */
export function readFeedbackReport(view: MessageView, report: Buffer): ComplaintFindings | { notComplaint: string } {
  const reportText = report.toString('utf8');
  const fields = fieldGroups(reportText).flat();
  // RFC 5965 requires Feedback-Type; a report without it is still a report from a feedback loop, and those are abuse.
  const feedbackType = field(fields, 'feedback-type')?.toLowerCase().match(/^[a-z0-9-]+/)?.[0] ?? 'abuse';
  if (NOT_COMPLAINTS.has(feedbackType)) return { notComplaint: feedbackType };
  const original = returnedOriginal(view.parts);
  const findings: ComplaintFindings = { format: 'arf', feedbackType, hasOriginal: original !== null };
  const set = <K extends keyof ComplaintFindings>(key: K, value: ComplaintFindings[K] | undefined) => {
    if (value !== undefined && value !== '') findings[key] = value;
  };
  set('userAgent', field(fields, 'user-agent'));
  set('reportingMta', untyped(field(fields, 'reporting-mta')));
  set('sourceIp', field(fields, 'source-ip'));
  set('arrivalDate', field(fields, 'arrival-date') ?? field(fields, 'received-date'));
  set('originalMailFrom', untyped(field(fields, 'original-mail-from')));
  set('originalRecipient', untyped(field(fields, 'original-rcpt-to')) ?? addressIn(original ? field(original.fields, 'to') : undefined));
  set('originalMessageId', messageId(original ? field(original.fields, 'message-id') : undefined));
  set('originalUnsubscribeToken', original ? findUnsubscribeAddressToken(original.headerText) : undefined);
  set('originalEnvelopeToken', findReturnPathTokens(reportText, 1)[0] ?? (original ? findReturnPathTokens(original.headerText, 1)[0] : undefined));
  return findings;
}
