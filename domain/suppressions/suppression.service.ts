import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, type Sql } from '../db/sql';
import { normalizeEmail } from '../contacts/email-address';
import { notFound } from '../errors';
import { decodeCursor, toPage, type CursorPage } from '../pagination';
import type { Config } from '../config';
import { SUPPRESSION_REASONS, type SuppressionReason, type SuppressionRow, type SuppressionSource } from './suppression.entity';
import {
  countSuppressions,
  deleteSuppression,
  insertManualSuppressions,
  insertSoftBounce,
  selectSuppressions,
  upsertSuppression,
  upsertSuppressions,
  type SuppressInput,
  type SuppressionFilter,
} from './suppression.repository';

/**
 * The per-project suppression list (README › Suppression list): addresses no send path mails, whatever the kind of
 * mail. Bounce and complaint processing calls `suppress` and `recordSoftBounce` inside the transaction that records
 * the report; the statements that record a relay's refusal while sending suppress in SQL (`upsertSuppressionsSql`).
 * Every send path reads the list in its own set-based statement (`suppressedReasonSql`) and stores the email of a
 * suppressed address as SUPPRESSED with `suppressedError(reason)`, never handing it to SMTP.
 */

/** Kept of a reporter's text on an entry: an SMTP reply or diagnostic code is a line; a note is short. */
const DETAIL_CHARS = 1000;
const clip = (text: string | null | undefined): string | null => (text ? (text.length <= DETAIL_CHARS ? text : `${text.slice(0, DETAIL_CHARS - 1)}…`) : null);

export interface SuppressRequest {
  projectId: string;
  /** Normalized here. */
  email: string;
  reason: Exclude<SuppressionReason, 'soft_bounce_limit'>;
  source: SuppressionSource;
  /** What the reporter said (an SMTP reply, a diagnostic code, a feedback type). */
  detail?: string | null;
  /** The email whose bounce or complaint this is. */
  emailId?: string | null;
}

/**
 * Suppresses an address, from bounce or complaint processing: idempotent, an address keeps its first reason, except
 * that a soft-bounce limit gives way to a hard bounce or a complaint. Runs on the caller's `Sql`, so inside its
 * transaction the suppression commits with the report that caused it. True when the list changed.
 */
export async function suppress(db: Sql, req: SuppressRequest): Promise<boolean> {
  return upsertSuppression(db, suppressInput(req));
}

/** `suppress` for several addresses in one statement (a batch of bounces); returns how many entries changed. */
export async function suppressAll(db: Sql, reqs: readonly SuppressRequest[]): Promise<number> {
  return upsertSuppressions(db, reqs.map(suppressInput));
}

function suppressInput(req: SuppressRequest): SuppressInput {
  return {
    projectId: req.projectId,
    email: normalizeEmail(req.email),
    reason: req.reason,
    source: req.source,
    detail: clip(req.detail),
    emailId: req.emailId ?? null,
  };
}

/** When soft bounces suppress (config `suppression`: SUPPRESS_SOFT_BOUNCES within SUPPRESS_SOFT_BOUNCE_WINDOW_DAYS). */
export type SoftBouncePolicy = Config['suppression'];

export interface SoftBounceRequest {
  projectId: string;
  email: string;
  /** The email that soft-bounced: a second report about it counts once. */
  emailId: string;
  source: SuppressionSource;
  detail?: string | null;
}

/**
 * Counts a transient bounce (a full mailbox, a server that gave up retrying) towards suppressing the address: the
 * `softBounces`th bounce of different emails within the window suppresses it as `soft_bounce_limit` (never replacing
 * another reason). `softBounces` 0 records nothing. Runs on the caller's `Sql` like `suppress`.
 */
export async function recordSoftBounce(db: Sql, req: SoftBounceRequest, policy: SoftBouncePolicy): Promise<{ count: number | null; suppressed: boolean }> {
  if (policy.softBounces <= 0) return { count: null, suppressed: false };
  const detail = clip(req.detail);
  const days = policy.softBounceWindowDays;
  return insertSoftBounce(
    db,
    { projectId: req.projectId, email: normalizeEmail(req.email), emailId: req.emailId, source: req.source, detail },
    {
      threshold: policy.softBounces,
      windowDays: days,
      suppressionDetail: clip(`${policy.softBounces} soft bounces within ${days} day${days === 1 ? '' : 's'}${detail ? `; the last: ${detail}` : ''}`)!,
    },
  );
}

