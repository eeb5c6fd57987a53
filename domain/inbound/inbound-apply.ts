import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import type { Config } from '../config';
import { recordEvents } from '../events/event-writer';
import { applyBounceReports, applyEmailReport, lockEmail, lockEmails, type BounceReport, type EmailReport, type LockedEmail } from '../emails/email-reports';
import { messageIdFor } from '../emails/message-id';
import { parseOurMessageId } from '../webhooks/ses-reports';
import { changeSubscription } from '../tracking/tracking.service';
import { inboundProcessed } from '../metrics';
import { classifyInbound } from './classify';
import type { InboundBounce, InboundComplaint, InboundMessage } from './inbound-message';
import { parseReturnPath, parseUnsubscribeAddress, parseUnsubscribeSubject } from './return-path';
import { finishInbound, lockInbound, readInbound, type InboundRow } from './inbound.repository';
import { emailProvenByMessageId } from './mailbox-proof';
import { recordSoftBounce, smtpRefusalSuppresses, suppress, suppressAll, type SoftBounceRequest, type SuppressRequest } from '../suppressions/suppression.service';

/**
 * What an inbound message does (README › Inbound mail), in one transaction with the message's own row, so a message
 * is applied once however often its workflow runs: the row is locked and moved out of RECEIVED with the changes.
 *
 * The email a message is about is proven by a signed address only: the return path it was sent to (`b-<token>`), one
 * quoted in the returned original (a forwarder that lost the envelope), or the unsubscribe address or subject token.
 * A bounce or complaint that names an email only by Message-ID changes nothing (Message-IDs are not secret: anyone
 * who received the email could forge a report); it is recorded as `unmatched`. Replies and auto-replies, which change
 * no state, are also matched by In-Reply-To/References naming one of our Message-IDs.
 * A signed unsubscribe address (`u-<token>`) in the returned original's headers (its List-Unsubscribe) proves it too.
 * A report read from the bounce mailbox (source `imap`) with no token is proven by our Message-ID together with the
 * email's recipient named as the failed one (mailbox-proof.ts, which says why that is enough there).
 */

type InboundKind = InboundMessage['kind'] | 'unsubscribe';

export interface InboundOutcome {
  kind: InboundKind;
  /** applied: states or events changed; unchanged: genuine but nothing to change; unmatched: no email proven; ignored. */
  outcome: 'applied' | 'unchanged' | 'unmatched' | 'ignored';
  emailId?: string;
  projectId?: string;
  contactId?: string;
  /** Names of the events recorded. */
  events: string[];
  /** Bounce: hard or soft; complaint: its feedback type; unknown: why; auto-reply: its signal. */
  detail?: string;
}

/** Thrown when the email is not recorded as sent yet (a DSN faster than our own write of SENT): the activity retries. */
class EmailNotSentYet extends Error {}

type Cfg = Pick<Config, 'appSecret' | 'inbound' | 'suppression'>;

/** What the envelope recipients say, verified. */
interface Addressed {
  /** From a `b-` return path. */
  returnPathEmailId?: string;
  /** From a `u-` unsubscribe address. */
  unsubscribeEmailId?: string;
  /** Sent to `unsubscribe@<bounce host>` (the subject carries the token). */
  unsubscribeMailbox: boolean;
  /** Read from the bounce mailbox (source `imap`): its Message-ID proof applies too (mailbox-proof.ts). */
  fromBounceMailbox?: boolean;
}

function addressed(rcptTo: string[], secret: string, at: Date): Addressed {
  const out: Addressed = { unsubscribeMailbox: false };
  for (const rcpt of rcptTo) {
    const local = rcpt.slice(0, rcpt.lastIndexOf('@')).toLowerCase();
    if (local.startsWith('b-')) {
      // Judged as of its arrival: a message that waited in our queue does not expire there.
      const r = parseReturnPath(local, secret, at);
      if ('emailId' in r) out.returnPathEmailId ??= r.emailId;
    } else if (local.startsWith('u-')) {
      const r = parseUnsubscribeAddress(local, secret);
      if ('emailId' in r) out.unsubscribeEmailId ??= r.emailId;
    } else if (local.split('+')[0] === 'unsubscribe') out.unsubscribeMailbox = true;
  }
  return out;
}

