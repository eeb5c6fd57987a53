import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { badRequest } from '../errors';
import { sql } from '../db/sql';
import { messageIdFor } from '../emails/message-id';
import { applyEmailReport, lockEmail, type EmailReport, type LockedEmail } from '../emails/email-reports';
import type { ReportProvider, SystemEventData } from '../events/event-writer';
import { recordSoftBounce, suppress, type SoftBouncePolicy } from '../suppressions/suppression.service';
import { changeSubscription } from '../tracking/tracking.service';
import { parseOurMessageId } from './ses-reports';

/**
 * Delivery reports that relays post to their webhooks (SendGrid, Mailgun, Postmark, Resend), once each provider's
 * module has verified the request and read its events into `ProviderReport`s: the same email states, events and
 * suppressions as the Amazon SES path (domain/webhooks/ses-reports.ts, domain/emails/email-reports.ts), source = the
 * provider. Each report is its own transaction: its replay record (`provider_webhook_events`) commits with its effects,
 * so a redelivered or replayed report changes nothing, and one event of a batch never holds or undoes another.
 */

/** How long applied event ids are kept: providers stop retrying within three days (SendGrid 72 h, Svix about 1.5 days). */
const PROVIDER_EVENT_RETENTION_MS = 7 * 86_400_000;

/** What a report does to the email and the address. */
export type ReportEffect =
  | { kind: 'delivered'; at?: string; smtpResponse?: string }
  | {
      kind: 'bounced';
      /** Ends the email as BOUNCED; otherwise recorded with `transient: true` and the status stays. */
      permanent: boolean;
      /**
       * What it does to the address: `hard_bounce` suppresses it (a permanent failure of the address), `soft_bounce`
       * counts towards SUPPRESS_SOFT_BOUNCES (a transient failure of the mailbox); absent: nothing (a failure of the
       * message or the sender: content, reputation, a deferral the relay keeps retrying).
       */
      suppression?: 'hard_bounce' | 'soft_bounce';
      /** The provider's words for the kind of bounce (`bounce`, `blocked`, `HardBounce`, ...). */
      bounceSubType?: string;
      /** The remote reply or the provider's explanation. */
      diagnosticCode?: string;
      status?: string;
      timestamp?: string;
    }
  | { kind: 'complained'; feedbackType?: string; userAgent?: string; timestamp?: string }
  | { kind: 'unsubscribed'; detail?: string };

/** One event of a provider's webhook, read but not yet applied. */
export interface ProviderReport {
  /** The provider's id of this event: it is applied once. */
  eventId: string;
  /** The provider's name for the event (`delivered`, `bounce`, `HardBounce`, `email.bounced`, ...). */
  type: string;
  /** Our Message-ID header, when the provider echoes it. */
  messageIdHeader?: string | null;
  /** The provider's id of the message (compared with `emails.provider_message_id`, the id its SMTP reply named). */
  providerMessageId?: string | null;
  /** The recipient the provider reports about (a provider id match must be to this address). */
  recipient?: string | null;
  effect: ReportEffect;
}

/** An event read from a webhook that is not applied: a type we do not use, or one we cannot read. */
export interface SkippedEvent {
  skipped: 'ignored' | 'invalid';
  type: string;
  eventId?: string;
  /** Why an event is invalid (the first schema problem). */
  detail?: string;
}

type ReportOutcome =
  /** The email's status and/or events changed. */
  | 'applied'
  /** A genuine report that changes nothing (a delivery report of an email that already bounced). */
  | 'unchanged'
  /** This event was applied before (a redelivery or a replay). */
  | 'duplicate'
  /** No email of ours matches (another sender on the same account, or a deleted email). */
  | 'unknown_email'
  /** The email is not recorded as sent yet (the relay reported faster than our own write of SENT): retried later. */
  | 'not_sent_yet'
  /** A type of event we do not use (opens, clicks, processed, ...). */
  | 'ignored'
  /** An event that could not be read; acknowledged, so the provider does not resend its batch for it. */
  | 'invalid';

interface EventResult {
  type: string;
  eventId?: string;
  outcome: ReportOutcome;
  emailId?: string;
  /** Names of the events recorded. */
  events: string[];
  detail?: string;
}

class AlreadyApplied extends Error {}

let lastPrune = 0;

/** Drops applied event ids past the retention, at most once an hour per process. */
async function pruneAppliedEvents(em: EntityManager, now: number): Promise<void> {
  if (now - lastPrune < 3_600_000) return;
  lastPrune = now;
  await sql(em).query('delete from provider_webhook_events where received_at < now() - make_interval(secs => $1)', [PROVIDER_EVENT_RETENTION_MS / 1000]);
}

/**
 * The email a report is about: by our Message-ID when the provider echoes it (the whole Message-ID must be ours, as
 * the SES path checks), else by the provider's id of the message as its SMTP reply named it when we sent, to the
 * reported recipient. Undefined when neither matches.
 */
