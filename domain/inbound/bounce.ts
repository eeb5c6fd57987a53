import { findReturnPathTokens, findUnsubscribeAddressToken } from './return-path';
import { addressIn, field, fieldGroups, headerBlock, messageId, returnedOriginal, untyped, type Field, type ReturnedOriginal } from './report-fields';
import type { BounceFindings, BounceRecipient, MessageView } from './inbound-message';

/**
 * Bounces: RFC 3464 delivery-status reports read field by field, and the bounces of mail systems that send none
 * (qmail and its descendants, old Exchange, some providers' plain "failure notice") read from their text.
 *
 * Hard or soft follows the issue's rule, the same for both: a failed recipient with a 5.x.x status is hard, a delayed
 * one or a failed one with a 4.x.x status is soft. The status is the report's; where a report (or a text) has none,
 * it is taken from the SMTP reply it quotes, then from what the text says. Mailbox-full is 5.2.2 from some servers and
 * 4.2.2 from others; the status decides, so one relay's full mailbox is hard and another's soft, as those servers meant.
 */

const SUMMARY_CHARS = 500;
const DIAGNOSTIC_CHARS = 500;

/**
 * Status patterns for the reply classes `classes`: an enhanced status right after a basic reply code (`550 5.1.1`,
 * `550-5.1.1`, the surest one in free text), an enhanced status alone (not part of an IP address or a date), and a
 * basic reply code followed by its text (`554 delivery error`, `550-Mailbox unknown`).
 */
function statusPatterns(classes: string) {
  return {
    replyWithEnhanced: new RegExp(`(?<![\\w.])[245]\\d\\d[ -]([${classes}])\\.(\\d{1,3})\\.(\\d{1,3})(?![\\d.])`),
    enhanced: new RegExp(`(?<![\\d.])([${classes}])\\.(\\d{1,3})\\.(\\d{1,3})(?![\\d.])`),
    basic: new RegExp(`(?<![\\w.#])([${classes}])[0-5]\\d[-: ]+(?=[A-Za-z<"'(])`),
  };
}
/** In a report's Status and Diagnostic-Code fields, any class. */
const REPORT_STATUS = statusPatterns('245');
/** In free text, failures only: a 2.x.x there is more likely a version number than a status. */
const TEXT_STATUS = statusPatterns('45');

const normal = (m: RegExpExecArray): string => `${m[1]}.${Number(m[2])}.${Number(m[3])}`;

/** The enhanced status `text` states or implies: an enhanced code (after a reply code first), else a basic code's class. */
function statusIn(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const enhanced = REPORT_STATUS.replyWithEnhanced.exec(text) ?? REPORT_STATUS.enhanced.exec(text);
  if (enhanced) return normal(enhanced);
  const basic = REPORT_STATUS.basic.exec(text);
  return basic ? `${basic[1]}.0.0` : undefined;
}

const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

function summarize(recipients: readonly BounceRecipient[]): string {
  const lines = recipients.map((r) => `${r.recipient ?? 'unknown recipient'}: ${r.action} ${r.status}${r.diagnosticCode ? ` (${r.diagnosticCode})` : ''}`);
  return clip(lines.join('; '), SUMMARY_CHARS);
}

/** Hard if any recipient failed with a 5.x.x status; transient when every one is only delayed. */
function verdict(recipients: readonly BounceRecipient[]): Pick<BounceFindings, 'bounceType' | 'transient'> {
  const hard = recipients.some((r) => r.action === 'failed' && r.status.startsWith('5.'));
  return { bounceType: hard ? 'hard' : 'soft', transient: recipients.length > 0 && recipients.every((r) => r.action === 'delayed') };
}

const SUCCESS_ACTIONS = new Set(['delivered', 'relayed', 'expanded']);

function recipientOf(group: readonly Field[]): BounceRecipient | 'success' | null {
  const recipient = untyped(field(group, 'final-recipient')) ?? untyped(field(group, 'original-recipient'));
  const action = field(group, 'action')?.toLowerCase().match(/^[a-z-]+/)?.[0];
  if (action && SUCCESS_ACTIONS.has(action)) return 'success';
  const diagnosticCode = untyped(field(group, 'diagnostic-code'));
  const stated = statusIn(field(group, 'status'));
  const quoted = statusIn(diagnosticCode);
  // Exim states only the class (5.0.0, 4.0.0) and quotes the remote server's precise status in Diagnostic-Code.
  let status = stated?.endsWith('.0.0') && quoted?.[0] === stated[0] ? quoted : (stated ?? quoted);
  let act: BounceRecipient['action'];
  if (action === 'failed' || action === 'delayed') act = action;
  else if (status?.startsWith('5.')) act = 'failed';
  else if (status?.startsWith('4.')) act = 'delayed';
  else return null;
  // Failed with a 2.x.x status (seen from broken MTAs) or none: the action is the surer word.
  if (!status || status.startsWith('2.')) status = act === 'failed' ? '5.0.0' : '4.0.0';
  const r: BounceRecipient = { recipient: recipient ?? null, action: act, status };
  if (diagnosticCode) r.diagnosticCode = clip(diagnosticCode, DIAGNOSTIC_CHARS);
  const remoteMta = untyped(field(group, 'remote-mta'));
  if (remoteMta) r.remoteMta = remoteMta;
  return r;
}

