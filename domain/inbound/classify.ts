import { simpleParser, type HeaderValue, type ParsedMail, type SimpleParserOptions } from 'mailparser';
import { compile as compileHtmlToText } from 'html-to-text';
import { autoReplySignal } from './auto-reply';
import { readBounceText, readDeliveryStatus } from './bounce';
import { readFeedbackReport } from './complaint';
import { replyExcerpt } from './reply';
import type { InboundCommon, InboundEnvelope, InboundMessage, InboundUnknown, Mailbox, MessageView, UnknownReason } from './inbound-message';

/**
 * What an inbound message is: a bounce, a complaint, an auto-reply, a reply, or unknown (inbound-message.ts), from
 * its raw bytes and SMTP envelope. Pure: no lookups and no secrets, so it is unit-tested on fixtures and whoever
 * calls it decides what the message may change (return-path.ts verifies the tokens it finds).
 *
 * Precedence, each step only when the ones before found nothing:
 * 1. reports: a delivery-status report (RFC 3464) is a bounce, a feedback report (RFC 5965) a complaint, whatever
 *    else the message says, since a report is the one thing a machine wrote for machines;
 * 2. auto-replies (RFC 3834 and older markers, out-of-office subjects): never bounces, even when their text says
 *    "mailbox full";
 * 3. bounces without a report, read from their text, only from a mail system (MAILER-DAEMON, postmaster) or the null
 *    sender. Postfix and Exim mark their bounces `Auto-Submitted: auto-replied`, so a message from a mail system whose
 *    only auto-reply signal is that header is read as a bounce first, and is an auto-reply only if its text is none;
 * 4. replies: a person's message with In-Reply-To, References or a reply subject;
 * 5. unknown, with a reason from a closed set.
 *
 * mailparser reads the MIME (charsets, RFC 2047 and 2231, transfer encodings, format=flowed) with two settings that
 * keep reports readable: delivery-status parts stay parts instead of joining the body text, and an embedded message
 * stays one opaque part even when marked inline, instead of its text merging into the bounce's. Its limits bound
 * the work on hostile input: a header block over MAX_HEAD_BYTES or more than MAX_PARTS parts (which also bounds
 * nesting) is `unparseable`. classifyInbound never rejects.
 */

/** Bytes of one MIME header block; a real one is a few kilobytes, Received chains included. */
const MAX_HEAD_BYTES = 256 * 1024;
/** MIME parts of one message; reports have three or four, newsletters with images a few dozen. */
const MAX_PARTS = 256;
/** Characters of body text the readers get. */
const BODY_TEXT_CHARS = 64 * 1024;
/** Characters of HTML turned into text when a message has no text part. */
const HTML_CHARS = 256 * 1024;
const SUBJECT_CHARS = 998;
const NAME_CHARS = 256;
const MAX_REFERENCES = 100;

/** Options mailparser passes on to its MIME splitter (mailsplit), which its types do not list. */
interface ParserOptions extends SimpleParserOptions {
  ignoreEmbedded: boolean;
  maxHeadSize: number;
  maxChildNodes: number;
}

const PARSER_OPTIONS: ParserOptions = {
  keepDeliveryStatus: true,
  ignoreEmbedded: true,
  skipHtmlToText: true,
  skipImageLinks: true,
  skipTextToHtml: true,
  skipTextLinks: true,
  maxHeadSize: MAX_HEAD_BYTES,
  maxChildNodes: MAX_PARTS,
};

/** HTML bodies as text without what a reply quotes: blockquotes and Gmail's quote block go, links keep their text. */
const htmlToText = compileHtmlToText({
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { ignoreHref: true } },
    { selector: 'img', format: 'skip' },
    { selector: 'blockquote', format: 'skip' },
    { selector: 'div.gmail_quote', format: 'skip' },
  ],
});

const DSN_PART_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const DSN_REPORT_TYPES = new Set(['delivery-status', 'global-delivery-status']);
const ARF_PART_TYPE = 'message/feedback-report';