async function findEmail(tx: EntityManager, report: ProviderReport): Promise<LockedEmail | undefined> {
  const ours = parseOurMessageId(report.messageIdHeader);
  if (ours) {
    const email = await lockEmail(tx, ours.emailId);
    if (email && messageIdFor(email.id, email.fromEmail).toLowerCase() === ours.messageId) return email;
  }
  if (!report.providerMessageId) return undefined;
  const row = await sql(tx).one<{ id: string }>(
    `select id from emails where provider_message_id = $1 and ($2::text is null or lower(to_email) = lower($2))
     order by sent_at desc nulls last limit 1`,
    [report.providerMessageId.slice(0, 255), report.recipient ?? null],
  );
  return row ? lockEmail(tx, row.id) : undefined;
}

/**
 * Applies one report in a transaction of its own. `replayKeys` are more keys that must be unused and are spent with
 * the report (Mailgun's signing token): when any was used before, the report is a duplicate and nothing changes.
 */
async function applyProviderReport(
  em: EntityManager,
  provider: ReportProvider,
  report: ProviderReport,
  softBounces: SoftBouncePolicy,
  replayKeys: string[] = [],
  now = Date.now(),
): Promise<EventResult> {
  await pruneAppliedEvents(em, now);
  const base = { type: report.type, eventId: report.eventId };
  const recorded: string[] = [];
  let emailId: string | undefined;
  let outcome: ReportOutcome;
  try {
    outcome = await em.transactional(async (tx): Promise<ReportOutcome> => {
      const email = await findEmail(tx, report);
      // A report of an email not yet SENT is answered 503 without spending its keys, so the provider's retry applies it.
      if (email && (email.status === 'QUEUED' || email.status === 'SENDING')) return 'not_sent_yet';
      await spendKeys(tx, provider, [report.eventId, ...replayKeys]);
      if (!email) return 'unknown_email';
      emailId = email.id;
      await suppressFor(tx, provider, email, report.effect, softBounces);
      const names = await applyEffect(tx, provider, email, report);
      if (names === null) return 'unchanged';
      recorded.push(...names);
      return 'applied';
    });
  } catch (err) {
    if (!(err instanceof AlreadyApplied)) throw err;
    outcome = 'duplicate';
  }
  return { ...base, outcome, ...(emailId ? { emailId } : {}), events: recorded };
}

/**
 * Spends the replay keys of a report that is not applied (an event type we ignore): Mailgun's token must be spent
 * whatever the event says, or a captured signature could carry another event. Duplicate when a key was spent before.
 */
async function spendReplayKeys(em: EntityManager, provider: ReportProvider, keys: string[]): Promise<'ok' | 'duplicate'> {
  if (keys.length === 0) return 'ok';
  try {
    await em.transactional((tx) => spendKeys(tx, provider, keys));
    return 'ok';
  } catch (err) {
    if (err instanceof AlreadyApplied) return 'duplicate';
    throw err;
  }
}

/** Records the keys in the caller's transaction; throws AlreadyApplied (rolling it back) when one is there already. */
async function spendKeys(tx: EntityManager, provider: ReportProvider, keys: string[]): Promise<void> {
  const fresh = await sql(tx).query<{ event_id: string }>(
    `insert into provider_webhook_events (provider, event_id, received_at) select $1, k, now() from unnest($2::text[]) as k
     on conflict do nothing returning event_id`,
    [provider, keys.map((k) => k.slice(0, 255))],
  );
  if (fresh.length < keys.length) throw new AlreadyApplied();
}

/**
 * The suppression list, as the SES path does it: the email's own recipient (never an address the report names) is
 * suppressed by a complaint or a bounce that says the address is bad; a transient bounce about the mailbox counts.
 */
async function suppressFor(tx: EntityManager, provider: ReportProvider, email: LockedEmail, effect: ReportEffect, softBounces: SoftBouncePolicy): Promise<void> {
  const target = { projectId: email.projectId, email: email.toEmail, source: provider, emailId: email.id };
  if (effect.kind === 'complained') {
    await suppress(sql(tx), { ...target, reason: 'complaint', detail: effect.feedbackType ?? 'complaint' });
    return;
  }
  if (effect.kind !== 'bounced') return;
  const detail = effect.diagnosticCode ?? effect.bounceSubType ?? (effect.permanent ? 'permanent bounce' : 'transient bounce');
  if (effect.suppression === 'hard_bounce') await suppress(sql(tx), { ...target, reason: 'hard_bounce', detail });
  else if (effect.suppression === 'soft_bounce') await recordSoftBounce(sql(tx), { ...target, detail }, softBounces);
}