/** The original's Message-ID and a return path token, from the returned original, then the given fallbacks. */
function originalIds(
  original: ReturnedOriginal | null,
  texts: readonly string[],
  ids: readonly (string | undefined)[],
): Pick<BounceFindings, 'originalMessageId' | 'originalEnvelopeToken' | 'originalUnsubscribeToken'> {
  const out: Pick<BounceFindings, 'originalMessageId' | 'originalEnvelopeToken' | 'originalUnsubscribeToken'> = {};
  const id = messageId(original ? field(original.fields, 'message-id') : undefined) ?? ids.map(messageId).find(Boolean);
  if (id) out.originalMessageId = id;
  const unsubscribe = original ? findUnsubscribeAddressToken(original.headerText) : undefined;
  if (unsubscribe) out.originalUnsubscribeToken = unsubscribe;
  for (const text of original ? [original.headerText, ...texts] : texts) {
    const token = findReturnPathTokens(text, 1)[0];
    if (token) {
      out.originalEnvelopeToken = token;
      break;
    }
  }
  return out;
}

/**
 * The bounce a delivery-status report describes. `delivery_notification` when it reports only deliveries (a DSN
 * asked for with NOTIFY=SUCCESS, or a relay's "relayed" notice); null when it names no recipient at all (a broken
 * report: the caller reads the message's text instead).
 */
export function readDeliveryStatus(view: MessageView, report: Buffer): BounceFindings | 'delivery_notification' | null {
  const reportText = report.toString('utf8');
  const groups = fieldGroups(reportText);
  const perMessage: Field[] = [];
  const recipients: BounceRecipient[] = [];
  let successes = 0;
  for (const group of groups) {
    const isRecipient = group.some((f) => f.name === 'final-recipient' || f.name === 'original-recipient' || f.name === 'action');
    if (!isRecipient) {
      perMessage.push(...group);
      continue;
    }
    const r = recipientOf(group);
    if (r === 'success') successes++;
    else if (r) recipients.push(r);
  }
  if (!recipients.length) return successes ? 'delivery_notification' : null;
  const findings: BounceFindings = { format: 'rfc3464', recipients, ...verdict(recipients), summary: summarize(recipients) };
  const reportingMta = untyped(field(perMessage, 'reporting-mta'));
  if (reportingMta) findings.reportingMta = reportingMta;
  const envelopeId = untyped(field(perMessage, 'original-envelope-id'));
  if (envelopeId) findings.originalEnvelopeId = envelopeId;
  const original = returnedOriginal(view.parts);
  // Gmail states the original's id in the report; Exchange answers the original with In-Reply-To.
  Object.assign(findings, originalIds(original, [reportText], [field(perMessage, 'x-original-message-id'), view.common.inReplyTo ?? undefined]));
  return findings;
}

/** Where a mail system's text stops explaining and quotes the message it returns. */
const COPY_MARKER_RE =
  /^[ \t]*(?:-{2,}[ \t]*(?:Below this line is a copy of the message|This is a copy of the message|Original message|Undelivered message|Forwarded message|Returned message)|(?:Original message (?:headers|follows)|-+ ?Original Message ?-+|-+ ?Ursprüngliche Nachricht ?-+))/im;

/** Text that says the mail system is still trying: a delay notice, not a failure. */
const DELAY_RE =
  /\b(?:delayed|deferred|has not (?:yet )?been delivered|not yet been delivered|(?:is|are) still (?:being retried|in the queue)|will (?:continue|keep) (?:to )?(?:try|retry|be attempted)|will continue to be attempted|attempts will continue|will (?:be )?retr(?:y|ied)|delay (?:notification|warning)|still trying)\b|\(delay\)/i;
