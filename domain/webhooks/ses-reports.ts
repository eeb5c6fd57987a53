import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { z } from 'zod';
import { AppError, badRequest } from '../errors';
import { messageIdFor } from '../emails/message-id';
import { applyEmailReport, lockEmail, type EmailReport, type LockedEmail, type ReportEventRow } from '../emails/email-reports';
import { SNS_MESSAGE_RETENTION_MS } from './sns';
import { recordSoftBounce, suppress, type SoftBouncePolicy } from '../suppressions/suppression.service';

/**
 * Amazon SES delivery reports (Delivery, Bounce, Complaint), as SES publishes them to SNS: either identity
 * notifications (`notificationType`) or configuration-set event publishing (`eventType`), which share the
 * `mail` / `delivery` / `bounce` / `complaint` objects. Our email is found by its own Message-ID header, which
 * SES reports in `mail.commonHeaders` / `mail.headers` when "include original headers" is on.
 */

const text = z.string().max(10_000);
const SesMessageSchema = z.object({
  notificationType: z.string().optional(),
  eventType: z.string().optional(),
  mail: z.object({
    messageId: text.optional(),
    headers: z.array(z.object({ name: z.string(), value: z.string() })).optional(),
    commonHeaders: z.object({ messageId: text.optional() }).optional(),
  }),
  delivery: z
    .object({
      timestamp: text.optional(),
      smtpResponse: text.optional(),
      reportingMTA: text.optional(),
      processingTimeMillis: z.number().optional(),
    })
    .optional(),
  bounce: z
    .object({
      bounceType: text,
      bounceSubType: text.optional(),
      bouncedRecipients: z
        .array(z.object({ emailAddress: text, status: text.optional(), action: text.optional(), diagnosticCode: text.optional() }))
        .default([]),
      reportingMTA: text.optional(),
      feedbackId: text.optional(),
      timestamp: text.optional(),
    })
    .optional(),
  complaint: z
    .object({
      complainedRecipients: z.array(z.object({ emailAddress: text })).default([]),
      complaintFeedbackType: text.optional(),
      complaintSubType: text.nullish(),
      userAgent: text.optional(),
      arrivalDate: text.optional(),
      feedbackId: text.optional(),
      timestamp: text.optional(),
    })
    .optional(),
});
type SesMessage = z.infer<typeof SesMessageSchema>;

export type SesReport =
  | { kind: 'Delivery'; messageIdHeader: string | null; sesMessageId?: string; delivery: NonNullable<SesMessage['delivery']> }
  | { kind: 'Bounce'; messageIdHeader: string | null; sesMessageId?: string; bounce: NonNullable<SesMessage['bounce']> }
  | { kind: 'Complaint'; messageIdHeader: string | null; sesMessageId?: string; complaint: NonNullable<SesMessage['complaint']> };

const KINDS = ['Delivery', 'Bounce', 'Complaint'] as const;

/**
 * The SES report in an SNS notification's `Message`, or null when the message is something else published to the
 * topic (plain text, SES's setup test `AmazonSnsSubscriptionSucceeded`, or events such as Send/Open we do not use).
 * A Delivery/Bounce/Complaint without its part is malformed: 400.
 */
export function parseSesReport(message: string): SesReport | null {
  let json: unknown;
  try {
    json = JSON.parse(message);
  } catch {
    return null;
  }
  const claimed = (json as { notificationType?: unknown; eventType?: unknown } | null)?.notificationType ?? (json as { eventType?: unknown } | null)?.eventType;
  if (!KINDS.includes(claimed as (typeof KINDS)[number])) return null;
  const parsed = SesMessageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw badRequest(`Malformed SES ${String(claimed)} notification: ${issue.path.join('.')}: ${issue.message}`);
  }
  const msg = parsed.data;
  const header = msg.mail.commonHeaders?.messageId ?? msg.mail.headers?.find((h) => h.name.toLowerCase() === 'message-id')?.value ?? null;
  const base = { messageIdHeader: header, sesMessageId: msg.mail.messageId };
  const kind = claimed as (typeof KINDS)[number];
  const part = kind === 'Delivery' ? msg.delivery : kind === 'Bounce' ? msg.bounce : msg.complaint;
  if (!part) throw badRequest(`Malformed SES ${kind} notification: the "${kind.toLowerCase()}" object is missing`);
  if (kind === 'Delivery') return { kind, ...base, delivery: msg.delivery! };
  if (kind === 'Bounce') return { kind, ...base, bounce: msg.bounce! };
  return { kind, ...base, complaint: msg.complaint! };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `<emailId@domain>` (angle brackets optional, as SES may report it) -> the email id and the normalized Message-ID. */
