/**
 * What an inbound message is (classify.ts), as plain data: strings, arrays and numbers only, so an activity can
 * return it to a workflow and it can be stored as JSON without a Date turning into a string on the way.
 */

/** The SMTP envelope the message came with. */
export interface InboundEnvelope {
  /** `MAIL FROM`; empty (or `<>`) for the null sender that bounces, reports and RFC 3834 responders use. */
  mailFrom: string;
  rcptTo: string[];
}

export interface Mailbox {
  address: string;
  /** The display name, decoded; empty when there is none. */
  name: string;
}

/** Read from every message that has headers at all. */
export interface InboundCommon {
  /** The first address of `From`. */
  from: Mailbox | null;
  /** Decoded (RFC 2047, raw 8-bit taken as UTF-8); empty when absent. */
  subject: string;
  messageId: string | null;
  /** ISO 8601; null when the header is absent or not a date. */
  date: string | null;
  /** Replies, auto-replies and some non-RFC-3464 bounces (Exchange) name the message they answer here. */
  inReplyTo: string | null;
  references: string[];
}

/** One recipient a bounce reports as not (yet) delivered. */
export interface BounceRecipient {
  /** Null when the report or text does not name it (the return path still names the email, and so its recipient). */
  recipient: string | null;
  /** `failed`: given up; `delayed`: the reporting MTA is still trying. */
  action: 'failed' | 'delayed';
  /** RFC 3463 enhanced status, `class.subject.detail` (the class decides hard or soft). */
  status: string;
  /** The remote server's reply or the reporting MTA's reason, without its `smtp;` type. */
  diagnosticCode?: string;
  remoteMta?: string;
}

export interface InboundBounce extends InboundCommon {
  kind: 'bounce';
  /** `rfc3464`: read from a delivery-status report; `heuristic`: inferred from the text of a mail system's message. */
  format: 'rfc3464' | 'heuristic';
  /** The recipients not delivered, at least one (a heuristic bounce has exactly one). */
  recipients: BounceRecipient[];
  /**
   * `hard`: a recipient failed with a 5.x.x status (the address is not to be mailed again); `soft`: delayed, or failed
   * with a 4.x.x status (given up on this message, the address may be fine).
   */
  bounceType: 'hard' | 'soft';
  /** Every recipient is `delayed`: the message may still arrive. */
  transient: boolean;
  reportingMta?: string;
  /** The Message-ID of the message that bounced: from the returned original, else the report, else In-Reply-To. */
  originalMessageId?: string;
  /** A local part shaped like our return path found in the returned message or report (unverified: parseReturnPath). */
  originalEnvelopeToken?: string;
  /** A local part shaped like our unsubscribe address in the returned original's headers (unverified: parseUnsubscribeAddress). */
  originalUnsubscribeToken?: string;
  /** RFC 3461 ENVID as the report quotes it (`Original-Envelope-Id`), when the sender set one. */
  originalEnvelopeId?: string;
  /** One line for people: each recipient with its action, status and reason. */
  summary: string;
}

export interface InboundComplaint extends InboundCommon {
  kind: 'complaint';
  format: 'arf';
  /** Lowercased `Feedback-Type`: `abuse`, `fraud`, `virus`, `other` (or an extension). */
  feedbackType: string;
  userAgent?: string;
  reportingMta?: string;
  sourceIp?: string;
  arrivalDate?: string;
  /** The envelope sender of the reported message: our return path, when the report quotes it. */
  originalMailFrom?: string;
  /** `Original-Rcpt-To`, else the returned original's `To` (providers often redact both). */
  originalRecipient?: string;
  originalMessageId?: string;
  originalEnvelopeToken?: string;
  /** A local part shaped like our unsubscribe address in the returned original's headers (unverified). */
  originalUnsubscribeToken?: string;
  /** Whether the report returned the original message or its headers (RFC 5965 makes it optional in practice). */
  hasOriginal: boolean;
}

/** Which signal made a message an auto-reply; `detail` holds the header value or subject that matched. */
export type AutoReplyReason = 'auto-submitted' | 'x-autoreply' | 'precedence' | 'subject';

interface InboundAutoReply extends InboundCommon {
  kind: 'auto-reply';
  reason: AutoReplyReason;
  detail: string;
}

interface InboundReply extends InboundCommon {
  kind: 'reply';
  from: Mailbox;
  /** The new text of the reply, at most REPLY_EXCERPT_CHARS: quoted lines, attributions and signatures left out. */
  excerpt: string;
}

/** Why a message is none of the kinds above; a closed set, so it can be a metric label. */
export type UnknownReason =
  | 'empty'
  | 'unparseable'
  | 'no_sender'
  | 'not_a_reply'
  | 'daemon_unrecognised'
  | 'delivery_notification'
  | 'feedback_not_complaint'
  | 'unsupported_report'
  | 'internal_error';

export interface InboundUnknown extends InboundCommon {
  kind: 'unknown';
  reason: UnknownReason;
  detail?: string;
}

export type InboundMessage = InboundBounce | InboundComplaint | InboundAutoReply | InboundReply | InboundUnknown;

/** A bounce or complaint without the common fields, as the readers produce it before classify adds them. */
export type BounceFindings = Omit<InboundBounce, keyof InboundCommon | 'kind'>;
export type ComplaintFindings = Omit<InboundComplaint, keyof InboundCommon | 'kind'>;

/** What the readers get from classify: the parsed message, reduced to what they read. */
export interface MessageView {
  envelope: InboundEnvelope;
  common: InboundCommon;
  /** The first value of a top-level header as text (lowercase name), undefined when absent. */
  header(name: string): string | undefined;
  /** Lowercase names of the top-level headers. */
  headerNames: readonly string[];
  /** Top-level content type and its `report-type`, lowercased. */
  contentType: string;
  reportType: string | undefined;
  /** The leaf parts mailparser did not take as body text, in order; an embedded message is one part, unopened. */
  parts: readonly { contentType: string; content: Buffer }[];
  /** The message's own body text (its text parts, else its HTML as text), bounded; computed on first use. */
  bodyText(): string;
  /** `From` is a mail system (MAILER-DAEMON, postmaster, "Mail Delivery Subsystem"), not a person. */
  fromMailSystem: boolean;
  /** The envelope sender is null (`<>`). */
  nullSender: boolean;
}