/** The email a bounce or complaint is about, proven by a signed return path (the envelope's, else a quoted one). */
function provenEmailId(message: InboundBounce | InboundComplaint, to: Addressed, secret: string, at: Date): string | undefined {
  if (to.returnPathEmailId) return to.returnPathEmailId;
  const quoted = [message.originalEnvelopeToken, message.kind === 'complaint' ? message.originalMailFrom : undefined];
  for (const q of quoted) {
    if (!q) continue;
    const r = parseReturnPath(q, secret, at);
    if ('emailId' in r) return r.emailId;
  }
  const unsubscribe = message.originalUnsubscribeToken ? parseUnsubscribeAddress(message.originalUnsubscribeToken, secret) : undefined;
  return unsubscribe && 'emailId' in unsubscribe ? unsubscribe.emailId : undefined;
}

/** The email a report proves (`provenEmailId`), or for a bounce-mailbox message, the one its Message-ID and recipient name. */
async function reportedEmailId(tx: EntityManager, message: InboundBounce | InboundComplaint, to: Addressed, secret: string, at: Date): Promise<string | undefined> {
  return provenEmailId(message, to, secret, at) ?? (to.fromBounceMailbox ? await emailProvenByMessageId(tx, message) : undefined);
}

/** The email a reply or auto-reply answers: its return path, else one of our Message-IDs it names. */
async function answeredEmail(tx: EntityManager, message: InboundMessage, to: Addressed): Promise<LockedEmail | undefined> {
  if (to.returnPathEmailId) return lockEmail(tx, to.returnPathEmailId);
  for (const id of [message.inReplyTo, ...message.references].filter((v): v is string => !!v)) {
    const ours = parseOurMessageId(id);
    if (!ours) continue;
    const email = await lockEmail(tx, ours.emailId);
    if (email && messageIdFor(email.id, email.fromEmail).toLowerCase() === ours.messageId) return email;
  }
  return undefined;
}

/**
 * Reads, classifies and applies a batch of stored messages (an `inbound-mail` workflow's), all in one transaction: one
 * commit and one lock of the rows for the batch instead of one each, and the batch's bounces (most of a flood) in a
 * few statements whatever their number. Should anything in it fail (a report about an email not yet recorded as sent,
 * a deadlock with another batch), nothing of it is kept and each message is applied on its own instead, so one
 * message never holds back the others (and the one that fails, fails alone).
 */