export function parseOurMessageId(header: string | null | undefined): { emailId: string; messageId: string } | null {
  const m = /^\s*<?([^<>@\s]+)@([^<>@\s]+?)>?\s*$/.exec(header ?? '');
  if (!m) return null;
  const local = m[1]!.toLowerCase();
  if (!UUID_RE.test(local)) return null;
  return { emailId: local, messageId: `<${local}@${m[2]!.toLowerCase()}>` };
}

type ReportOutcome =
  /** The email's status and/or events changed. */
  | 'applied'
  /** A genuine report that changes nothing (e.g. a delivery report of an email that already bounced). */
  | 'unchanged'
  /** This SNS message was processed before. */
  | 'duplicate'
  /** No email of ours has this Message-ID (another sender on the same topic, or a deleted email). */
  | 'unknown_email';

export interface ReportResult {
  outcome: ReportOutcome;
  emailId?: string;
  /** Names of the events recorded. */
  events: string[];
}

let lastPrune = 0;

/** Drops processed SNS message ids past the retention (older messages are refused by the verifier anyway). */
async function pruneProcessedMessages(em: EntityManager, now: number): Promise<void> {
  if (now - lastPrune < 3_600_000) return;
  lastPrune = now;
  await sql(em).query('delete from sns_messages where received_at < now() - make_interval(secs => $1)', [SNS_MESSAGE_RETENTION_MS / 1000]);
}

/**
 * Applies one SES report, exactly once per SNS message: the message id is stored in `sns_messages` in the same
 * transaction as the changes it causes, so a redelivery (or a concurrent duplicate, which waits on the email's row
 * lock) records nothing new, and a failure rolls both back for SNS to retry. A report of an email not yet recorded
 * as SENT (the relay reported faster than our own write of SENT) answers 503, so SNS retries it a little later.
 * Permanent bounces and complaints suppress the email's address, transient bounces count towards suppressing it
 * (`softBounces`), in the same transaction.
 */
export async function applySesReport(em: EntityManager, snsMessageId: string, report: SesReport, softBounces: SoftBouncePolicy, now = Date.now()): Promise<ReportResult> {
  const ours = parseOurMessageId(report.messageIdHeader);
  if (!ours) return { outcome: 'unknown_email', events: [] };
  await pruneProcessedMessages(em, now);
  const recorded: ReportEventRow[] = [];
  const outcome = await em.transactional(async (tx): Promise<ReportOutcome> => {
    const email = await lockEmail(tx, ours.emailId);
    // The whole Message-ID must be ours, not only a uuid that happens to match.
    if (!email || messageIdFor(email.id, email.fromEmail).toLowerCase() !== ours.messageId) return 'unknown_email';
    if (email.status === 'QUEUED' || email.status === 'SENDING') {
      throw new AppError(503, 'SERVICE_UNAVAILABLE', 'The email is not recorded as sent yet; retry shortly', { headers: { 'Retry-After': '20' } });
    }
    const [fresh] = await sql(tx).query<{ message_id: string }>(
      'insert into sns_messages (message_id, received_at) values ($1, now()) on conflict do nothing returning message_id',
      [snsMessageId],
    );
    if (!fresh) return 'duplicate';
    await suppressFor(tx, email, report, softBounces);
    const rows = await applyEmailReport(tx, email, emailReportOf(email, report));
    if (rows === null) return 'unchanged';
    recorded.push(...rows);
    return 'applied';
  });
  return { outcome, emailId: outcome === 'unknown_email' ? undefined : ours.emailId, events: recorded.map((r) => r.name) };
}