/** Text that says the mailbox is over its quota. */
const QUOTA_RE = /\b(?:mailbox (?:is )?full|over (?:the )?quota|overquota|quota (?:exceeded|full)|exceeded (?:the |its |their )?(?:storage|quota)|insufficient (?:system )?storage|mailbox size limit)\b/i;
/** Text that says the address does not exist: an unknown user, mailbox, domain. */
const NO_MAILBOX_RE =
  /\b(?:user unknown|unknown (?:user|recipient|mailbox|address)|no such (?:user|mailbox|recipient|address|account)|(?:user|mailbox|account|address|recipient)(?: address)? (?:is )?(?:unavailable|not found|does ?n[o']t exist|disabled|invalid|unknown)|does ?n[o']t have an? [\w.-]{1,64} account|invalid (?:recipient|address|mailbox|user)|recipient (?:address )?rejected|addressee unknown|no mailbox|not a valid (?:recipient|mailbox|user|address))\b/i;
const NO_DOMAIN_RE = /\b(?:(?:host|domain) (?:not found|unknown|name not found)|no such domain|unrouteable (?:address|domain|mail domain)|unroutable (?:address|domain)|name or service not known)\b/i;
const PERMANENT_RE =
  /\b(?:permanent(?:ly)? (?:error|failure|fatal)|failed permanently|fatal errors?|could ?n[o']t be delivered|wasn't delivered|was not delivered|undeliverable|delivery (?:has )?failed|unable to deliver|cannot be reached|given up)\b/i;

/** Without a status code, what the text says, most specific first, and the status we infer from it. */
const PHRASES: readonly [RegExp, BounceRecipient['action'], string][] = [
  [DELAY_RE, 'delayed', '4.0.0'],
  [QUOTA_RE, 'failed', '4.2.2'],
  [NO_MAILBOX_RE, 'failed', '5.1.1'],
  [NO_DOMAIN_RE, 'failed', '5.1.2'],
  [PERMANENT_RE, 'failed', '5.0.0'],
];

/** A mailbox address in free text (no quoted local parts: bounces do not write them). */
const ADDRESS = "[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)+";
/** Ways mail systems write the failed address: qmail and Postfix `<addr>:`, Sendmail `<addr>... reason`, then prose. */
const RECIPIENT_RES = [
  new RegExp(`^[ \\t]*<(${ADDRESS})>:`, 'm'),
  new RegExp(`^[ \\t]*<?(${ADDRESS})>?\\.\\.\\. `, 'm'),
  new RegExp(
    `(?:following (?:address|recipient)|could ?n[o']t be delivered to|was ?n[o']t delivered to|not (?:yet )?(?:been |be )?delivered to|(?:unable|not able|failed) to deliver (?:your message |the message )?to|delivery to|(?:message|mail) (?:to|for))[^@\\n]{0,200}?(?:\\n[^@\\n]{0,200}?){0,3}?<?(${ADDRESS})`,
    'i',
  ),
];

const TEXT_CHARS = 64 * 1024;
/** The failed address is named near the top; the prose patterns backtrack, so they get a shorter text. */
const RECIPIENT_SCAN_CHARS = 8 * 1024;

/** The line of `text` where `index` falls, trimmed: the reason a bounce gives, for diagnosticCode. */
function lineAt(text: string, index: number): string {
  const start = text.lastIndexOf('\n', index) + 1;
  const end = text.indexOf('\n', index);
  return text.slice(start, end === -1 ? undefined : end).trim();
}

/** The action and status a mail system's text states, and the line that says it; null when it states no failure. */
function statusFromText(text: string): { action: BounceRecipient['action']; status: string; line: string } | null {
  const delayed = DELAY_RE.test(text);
  for (const re of [TEXT_STATUS.replyWithEnhanced, TEXT_STATUS.enhanced]) {
    const m = re.exec(text);
    if (m) return { action: m[1] === '4' && delayed ? 'delayed' : 'failed', status: normal(m), line: lineAt(text, m.index) };
  }
  const basic = TEXT_STATUS.basic.exec(text);
  if (basic) return { action: basic[1] === '4' && delayed ? 'delayed' : 'failed', status: `${basic[1]}.0.0`, line: lineAt(text, basic.index) };
  for (const [re, action, status] of PHRASES) {
    const m = re.exec(text);
    if (m) return { action, status, line: lineAt(text, m.index) };
  }
  return null;
}

/**
 * A bounce read from the text of a mail system's message that is no RFC 3464 report (format `heuristic`), or null
 * when its text states no failure. Only the explanation counts: a returned copy of the original (qmail's "Below this
 * line is a copy of the message") is read for its Message-ID, To and return path, never for status words.
 */
export function readBounceText(view: MessageView): BounceFindings | null {
  const body = view.bodyText().slice(0, TEXT_CHARS);
  const copyAt = COPY_MARKER_RE.exec(body)?.index ?? -1;
  const explanation = copyAt === -1 ? body : body.slice(0, copyAt);
  const found = statusFromText(`${view.common.subject}\n${explanation}`);
  if (!found) return null;
  const copyStart = copyAt === -1 ? -1 : body.indexOf('\n', copyAt);
  const copy = copyStart === -1 ? null : headerBlock(body.slice(copyStart + 1).replace(/^\s*\n/, ''));
  const original = returnedOriginal(view.parts) ?? (copy?.fields.length ? copy : null);
  const recipient =
    RECIPIENT_RES.map((re) => re.exec(explanation.slice(0, RECIPIENT_SCAN_CHARS))?.[1]).find(Boolean) ??
    addressIn(original ? field(original.fields, 'to') : undefined);
  const r: BounceRecipient = { recipient: recipient ?? null, action: found.action, status: found.status };
  if (found.line) r.diagnosticCode = clip(found.line, DIAGNOSTIC_CHARS);
  const recipients = [r];
  return {
    format: 'heuristic',
    recipients,
    ...verdict(recipients),
    summary: summarize(recipients),
    ...originalIds(original, [body], [view.common.inReplyTo ?? undefined]),
  };
}
