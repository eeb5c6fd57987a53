import type { EntityManager } from '@mikro-orm/postgresql';
import { messageIdFor } from './message-id';
import { sql, statement } from '../db/sql';
import type { Transporter } from 'nodemailer';
import { eventDataSql, insertEventsSql, recordEvents, sqlName } from '../events/event-writer';
import { uuidv7 } from '../ids';
import { logger } from '../logger';
import { dkimKeyContext, type SecretBox } from '../domains/secret-box';
import { loadAttachments } from './attachments';
import { buildMime } from '../mail/mime';
import { signMessage, type DkimSigningKey } from '../mail/dkim-sign';
import { sendMeasured } from '../mail/transport';
import { returnPathAddress } from '../inbound/return-path';
import { emailOutcomes, type EmailOutcomeStatus, type EmailSource } from '../metrics';
import { selectList } from '../db/rows';
import { LruCache } from '../cache/lru';
import type { EmailRow } from './email.entity';
import { AUTOMATION_RUN_ID_PREFIX } from '../../temporal/workflow-ids';
import { suppressedReasonSql, upsertSuppressionsSql } from '../suppressions/suppression.repository';
import { smtpRefusalSuppresses, suppressedError } from '../suppressions/suppression.service';
import type { SuppressionReason } from '../suppressions/suppression.entity';

/**
 * What happened to one email in one delivery attempt. RETRY means a transient failure (4xx, connection). A REJECTED
 * email's address is suppressed when the refusal was about the address (`suppressed`); a SUPPRESSED email's address was
 * on the suppression list when it was claimed, so nothing was sent.
 */
export type DeliveryOutcome =
  | { emailId: string; status: 'SENT'; messageId: string; response: string }
  | { emailId: string; status: 'REJECTED'; response: string; suppressed: boolean }
  | { emailId: string; status: 'RETRY'; error: string }
  | { emailId: string; status: 'SKIPPED'; reason: string }
  | { emailId: string; status: 'CANCELLED'; reason: string }
  | { emailId: string; status: 'SUPPRESSED'; reason: SuppressionReason };

/** A claimed email with what its delivery needs besides (the contact's subscription, the sender domain's DKIM key). */
type ClaimedEmail = Pick<
  EmailRow,
  'id' | 'projectId' | 'contactId' | 'kind' | 'attachmentIds' | 'toEmail' | 'toName' | 'fromEmail' | 'fromName' | 'replyTo' | 'subject' | 'html' | 'text' | 'headers'
> &
  SealedDkimKey & {
    /** The contact's subscription now (null: the contact was deleted). */
    subscribed: boolean | null;
    /** The sender domain's bounce host when its return path is ACTIVE (a domain without a key has none: no records to check). */
    returnPathHost: string | null;
    /** Why the address is on the suppression list now, if it is. */
    suppressed: SuppressionReason | null;
  };

const CLAIMED_COLUMNS = [
  'id', 'projectId', 'contactId', 'kind', 'attachmentIds', 'toEmail', 'toName', 'fromEmail', 'fromName', 'replyTo', 'subject', 'html', 'text', 'headers',
] as const satisfies readonly (keyof ClaimedEmail)[];

/** Decrypted DKIM keys by domain id and ciphertext (a domain's key never changes; a re-added domain has a new id). */
const dkimKeys = new LruCache<string>({ maxEntries: 1_000, maxWeight: 1_000 });

/** A sender domain's sealed DKIM key, as the claim queries bring it along. */
export interface SealedDkimKey {
  dkimDomainId: string | null;
  dkimDomain: string | null;
  dkimSelector: string | null;
  dkimPrivateKey: string | null;
}

/**
 * The signing key of a sender domain, or undefined when there is none (the dev seed, or a domain no
 * longer VERIFIED). Throws when the stored key cannot be decrypted (APP_SECRET changed).
 */
export function dkimFor(row: SealedDkimKey, box: SecretBox): DkimSigningKey | undefined {
  if (!row.dkimDomainId || !row.dkimDomain || !row.dkimSelector || !row.dkimPrivateKey) return undefined;
  const cacheKey = `${row.dkimDomainId}.${row.dkimPrivateKey.split('.')[2] ?? ''}`;
  let privateKey = dkimKeys.get(cacheKey);
  if (!privateKey) {
    privateKey = box.decrypt(row.dkimPrivateKey, dkimKeyContext(row.dkimDomainId));
    dkimKeys.set(cacheKey, privateKey, 1);
  }
  return { domainName: row.dkimDomain, keySelector: row.dkimSelector, privateKey };
}

/** Nodemailer's error for a reply the SMTP server gave (`responseCode`) or a connection problem (`code`). */
export interface SmtpError extends Error {
  responseCode?: number;
  response?: string;
  code?: string;
  /** The SMTP command the reply answered (`RCPT TO`, `DATA`, ...). */
  command?: string;
}