/** Transient bounce subtypes that say something about the address; the others (content, size) are about the message. */
const ADDRESS_SOFT_BOUNCES = new Set(['General', 'MailboxFull']);

/**
 * What a report does to the suppression list: the email's own recipient (not the address the report names, so a
 * report can only ever touch the address we sent to) is suppressed by a permanent bounce (hard_bounce) or a complaint,
 * and a transient bounce that is about the mailbox counts towards SUPPRESS_SOFT_BOUNCES.
 */
async function suppressFor(tx: EntityManager, email: LockedEmail, report: SesReport, softBounces: SoftBouncePolicy): Promise<void> {
  const target = { projectId: email.projectId, email: email.toEmail, source: 'ses', emailId: email.id };
  if (report.kind === 'Complaint') {
    await suppress(sql(tx), { ...target, reason: 'complaint', detail: report.complaint.complaintFeedbackType ?? 'complaint' });
    return;
  }
  if (report.kind !== 'Bounce') return;
  const b = report.bounce;
  const recipient = b.bouncedRecipients.find((r) => r.emailAddress.toLowerCase() === email.toEmail.toLowerCase()) ?? b.bouncedRecipients[0];
  const detail = recipient?.diagnosticCode ?? `${b.bounceType}${b.bounceSubType ? `/${b.bounceSubType}` : ''}`;
  if (b.bounceType === 'Permanent') await suppress(sql(tx), { ...target, reason: 'hard_bounce', detail });
  else if (b.bounceType === 'Transient' && ADDRESS_SOFT_BOUNCES.has(b.bounceSubType ?? 'General')) await recordSoftBounce(sql(tx), { ...target, detail }, softBounces);
}

/** An SES report in the shape every source reports in (domain/emails/email-reports.ts). */
function emailReportOf(email: LockedEmail, report: SesReport): EmailReport {
  const common = { source: 'ses' as const, sesMessageId: report.sesMessageId };
  if (report.kind === 'Delivery') {
    const d = report.delivery;
    return {
      kind: 'delivered',
      at: d.timestamp,
      smtpResponse: d.smtpResponse,
      data: { smtpResponse: d.smtpResponse, reportingMTA: d.reportingMTA, processingTimeMillis: d.processingTimeMillis, timestamp: d.timestamp, ...common },
    };
  }
  if (report.kind === 'Bounce') {
    const b = report.bounce;
    const recipient = b.bouncedRecipients.find((r) => r.emailAddress.toLowerCase() === email.toEmail.toLowerCase()) ?? b.bouncedRecipients[0];
    const permanent = b.bounceType === 'Permanent';
    return {
      kind: 'bounced',
      permanent,
      response: recipient?.diagnosticCode,
      error: `Bounced (${b.bounceType}${b.bounceSubType ? `/${b.bounceSubType}` : ''}), reported by Amazon SES`,
      data: {
        bounceType: b.bounceType === 'Permanent' || b.bounceType === 'Transient' ? b.bounceType : 'Undetermined',
        bounceSubType: b.bounceSubType,
        diagnosticCode: recipient?.diagnosticCode,
        status: recipient?.status,
        action: recipient?.action,
        reportingMTA: b.reportingMTA,
        feedbackId: b.feedbackId,
        timestamp: b.timestamp,
        // Transient (and Undetermined) bounces are worth recording, but SES keeps retrying, so the status stays.
        ...(permanent ? {} : { transient: true as const }),
        ...common,
      },
    };
  }
  const c = report.complaint;
  return {
    kind: 'complained',
    data: {
      complaintFeedbackType: c.complaintFeedbackType,
      complaintSubType: c.complaintSubType ?? undefined,
      userAgent: c.userAgent,
      arrivalDate: c.arrivalDate,
      feedbackId: c.feedbackId,
      timestamp: c.timestamp,
      ...common,
    },
  };
}