/** The enhanced status code (RFC 3463) of an SMTP reply: `550 5.1.1 ...` -> `5.1.1`. */
function enhancedStatus(reply: string): string | undefined {
  return /^\s*[245]\d\d[ -]([245]\.\d{1,3}\.\d{1,3})\b/.exec(reply)?.[1] ?? /(?<![\d.])([245]\.\d{1,3}\.\d{1,3})(?![\d.])/.exec(reply)?.[1];
}

/**
 * Enhanced statuses of a 5xx that refuse this message, not the address: a full mailbox or a message too large for it
 * (5.2.2, 5.2.3), the receiving system (5.3.x), the content (5.6.x), policy such as spam filtering or authentication
 * (5.7.x). Suppressing the address for them would stop mail that a valid mailbox would take.
 */
const MESSAGE_LEVEL = /^5\.(2\.[23]|[367]\.\d+)$/;

/**
 * Whether a relay's permanent (5xx) refusal while sending suppresses the address as a hard bounce. By the enhanced
 * status when the reply has one (everything but MESSAGE_LEVEL: 5.1.x bad address or domain, 5.2.1 mailbox disabled,
 * 5.4.x no route, 5.0.0, ...); without one, by the stage: a refused recipient (RCPT TO) is the address's, a refusal of
 * the message (after DATA) is not.
 */
export function smtpRefusalSuppresses(refusal: { response?: string; command?: string }): boolean {
  const status = enhancedStatus(refusal.response ?? '');
  if (status) return status.startsWith('5.') && !MESSAGE_LEVEL.test(status);
  return /^RCPT\b/i.test(refusal.command ?? '');
}

const SUPPRESSED_ERROR = /^Not sent: the address is on the project's suppression list \(([a-z_]+)\)$/;

/** The `error` of an email not sent because its address is suppressed (and `suppressedErrorSql`, the same in SQL). */
export function suppressedError(reason: SuppressionReason): string {
  return `Not sent: the address is on the project's suppression list (${reason})`;
}

/** `suppressedError` as a SQL expression over a column or subquery that holds the reason. */
export function suppressedErrorSql(reason: string): string {
  return `'Not sent: the address is on the project''s suppression list (' || ${reason} || ')'`;
}

/** The reason in an email's `error` written by `suppressedError`, if it is one. */
export function reasonOfSuppressedError(error: string | null | undefined): SuppressionReason | undefined {
  const reason = SUPPRESSED_ERROR.exec(error ?? '')?.[1];
  return SUPPRESSION_REASONS.find((r) => r === reason);
}

// --- The API (GET/POST/DELETE /suppressions) ---------------------------------------------------------------------

export interface SuppressionListQuery {
  limit: number;
  cursor?: string;
  reason?: SuppressionReason;
  email?: string;
  search?: string;
}

/** A cursor page of the list, newest first; `total` (of the filtered list) on the first page only. */
export async function listSuppressions(em: EntityManager, projectId: string, q: SuppressionListQuery): Promise<CursorPage<SuppressionRow>> {
  const after = decodeCursor(q.cursor);
  const filter: SuppressionFilter = {
    reason: q.reason,
    email: q.email === undefined ? undefined : normalizeEmail(q.email),
    search: q.search?.trim() ? q.search.trim().toLowerCase() : undefined,
  };
  const db = sql(em);
  const [rows, total] = await Promise.all([selectSuppressions(db, projectId, filter, { after, limit: q.limit }), after ? 0 : countSuppressions(db, projectId, filter)]);
  return toPage(rows, q.limit, total);
}

/**
 * Adds addresses by hand (`manual`, source `api`), idempotently: each distinct address once, in the order given, with
 * its entry as it stands after the call and whether this call added it. An address already suppressed keeps its entry.
 */
export async function addSuppressions(em: EntityManager, projectId: string, input: { emails: string[]; detail?: string }): Promise<(SuppressionRow & { isNew: boolean })[]> {
  const emails = [...new Set(input.emails.map(normalizeEmail))];
  const rows = await insertManualSuppressions(sql(em), projectId, emails, clip(input.detail));
  const byEmail = new Map(rows.map((r) => [r.email, r]));
  return emails.flatMap((e) => byEmail.get(e) ?? []);
}

/** Reactivates an address: its entry goes (404 when there is none), and with it the soft bounces counted for it. */
export async function removeSuppression(em: EntityManager, projectId: string, email: string): Promise<SuppressionRow> {
  const row = await deleteSuppression(sql(em), projectId, normalizeEmail(email));
  if (!row) throw notFound('Suppression');
  return row;
}