/** A 5xx SMTP reply is permanent; everything else (4xx, timeouts, refused connections) is worth retrying. */
export function isPermanentSmtpFailure(err: unknown): boolean {
  const code = (err as SmtpError).responseCode;
  return typeof code === 'number' && code >= 500;
}

/**
 * The SMTP envelope sender (MAIL FROM) of a claimed email: its signed return path on the sender domain's bounce host
 * when that is ACTIVE, so a bounce or complaint names the email; else the From address, as before return paths.
 */
const envelopeSender = (row: Pick<ClaimedEmail, 'id' | 'fromEmail' | 'returnPathHost'>, secret: string): string =>
  row.returnPathHost ? returnPathAddress(row.id, row.returnPathHost, secret) : row.fromEmail;

/**
 * The relay's id of an accepted message, from its reply as an SQL expression over `reply`: the token after `queued as`
 * (Postfix, SendGrid and most relays: `250 2.0.0 Ok: queued as 4dXk2`), else null. Stored with SENT
 * (`emails.provider_message_id`) for provider reports that name the message only by it.
 */
export const relayMessageIdSql = (reply: string): string => `left(substring(${reply} from '(?i)queued as <?([A-Za-z0-9._@=+/-]+)'), 255)`;

const DELIVERY_CLAIM = statement(
  'delivery_claim',
  `with claimed as (
    update emails set status = 'SENDING', attempts = attempts + 1, workflow_id = coalesce($1, workflow_id), queued_at = null, updated_at = now()
    where id = any($2::uuid[]) and status in ('QUEUED', 'SENDING') and campaign_id is null
    returning ${selectList<ClaimedEmail>(CLAIMED_COLUMNS)}
  )
  select c.*, ct.subscribed, ${suppressedReasonSql('c."projectId"', 'c."toEmail"')} as suppressed, d.id as "dkimDomainId", d.name as "dkimDomain", d.dkim_selector as "dkimSelector", d.dkim_private_key as "dkimPrivateKey",
    d.return_path_host as "returnPathHost"
  from claimed c
  left join contacts ct on ct.id = c."contactId"
  left join domains d on d.project_id = c."projectId" and d.status = 'VERIFIED' and d.dkim_private_key is not null
    and d.name = rtrim(lower(substring(c."fromEmail" from '@([^@]*)$')), '.')`,
);

/**
 * Sends a batch of stored emails through the pooled transport and records every outcome with set-based writes.
 * Idempotent per email: only QUEUED or SENDING emails are claimed, so an email already in a final state is never
 * sent again when an activity is retried. Mail from a VERIFIED domain with a DKIM key is signed with that key (the
 * claim query brings the sealed key along; it is decrypted here, in the activity), and its envelope sender is the
 * email's return path when the domain's is ACTIVE (the same join brings it), else the From address. `source` labels
 * the outcomes in /metrics (automation steps send through here too).
 */
export async function deliverBatch(
  em: EntityManager,
  transport: Transporter,
  input: { emailIds: string[]; attempt: number; workflowId?: string },
  opts: { secretBox: SecretBox; source?: EmailSource; /** Signs return paths (APP_SECRET). */ appSecret: string },
): Promise<DeliveryOutcome[]> {
  // Prepared (planned once per connection): delivery runs this for every batch.
  const claimed = await sql(em).query<ClaimedEmail>(
    DELIVERY_CLAIM,
    [input.workflowId ?? null, input.emailIds],
  );
  const byId = new Map(claimed.map((r) => [r.id, r]));
  // The suppression list and, for marketing mail, the subscription are checked at the moment the email would be sent,
  // not when it was accepted: an address suppressed by a bounce or complaint meanwhile is not mailed again.
  const sendable = claimed.filter((r) => !r.suppressed && (r.kind !== 'MARKETING' || r.subscribed === true));
  const attachments = await loadAttachments(em, sendable.flatMap((r) => r.attachmentIds));
  const outcomes = await Promise.all(
    input.emailIds.map(async (emailId): Promise<DeliveryOutcome> => {
      const row = byId.get(emailId);
      if (!row) return { emailId, status: 'SKIPPED', reason: 'not QUEUED or SENDING (already final, or deleted)' };
      if (row.suppressed) return { emailId, status: 'SUPPRESSED', reason: row.suppressed };
      if (row.kind === 'MARKETING' && row.subscribed !== true) {
        return { emailId, status: 'CANCELLED', reason: row.subscribed === false ? 'The contact is unsubscribed; marketing mail is never sent to unsubscribed contacts' : 'The contact was deleted' };
      }
      const messageId = messageIdFor(row.id, row.fromEmail);
      let dkim: ReturnType<typeof dkimFor>;
      try {
        dkim = dkimFor(row, opts.secretBox);
      } catch (err) {
        // Not sent unsigned: a configuration error (APP_SECRET changed) should show, not weaken authentication.
        logger.error({ err, emailId, domain: row.dkimDomain }, 'DKIM key cannot be decrypted');
        return { emailId, status: 'RETRY', error: `Attempt ${input.attempt}: the DKIM key of ${row.dkimDomain} cannot be decrypted (was APP_SECRET changed?)` };
      }
      try {
        const mime = buildMime({
          messageId,
          from: { name: row.fromName, address: row.fromEmail },
          to: { name: row.toName, address: row.toEmail },
          replyTo: row.replyTo,
          subject: row.subject,
          html: row.html,
          text: row.text,
          headers: row.headers,
          attachments: row.attachmentIds.flatMap((id) => attachments.get(id) ?? []),
        });
        const raw = dkim ? signMessage(mime, dkim) : mime;
        const info = await sendMeasured(transport, { envelope: { from: envelopeSender(row, opts.appSecret), to: [row.toEmail] }, raw });
        return { emailId, status: 'SENT', messageId, response: String(info.response ?? '') };
      } catch (err) {
        const e = err as SmtpError;
        const detail = e.response ?? e.message;
        if (isPermanentSmtpFailure(err)) return { emailId, status: 'REJECTED', response: detail, suppressed: smtpRefusalSuppresses(e) };
        return { emailId, status: 'RETRY', error: `Attempt ${input.attempt}: ${detail}` };
      }
    }),
  );
  await recordOutcomes(em, outcomes, input.attempt);
  for (const o of outcomes) emailOutcomes.inc({ source: opts.source ?? 'transactional', status: OUTCOME_STATUS[o.status] });
  return outcomes;
}