/** Local parts and display names of mail systems: what bounces come from. */
const MAIL_SYSTEM_LOCAL_RE = /^(?:mailer-daemon|mailerdaemon|mail-daemon|maildaemon|postmaster|mdaemon|double-bounce)$/i;
const MAIL_SYSTEM_NAME_RE = /\b(?:mail delivery (?:sub)?system|mailer[- ]daemon|postmaster|mail administrator)\b/i;
/** Reply and forward prefixes of common clients and languages: Re, AW and WG (German), SV/VS (Nordic), R/RIF (Italian), TR (French), ... */
const REPLY_PREFIX = '(?:re|aw|sv|vs|antw|antwort|odp|rif|r|res|ref|ynt|atb|回复|回覆|答复)';
const FORWARD_PREFIX = '(?:fwd?|wg|tr|rv|i|doorst|vs|pd|enc)';
const REPLY_SUBJECT_RE = new RegExp(`^\\s*${REPLY_PREFIX}\\s*(?:\\[\\d+\\]|\\(\\d+\\))?\\s*[:：]`, 'i');
const REPLY_OR_FORWARD_SUBJECT_RE = new RegExp(`^\\s*(?:${REPLY_PREFIX}|${FORWARD_PREFIX})\\s*(?:\\[\\d+\\]|\\(\\d+\\))?\\s*[:：]`, 'i');

const EMPTY_COMMON: InboundCommon = { from: null, subject: '', messageId: null, date: null, inReplyTo: null, references: [] };

const unknown = (common: InboundCommon, reason: UnknownReason, detail?: string): InboundUnknown =>
  detail === undefined ? { ...common, kind: 'unknown', reason } : { ...common, kind: 'unknown', reason, detail: detail.slice(0, 500) };

/** What an inbound message is; never rejects (garbage is `unknown` with a reason). */
export async function classifyInbound(raw: Buffer, envelope: InboundEnvelope): Promise<InboundMessage> {
  if (raw.findIndex((byte) => byte > 0x20) === -1) return unknown(EMPTY_COMMON, 'empty');
  let mail: ParsedMail;
  try {
    mail = await simpleParser(raw, PARSER_OPTIONS);
  } catch (err) {
    return unknown(EMPTY_COMMON, 'unparseable', err instanceof Error ? err.message : String(err));
  }
  let common = EMPTY_COMMON;
  try {
    const view = messageView(mail, envelope);
    common = view.common;
    return classifyView(view, mail);
  } catch (err) {
    // Nothing above should throw; if it does, the message is recorded as such instead of failing its workflow forever.
    return unknown(common, 'internal_error', err instanceof Error ? err.message : String(err));
  }
}

function classifyView(view: MessageView, mail: ParsedMail): InboundMessage {
  const { common } = view;
  if (!mail.headerLines?.length && !view.bodyText().trim() && !view.parts.length) return unknown(common, 'empty');

  const dsnPart = view.parts.find((p) => DSN_PART_TYPES.has(p.contentType));
  const arfPart = view.parts.find((p) => p.contentType === ARF_PART_TYPE);
  const isReport = view.contentType === 'multipart/report';
  const dsn = isReport && view.reportType !== undefined ? DSN_REPORT_TYPES.has(view.reportType) : dsnPart !== undefined;
  const arf = isReport && view.reportType !== undefined ? view.reportType === 'feedback-report' : !dsn && arfPart !== undefined;

  if (arf) {
    if (!arfPart) return unknown(common, 'unsupported_report', 'a feedback report without its message/feedback-report part');
    const findings = readFeedbackReport(view, arfPart.content);
    return 'notComplaint' in findings ? unknown(common, 'feedback_not_complaint', findings.notComplaint) : { ...common, kind: 'complaint', ...findings };
  }
  if (dsn) {
    const findings = dsnPart ? readDeliveryStatus(view, dsnPart.content) : null;
    if (findings === 'delivery_notification') return unknown(common, 'delivery_notification');
    // A report that names no recipient is read like any mail system's bounce: by its text.
    const bounce = findings ?? readBounceText(view);
    return bounce ? { ...common, kind: 'bounce', ...bounce } : unknown(common, 'daemon_unrecognised', 'a delivery-status report that names no failed recipient');
  }
  if (isReport) return unknown(common, 'unsupported_report', view.reportType ?? 'no report-type');

  const auto = autoReplySignal(view);
  if (auto && !(view.fromMailSystem && auto.reason === 'auto-submitted')) return { ...common, kind: 'auto-reply', ...auto };
  // A person's Re:/Fwd: is no bounce even from the null sender (a forwarded bounce quotes "user unknown" too).
  if (view.fromMailSystem || (view.nullSender && !REPLY_OR_FORWARD_SUBJECT_RE.test(common.subject))) {
    const bounce = readBounceText(view);
    if (bounce) return { ...common, kind: 'bounce', ...bounce };
  }
  if (auto) return { ...common, kind: 'auto-reply', ...auto };
  if (view.fromMailSystem) return unknown(common, 'daemon_unrecognised');
  if (!common.from) return unknown(common, 'no_sender');
  if (common.inReplyTo || common.references.length || REPLY_SUBJECT_RE.test(common.subject)) {
    return { ...common, kind: 'reply', from: common.from, excerpt: replyExcerpt(view.bodyText()) };
  }
  return unknown(common, 'not_a_reply');
}