export async function processInboundBatch(em: EntityManager, cfg: Cfg, inboundIds: string[]): Promise<InboundOutcome[]> {
  // Classified before the transaction (parsing is the slow part), applied inside it.
  const rows = await readInbound(em.fork(), inboundIds);
  const messages = new Map<string, InboundMessage>();
  for (const r of rows) if (r.status === 'RECEIVED') messages.set(r.id, await classifyStored(r));
  let outcomes: Map<string, InboundOutcome>;
  try {
    outcomes = await applyStored(em, cfg, inboundIds, messages);
  } catch {
    // One by one: each message that can be applied is, and the first failure is thrown at the end (the run retries
    // the batch; what committed answers its outcome then).
    outcomes = new Map();
    let failure: unknown;
    for (const id of inboundIds) {
      try {
        for (const [k, v] of await applyStored(em, cfg, [id], messages)) outcomes.set(k, v);
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure !== undefined) throw failure;
  }
  const earlier = new Map(rows.map((r) => [r.id, r.outcome as unknown as InboundOutcome | null]));
  return inboundIds.map((id) => outcomes.get(id) ?? earlier.get(id) ?? { kind: 'unknown', outcome: 'ignored', events: [], detail: 'no such inbound message' });
}

async function classifyStored(row: Pick<InboundRow, 'raw' | 'mailFrom' | 'rcptTo'>): Promise<InboundMessage> {
  return row.raw
    ? classifyInbound(row.raw, { mailFrom: row.mailFrom, rcptTo: row.rcptTo })
    : { kind: 'unknown', reason: 'empty', from: null, subject: '', messageId: null, date: null, inReplyTo: null, references: [] };
}

interface Locked {
  row: InboundRow;
  message: InboundMessage;
  to: Addressed;
}

/**
 * Applies the classified messages among `ids` in one transaction and records each outcome on its row; a message
 * already processed (by an earlier run) answers what it did then. Bounces are applied together after the others (no
 * other kind of inbound mail changes an email's state, so the order between them does not matter).
 */
async function applyStored(em: EntityManager, cfg: Cfg, ids: string[], messages: Map<string, InboundMessage>): Promise<Map<string, InboundOutcome>> {
  const done = await em.fork().transactional(async (tx) => {
    const done = new Map<string, InboundOutcome>();
    const locked: Locked[] = [];
    for (const row of await lockInbound(tx, ids)) {
      const message = messages.get(row.id);
      if (row.status === 'RECEIVED' && message) {
        locked.push({ row, message, to: { ...addressed(row.rcptTo, cfg.appSecret, row.receivedAt), fromBounceMailbox: row.source === 'imap' } });
      }
      else if (row.outcome) done.set(row.id, row.outcome as unknown as InboundOutcome);
    }
    const fresh = new Map<string, InboundOutcome>();
    const bounces: Locked[] = [];
    for (const m of locked) {
      const { message } = m;
      if (message.kind === 'bounce') bounces.push(m);
      else fresh.set(m.row.id, await apply(tx, cfg, m.row.id, message, m.to, m.row.receivedAt));
    }
    for (const [id, outcome] of await applyBounces(tx, cfg, bounces)) fresh.set(id, outcome);
    await finishInbound(
      tx,
      locked.map(({ row, message }) => {
        const outcome = fresh.get(row.id)!;
        const summary = summaryOf(message);
        return { id: row.id, status: 'PROCESSED', kind: outcome.kind, outcome: { ...outcome, summary }, projectId: outcome.projectId ?? null, emailId: outcome.emailId ?? null, contactId: outcome.contactId ?? null };
      }),
    );
    for (const [id, outcome] of fresh) {
      done.set(id, outcome);
      inboundProcessed.inc({ kind: outcome.kind, outcome: outcome.outcome });
    }
    return done;
  });
  return done;
}

function summaryOf(message: InboundMessage): Record<string, unknown> {
  const common = { from: message.from?.address ?? null, subject: message.subject.slice(0, 200), messageId: message.messageId };
  if (message.kind === 'bounce') return { ...common, format: message.format, bounceType: message.bounceType, transient: message.transient, text: message.summary.slice(0, 500) };
  if (message.kind === 'complaint') return { ...common, feedbackType: message.feedbackType, hasOriginal: message.hasOriginal };
  if (message.kind === 'unknown') return { ...common, reason: message.reason };
  return common;
}

async function apply(tx: EntityManager, cfg: Cfg, inboundId: string, message: Exclude<InboundMessage, InboundBounce>, to: Addressed, at: Date): Promise<InboundOutcome> {
  // A bounce (applied in applyBounces), a complaint or an auto-reply to the unsubscribe address is not a request.
  const wantsUnsubscribe = (to.unsubscribeEmailId || to.unsubscribeMailbox) && message.kind !== 'complaint' && message.kind !== 'auto-reply';
  if (wantsUnsubscribe) return unsubscribeByMail(tx, cfg, inboundId, message, to);
  switch (message.kind) {
    case 'complaint':
      return applyComplaint(tx, cfg, inboundId, message, to, at);
    case 'auto-reply':
    case 'reply': {
      const email = await answeredEmail(tx, message, to);
      const kind = message.kind;
      if (!email) return { kind, outcome: 'unmatched', events: [] };
      const base = { kind, emailId: email.id, projectId: email.projectId, contactId: email.contactId ?? undefined };
      if (!email.contactId) return { ...base, outcome: 'unchanged', events: [] };
      const event =
        message.kind === 'reply'
          ? ({ name: 'email.replied', data: { inboundId, from: message.from.address, subject: message.subject.slice(0, 200), excerpt: message.excerpt } } as const)
          : ({ name: 'email.auto_replied', data: { inboundId, from: message.from?.address, subject: message.subject.slice(0, 200), reason: message.reason } } as const);
      const recorded = await recordEvents(sql(tx), [{ source: 'SYSTEM', projectId: email.projectId, contactId: email.contactId, emailId: email.id, ...event }]);
      return { ...base, outcome: 'applied', events: recorded.map((e) => e.name), ...(message.kind === 'auto-reply' ? { detail: message.reason } : {}) };
    }
    default:
      return { kind: 'unknown', outcome: 'ignored', events: [], detail: message.reason };
  }
}

/** Mail to the List-Unsubscribe mailto: the contact is unsubscribed (`via: email`), once, whatever the body says. */
async function unsubscribeByMail(tx: EntityManager, cfg: Cfg, inboundId: string, message: InboundMessage, to: Addressed): Promise<InboundOutcome> {
  let target: { contactId: string; emailId?: string } | null = null;
  if (to.unsubscribeEmailId) {
    const email = await sql(tx).one<{ contactId: string | null }>(`select contact_id as "contactId" from emails where id = $1`, [to.unsubscribeEmailId]);
    if (email?.contactId) target = { contactId: email.contactId, emailId: to.unsubscribeEmailId };
  }
  target ??= parseUnsubscribeSubject(message.subject, cfg.appSecret);
  if (!target) return { kind: 'unsubscribe', outcome: 'unmatched', events: [] };
  const changed = await changeSubscription(tx, target, false, { via: 'email', inboundId });
  if (!changed) return { kind: 'unsubscribe', outcome: 'unmatched', events: [] };
  const project = await sql(tx).one<{ projectId: string }>(`select project_id as "projectId" from contacts where id = $1`, [target.contactId]);
  return {
    kind: 'unsubscribe',
    outcome: changed.changed ? 'applied' : 'unchanged',
    contactId: target.contactId,
    emailId: target.emailId,
    projectId: project?.projectId,
    events: changed.changed ? ['contact.unsubscribed'] : [],
  };
}

/** An ARF report: the same states and events as the SES path (domain/emails/email-reports.ts), source arf. */
async function applyComplaint(tx: EntityManager, cfg: Cfg, inboundId: string, message: InboundComplaint, to: Addressed, at: Date): Promise<InboundOutcome> {
  const detail = message.feedbackType;
  const emailId = await reportedEmailId(tx, message, to, cfg.appSecret, at);
  const email = emailId ? await lockEmail(tx, emailId) : undefined;
  if (!email) return { kind: 'complaint', outcome: 'unmatched', events: [], detail };
  assertSent(email);
  const rows = await applyEmailReport(tx, email, complaintReport(message, inboundId));
  await suppress(sql(tx), { projectId: email.projectId, email: email.toEmail, emailId: email.id, reason: 'complaint', source: 'arf', detail });
  return { ...reportBase(email, 'complaint', detail), outcome: rows ? 'applied' : 'unchanged', events: rows?.map((r) => r.name) ?? [] };
}

function assertSent(email: LockedEmail): void {
  if (email.status === 'QUEUED' || email.status === 'SENDING') throw new EmailNotSentYet(`email ${email.id} is not recorded as sent yet`);
}

const reportBase = (email: LockedEmail, kind: 'bounce' | 'complaint', detail: string) => ({
  kind,
  emailId: email.id,
  projectId: email.projectId,
  contactId: email.contactId ?? undefined,
  detail,
});

/**
 * A batch's DSNs, with the same states and events as the SES path (domain/emails/email-reports.ts), source dsn: the
 * emails they prove locked at once, their states and events in `applyBounceReports`' two statements, their hard
 * bounces suppressed in one more.
 */
async function applyBounces(tx: EntityManager, cfg: Cfg, bounces: Locked[]): Promise<Map<string, InboundOutcome>> {
  const out = new Map<string, InboundOutcome>();
  if (bounces.length === 0) return out;
  const proven: (string | undefined)[] = [];
  for (const b of bounces) proven.push(await reportedEmailId(tx, b.message as InboundBounce, b.to, cfg.appSecret, b.row.receivedAt));
  const emails = await lockEmails(
    tx,
    proven.filter((id): id is string => !!id),
  );
  const matched: { id: string; message: InboundBounce; email: LockedEmail; report: BounceReport }[] = [];
  bounces.forEach((b, i) => {
    const message = b.message as InboundBounce;
    const email = emails.get(proven[i] ?? '');
    if (!email) return out.set(b.row.id, { kind: 'bounce', outcome: 'unmatched', events: [], detail: message.bounceType });
    assertSent(email);
    matched.push({ id: b.row.id, message, email, report: bounceReport(message, email, b.row.id) });
  });
  const applied = await applyBounceReports(tx, matched);
  const hard: SuppressRequest[] = [];
  for (const [i, { id, message, email, report }] of matched.entries()) {
    const rows = applied[i];
    out.set(id, { ...reportBase(email, 'bounce', message.bounceType), outcome: rows ? 'applied' : 'unchanged', events: rows?.map((r) => r.name) ?? [] });
    const suppression = suppressionFor(email, message, report);
    if (suppression?.hard) hard.push(suppression.request);
    else if (suppression) await recordSoftBounce(sql(tx), suppression.request, cfg.suppression);
  }
  await suppressAll(sql(tx), hard);
  return out;
}

/**
 * What a DSN does to the suppression list, for the address we sent to (never one the report names): a hard bounce
 * about the address (5.1.x unknown user or domain, 5.2.1 disabled, ... but not a message-level 5.2.2 full mailbox,
 * 5.3/5.6/5.7 system, content or policy refusal) suppresses it as hard_bounce; a bounce that gave up on this message
 * for a reason of its own (a 4.x.x failure, a message-level 5.x.x) counts towards SUPPRESS_SOFT_BOUNCES. A delay notice
 * counts for nothing: the message may still arrive.
 */
function suppressionFor(
  email: LockedEmail,
  message: InboundBounce,
  report: BounceReport,
): { hard: true; request: SuppressRequest } | { hard: false; request: SoftBounceRequest } | undefined {
  if (message.transient) return undefined;
  const target = { projectId: email.projectId, email: email.toEmail, emailId: email.id, source: 'dsn' as const };
  const status = report.data.status ?? '';
  const detail = [status, report.data.diagnosticCode].filter(Boolean).join(' ') || message.summary;
  if (report.permanent && smtpRefusalSuppresses({ response: `${status} ${report.data.diagnosticCode ?? ''}` })) {
    return { hard: true, request: { ...target, reason: 'hard_bounce', detail } };
  }
  return { hard: false, request: { ...target, detail } };
}

function bounceReport(message: InboundBounce, email: LockedEmail, inboundId: string): BounceReport {
  const recipient = message.recipients.find((r) => r.recipient?.toLowerCase() === email.toEmail.toLowerCase()) ?? message.recipients[0];
  const permanent = message.bounceType === 'hard' && !message.transient;
  return {
    kind: 'bounced',
    permanent,
    response: recipient?.diagnosticCode,
    error: `Bounced (${permanent ? 'hard' : 'soft'}, ${recipient?.status ?? 'no status'}), reported by ${message.reportingMta ?? 'a mail server'} in a delivery status notification`,
    data: {
      source: 'dsn',
      format: message.format,
      bounceType: permanent ? 'Permanent' : 'Transient',
      ...(permanent ? {} : { transient: true as const }),
      ...(recipient?.diagnosticCode ? { diagnosticCode: recipient.diagnosticCode.slice(0, 1000) } : {}),
      ...(recipient?.status ? { status: recipient.status } : {}),
      ...(recipient?.action ? { action: recipient.action } : {}),
      ...(message.reportingMta ? { reportingMTA: message.reportingMta } : {}),
      inboundId,
    },
  };
}

function complaintReport(message: InboundComplaint, inboundId: string): EmailReport {
  return {
    kind: 'complained',
    data: {
      source: 'arf',
      format: 'arf',
      complaintFeedbackType: message.feedbackType,
      ...(message.userAgent ? { userAgent: message.userAgent.slice(0, 200) } : {}),
      ...(message.arrivalDate ? { arrivalDate: message.arrivalDate } : {}),
      inboundId,
    },
  };
}