/** The status a delivery outcome leaves its email in, as /metrics counts it. */
const OUTCOME_STATUS: Record<DeliveryOutcome['status'], EmailOutcomeStatus> = {
  SENT: 'sent',
  REJECTED: 'bounced',
  RETRY: 'retry',
  SKIPPED: 'skipped',
  CANCELLED: 'cancelled',
  SUPPRESSED: 'suppressed',
};

const DELIVERY_RECORD_RETRY = statement('delivery_record_retry', `update emails e set error = v.err, updated_at = now() from unnest($1::uuid[], $2::text[]) as v(id, err) where e.id = v.id`);

const DELIVERY_RECORD_CANCELLED = statement(
  'delivery_record_cancelled',
  `update emails e set status = 'CANCELLED', error = v.reason, updated_at = now()
  from unnest($1::uuid[], $2::text[]) as v(id, reason) where e.id = v.id`,
);

const DELIVERY_RECORD_SUPPRESSED = statement(
  'delivery_record_suppressed',
  `update emails e set status = 'SUPPRESSED', error = v.error, updated_at = now()
  from unnest($1::uuid[], $2::text[]) as v(id, error) where e.id = v.id`,
);

// A refusal about the address (`suppress`) puts it on the suppression list in the statement that records the bounce.
const DELIVERY_RECORD_REJECTED = statement('delivery_record_rejected', `with v as (select * from unnest($1::uuid[], $2::text[], $3::uuid[], $5::bool[]) as v(id, resp, event_id, suppress)),
       upd as (
         update emails e set status = 'BOUNCED', smtp_response = v.resp, error = 'Rejected by the SMTP server', updated_at = now()
         from v where e.id = v.id
         returning e.id, e.project_id, e.contact_id, e.to_email, v.resp, v.event_id, v.suppress
       ),
       suppressed as (
         ${upsertSuppressionsSql(`select project_id, to_email as email, 'hard_bounce'::text as reason, 'smtp'::text as source, resp as detail, id as email_id from upd where suppress`)}
       )
       ${insertEventsSql(
         {
           id: 'event_id',
           projectId: 'project_id',
           contactId: 'contact_id',
           name: sqlName('email.bounced'),
           data: eventDataSql('email.bounced', { source: `'smtp'`, bounceType: `'Permanent'`, response: 'resp', attempt: '$4::int' }),
           source: 'SYSTEM',
           emailId: 'id',
         },
         'from upd where contact_id is not null',
       )}`);

const DELIVERY_RECORD_SENT = statement(
  'delivery_record_sent',
  `with v as (select * from unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[]) as v(id, mid, resp, event_id)),
  upd as (
    update emails e set status = 'SENT', message_id = v.mid, smtp_response = v.resp, provider_message_id = ${relayMessageIdSql('v.resp')}, error = null,
      sent_at = now(), updated_at = now()
    from v where e.id = v.id
    returning e.id, e.project_id, e.contact_id, v.mid, v.resp, v.event_id
  )
  ${insertEventsSql(
    {
      id: 'event_id',
      projectId: 'project_id',
      contactId: 'contact_id',
      name: sqlName('email.sent'),
      data: eventDataSql('email.sent', { messageId: 'mid', response: 'resp' }),
      source: 'SYSTEM',
      emailId: 'id',
    },
    'from upd where contact_id is not null',
  )}`,
);