/** The report's changes (the names of the events recorded): an unsubscription, or the common report of domain/emails/email-reports.ts. */
async function applyEffect(tx: EntityManager, provider: ReportProvider, email: LockedEmail, report: ProviderReport): Promise<string[] | null> {
  const effect = report.effect;
  if (effect.kind === 'unsubscribed') {
    if (!email.contactId) return null;
    const changed = await changeSubscription(tx, { contactId: email.contactId, emailId: email.id }, false, { via: provider, ...(effect.detail ? { detail: effect.detail } : {}) });
    return changed?.changed ? ['contact.unsubscribed'] : null;
  }
  const ids = { source: provider, providerEventId: report.eventId, ...(report.providerMessageId ? { providerMessageId: report.providerMessageId } : {}) };
  const rows = await applyEmailReport(tx, email, emailReportOf(provider, effect, ids));
  return rows && rows.map((r) => r.name);
}

const PROVIDER_NAMES: Record<ReportProvider, string> = { sendgrid: 'SendGrid', mailgun: 'Mailgun', postmark: 'Postmark', resend: 'Resend' };

function emailReportOf(
  provider: ReportProvider,
  effect: Exclude<ReportEffect, { kind: 'unsubscribed' }>,
  ids: { source: ReportProvider; providerEventId: string; providerMessageId?: string },
): EmailReport {
  if (effect.kind === 'delivered') {
    const data: SystemEventData['email.delivered'] = { ...ids, smtpResponse: effect.smtpResponse, timestamp: effect.at };
    return { kind: 'delivered', at: effect.at, smtpResponse: effect.smtpResponse, data };
  }
  if (effect.kind === 'bounced') {
    const kind = effect.bounceSubType ? ` (${effect.bounceSubType})` : '';
    return {
      kind: 'bounced',
      permanent: effect.permanent,
      response: effect.diagnosticCode,
      error: `Bounced${kind}, reported by ${PROVIDER_NAMES[provider]}`,
      data: {
        ...ids,
        bounceType: effect.permanent ? 'Permanent' : 'Transient',
        bounceSubType: effect.bounceSubType,
        diagnosticCode: effect.diagnosticCode,
        status: effect.status,
        timestamp: effect.timestamp,
        // The relay keeps retrying (or has only deferred it): recorded, and the status stays.
        ...(effect.permanent ? {} : { transient: true as const }),
      },
    };
  }
  return { kind: 'complained', data: { ...ids, complaintFeedbackType: effect.feedbackType, userAgent: effect.userAgent, timestamp: effect.timestamp } };
}

/** What a request's events came to: each event's result, and whether the provider must retry (an email not sent yet). */
export interface WebhookOutcome {
  results: EventResult[];
  retry: boolean;
}

/**
 * Applies a verified request's events one by one, each in its own transaction. An event that cannot be read, or of a
 * type we do not use, is acknowledged in the results and skipped: a batch is never refused for one bad event, so the
 * provider does not resend it forever. `replayKeys` (Mailgun's token, one event per request) are spent with the event,
 * or on their own when the event is skipped.
 */
export async function applyProviderEvents(
  em: EntityManager,
  provider: ReportProvider,
  events: (ProviderReport | SkippedEvent)[],
  softBounces: SoftBouncePolicy,
  replayKeys: string[] = [],
): Promise<WebhookOutcome> {
  const results: EventResult[] = [];
  for (const event of events) {
    if ('skipped' in event) {
      const spent = await spendReplayKeys(em, provider, replayKeys);
      const { skipped, ...rest } = event;
      results.push({ ...rest, outcome: spent === 'duplicate' ? 'duplicate' : skipped, events: [] });
      continue;
    }
    results.push(await applyProviderReport(em, provider, event, softBounces, replayKeys));
  }
  return { results, retry: results.some((r) => r.outcome === 'not_sent_yet') };
}

/** A verified request's body as JSON; 400 when it is not JSON (`expected` says what the provider posts). */
export function parseWebhookJson(rawBody: string, expected: string): unknown {
  try {
    return JSON.parse(rawBody);
  } catch {
    throw badRequest('The body is not JSON', expected);
  }
}

/**
 * One event read with its provider's schema, or the event skipped as invalid (with the first problem, and its type
 * when it has a readable `typeKey`): one unreadable event is acknowledged, not refused with its batch.
 */
export function readWebhookEvent<T>(schema: z.ZodType<T>, raw: unknown, typeKey: string, eventId?: string): { event: T } | SkippedEvent {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return { event: parsed.data };
  const claimed = raw && typeof raw === 'object' ? (raw as Record<string, unknown>)[typeKey] : undefined;
  const issue = parsed.error.issues[0]!;
  return {
    skipped: 'invalid',
    type: typeof claimed === 'string' ? claimed.slice(0, 100) : '(none)',
    ...(eventId ? { eventId } : {}),
    detail: `${issue.path.join('.') || '(event)'}: ${issue.message}`,
  };
}