/** A header value as text: the first of several, a structured header's main value, an address list's text. */
function headerText(value: HeaderValue | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  if (first === undefined || first === null) return undefined;
  if (typeof first === 'string') return first;
  if (first instanceof Date) return first.toISOString();
  if (typeof first.value === 'string') return first.value;
  return 'text' in first ? first.text : undefined;
}

function firstMailbox(mail: ParsedMail): Mailbox | null {
  for (const entry of mail.from?.value ?? []) {
    for (const box of [entry, ...(entry.group ?? [])]) {
      if (box.address) return { address: box.address, name: (box.name ?? '').slice(0, NAME_CHARS) };
    }
  }
  return null;
}

/** The Date header as ISO 8601, or null: mailparser puts the current time in place of a missing or broken one. */
function dateOf(mail: ParsedMail): string | null {
  const line = mail.headerLines?.find((l) => l.key === 'date')?.line;
  const time = line ? Date.parse(line.slice(line.indexOf(':') + 1).replace(/\s+/g, ' ').trim()) : NaN;
  return Number.isFinite(time) ? new Date(time).toISOString() : null;
}

function messageView(mail: ParsedMail, envelope: InboundEnvelope): MessageView {
  const references = ([] as string[]).concat(mail.references ?? []).filter((id) => /^<[^<>\s]+>$/.test(id));
  const common: InboundCommon = {
    from: firstMailbox(mail),
    subject: (mail.subject ?? '').slice(0, SUBJECT_CHARS),
    messageId: mail.messageId ?? null,
    date: dateOf(mail),
    inReplyTo: headerText(mail.inReplyTo)?.match(/<[^<>\s]+>/)?.[0] ?? null,
    // The newest are last, and the message answered is among them.
    references: references.slice(-MAX_REFERENCES),
  };
  const contentType = mail.headers.get('content-type') as { value?: string; params?: Record<string, string> } | undefined;
  const local = common.from?.address.replace(/@[^@]*$/, '') ?? '';
  let text: string | undefined;
  return {
    envelope,
    common,
    header: (name) => headerText(mail.headers.get(name)),
    headerNames: [...mail.headers.keys()],
    contentType: (contentType?.value ?? 'text/plain').toLowerCase(),
    reportType: contentType?.params?.['report-type']?.toLowerCase(),
    parts: mail.attachments.map((a) => ({ contentType: (a.contentType ?? '').toLowerCase(), content: a.content })),
    bodyText() {
      text ??= (mail.text?.trim() ? mail.text : typeof mail.html === 'string' ? htmlToText(mail.html.slice(0, HTML_CHARS)) : '').slice(0, BODY_TEXT_CHARS);
      return text;
    },
    fromMailSystem: MAIL_SYSTEM_LOCAL_RE.test(local) || MAIL_SYSTEM_NAME_RE.test(common.from?.name ?? ''),
    nullSender: envelope.mailFrom.replace(/[<>\s]/g, '') === '',
  };
}