/**
 * Records a batch's outcomes: one statement per kind of outcome updates the emails and inserts their email.*
 * events together (a data-modifying CTE), so a status and its event commit atomically. Each is a prepared statement
 * over arrays (planned once per connection; no SQL text with values inlined), since delivery records every batch.
 */
async function recordOutcomes(em: EntityManager, outcomes: DeliveryOutcome[], attempt: number) {
  const sent = outcomes.filter((o) => o.status === 'SENT');
  const rejected = outcomes.filter((o) => o.status === 'REJECTED');
  const retry = outcomes.filter((o) => o.status === 'RETRY');
  const cancelled = outcomes.filter((o) => o.status === 'CANCELLED');
  const suppressed = outcomes.filter((o) => o.status === 'SUPPRESSED');
  if (sent.length) {
    await sql(em).query(
      DELIVERY_RECORD_SENT,
      [sent.map((o) => o.emailId), sent.map((o) => o.messageId), sent.map((o) => o.response), sent.map(() => uuidv7())],
    );
  }
  if (rejected.length) {
    await sql(em).query(
      DELIVERY_RECORD_REJECTED,
      [rejected.map((o) => o.emailId), rejected.map((o) => o.response), rejected.map(() => uuidv7()), attempt, rejected.map((o) => o.suppressed)],
    );
  }
  if (cancelled.length) {
    await sql(em).query(
      DELIVERY_RECORD_CANCELLED,
      [cancelled.map((o) => o.emailId), cancelled.map((o) => o.reason)],
    );
  }
  if (suppressed.length) {
    await sql(em).query(
      DELIVERY_RECORD_SUPPRESSED,
      [suppressed.map((o) => o.emailId), suppressed.map((o) => suppressedError(o.reason))],
    );
  }
  if (retry.length) {
    await sql(em).query(
      DELIVERY_RECORD_RETRY,
      [retry.map((o) => o.emailId), retry.map((o) => o.error)],
    );
  }
}

/** Marks emails FAILED once delivery has given up on them (retries exhausted). */
export async function markEmailsFailed(em: EntityManager, emailIds: string[], reason: string, source: EmailSource = 'transactional'): Promise<void> {
  const rows = await sql(em).query<{ id: string; projectId: string; contactId: string | null }>(
    `update emails set status = 'FAILED', error = $1, queued_at = null, updated_at = now()
     where id = any($2::uuid[]) and status in ('QUEUED', 'SENDING')
     returning id, project_id as "projectId", contact_id as "contactId"`,
    [reason, emailIds],
  );
  if (rows.length) emailOutcomes.inc({ source, status: 'failed' }, rows.length);
  await recordEvents(
    sql(em),
    rows.filter((r) => r.contactId).map((r) => ({ projectId: r.projectId, contactId: r.contactId!, name: 'email.failed', data: { reason }, source: 'SYSTEM' as const, emailId: r.id })),
  );
}

/**
 * Emails still QUEUED long after they were accepted: their delivery workflow never ran (a campaign's QUEUED rows are
 * its own send's to walk, however long it is paused, and have no body to deliver: never these; an automation step's email
 * is its run's to send, under the run's workflow id: never these either) (the API process died between
 * storing them and starting it, or an operator terminated it). Grouped by the delivery workflow id stored with them.
 * Found by `queued_at`, which only these rows carry until an attempt claims them (its partial index holds only them):
 * `status` is indexed nowhere, so that recording an outcome stays a HOT update.
 */
export async function findStrandedEmails(
  em: EntityManager,
  opts: { olderThanMs: number; limit: number },
): Promise<{ projectId: string; workflowId: string | null; emailIds: string[] }[]> {
  const rows = await sql(em).query<{ projectId: string; workflowId: string | null; id: string }>(
    `select project_id as "projectId", workflow_id as "workflowId", id from emails
     where queued_at < now() - make_interval(secs => $1) and status = 'QUEUED' and campaign_id is null
       and (workflow_id is null or workflow_id not like '${AUTOMATION_RUN_ID_PREFIX}%')
     order by queued_at, id limit $2`,
    [opts.olderThanMs / 1000, opts.limit],
  );
  const groups = new Map<string, { projectId: string; workflowId: string | null; emailIds: string[] }>();
  for (const r of rows) {
    const key = `${r.projectId}/${r.workflowId ?? ''}`;
    const group = groups.get(key) ?? { projectId: r.projectId, workflowId: r.workflowId, emailIds: [] };
    group.emailIds.push(r.id);
    groups.set(key, group);
  }
  return [...groups.values()];
}
