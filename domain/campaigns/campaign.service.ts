import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import type { BillingGuard } from '../billing/billing.service';
import { AppError, conflict, notFound, validationError, type FieldError } from '../errors';
import { checkTemplateSyntax, compileBody } from '../rendering/render';
import { assertSenderDomain } from '../domains/domain.service';
import { decodeCursor, likeEscape, toPage, type CursorPage } from '../pagination';
import { uuidv7 } from '../ids';
import { normalizeEmail } from '../contacts/email-address';
import type { ContactData } from '../contacts/contact.entity';
import { composeEmail, newEmailOf, prepareMessage } from '../compose/composer';
import type { SuppressionReason } from '../suppressions/suppression.entity';
import type { EmailIntake } from '../emails/email-intake';
import { resolveCampaignMessage } from './campaign-send';
import { countAudience } from './audience';
import type { AbTest } from './ab-test';
import {
  assertNotActive,
  campaignRow,
  rescheduleCampaign,
  type CampaignSendControl,
} from './campaign-steering';
import {
  ACTIVE_CAMPAIGN_STATUSES,
  CAMPAIGN_SELECT,
  EDITABLE_CAMPAIGN_STATUSES,
  type AudienceType,
  type CampaignRow,
  type CampaignStatus,
} from './campaign.entity';

/**
 * Campaign CRUD. Rows are `CampaignRow`, the steering module's shape, and every write is one statement that checks the
 * status it depends on (an edit only while DRAFT or SCHEDULED, a delete only while not active), so no edit or delete
 * can interleave with a send start, which is itself one conditional UPDATE (campaign-steering.ts).
 */

const MAX_CAMPAIGN_NAME = 200;
const COPY_SUFFIX = ' (copy)';
const TEST_SUBJECT_PREFIX = '[Test] ';
const TEST_HEADER = 'X-Mailwright-Test';


/** The columns a client writes (POST, PUT, PATCH); the rest belong to the send. */
type CampaignFields = Pick<
  CampaignRow,
  | 'name'
  | 'description'
  | 'subject'
  | 'body'
  | 'templateId'
  | 'fromEmail'
  | 'fromName'
  | 'replyTo'
  | 'audienceType'
  | 'segmentId'
  | 'audienceFilter'
  | 'trackOpens'
  | 'trackClicks'
  | 'abTest'
>;

/** A campaign as the API writes it; for PATCH every key is optional and `null` clears an optional one. */
export interface CampaignInput {
  name?: string;
  description?: string | null;
  subject?: string | null;
  body?: string | null;
  templateId?: string | null;
  from?: string;
  fromName?: string | null;
  replyTo?: string | null;
  audienceType?: AudienceType;
  segmentId?: string | null;
  audienceFilter?: Record<string, unknown> | null;
  trackOpens?: boolean | null;
  trackClicks?: boolean | null;
  abTest?: AbTest | null;
}

/** POST and PUT: the whole campaign (absent optional keys are null). */
export type CreateCampaignInput = CampaignInput & Required<Pick<CampaignInput, 'name' | 'from' | 'audienceType'>>;

/** PUT and PATCH may also move a SCHEDULED campaign's time. */
export interface CampaignEdit {
  scheduledAt?: Date;
}

export interface CampaignListQuery {
  limit: number;
  cursor?: string;
  status?: CampaignStatus;
  search?: string;
}

/**
 * The stored fields after applying `input` over `base` (null for POST and PUT: a full replace), and the field errors
 * of the result. Content is a template or both subject and body; the audience takes `segmentId` only as SEGMENT and
 * `audienceFilter` only as FILTERED. When a PATCH changes `audienceType`, the stored value of the other kind is
 * dropped rather than refused, so a client does not have to clear it by hand; one given in the same request is refused.
 */
function applyInput(base: CampaignFields | null, input: CampaignInput): { fields: CampaignFields; errors: FieldError[] } {
  const pick = <K extends keyof CampaignInput & keyof CampaignFields>(key: K): CampaignFields[K] =>
    (input[key] !== undefined ? input[key] : (base?.[key] ?? null)) as CampaignFields[K];
  const audienceType = input.audienceType ?? base!.audienceType;
  const sameAudience = base !== null && audienceType === base.audienceType;
  const audience = <K extends 'segmentId' | 'audienceFilter'>(key: K): CampaignFields[K] =>
    (input[key] !== undefined ? input[key] : sameAudience ? base[key] : null) as CampaignFields[K];
  const fields: CampaignFields = {
    name: input.name ?? base!.name,
    description: pick('description'),
    subject: pick('subject'),
    body: pick('body'),
    templateId: pick('templateId'),
    fromEmail: input.from ?? base!.fromEmail,
    fromName: pick('fromName'),
    replyTo: pick('replyTo'),
    audienceType,
    segmentId: audience('segmentId'),
    audienceFilter: audience('audienceFilter'),
    trackOpens: pick('trackOpens'),
    trackClicks: pick('trackClicks'),
    abTest: (input.abTest !== undefined ? input.abTest : (base?.abTest ?? null)) as CampaignFields['abTest'],
  };

  const errors: FieldError[] = [];
  if (!fields.templateId) {
    for (const field of ['subject', 'body'] as const) {
      if (!fields[field]) errors.push({ field, message: `${field} is required unless templateId is set`, code: 'required' });
    }
  }
  const needs = { segmentId: audienceType === 'SEGMENT', audienceFilter: audienceType === 'FILTERED' };
  for (const field of ['segmentId', 'audienceFilter'] as const) {
    if (needs[field] && fields[field] === null) {
      errors.push({ field, message: `${field} is required when audienceType is ${audienceType}`, code: 'required' });
    } else if (!needs[field] && fields[field] !== null) {
      const owner = field === 'segmentId' ? 'SEGMENT' : 'FILTERED';
      errors.push({ field, message: `Only a ${owner} audience takes ${field}; this one is ${audienceType}`, code: 'invalid_combination' });
    }
  }
  return { fields, errors };
}

/** Liquid of the given subject and body, then the body as a send compiles it (MJML), as templates are checked on save. */
async function contentErrors(input: Pick<CampaignInput, 'subject' | 'body'>, prefix = ''): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const field of ['subject', 'body'] as const) {
    const source = input[field];
    if (!source) continue;
    const problem = checkTemplateSyntax(source);
    if (problem) errors.push({ field: `${prefix}${field}`, message: `Invalid Liquid syntax: ${problem}`, code: 'invalid_template' });
  }
  if (!errors.length && input.body) await compileBody(input.body);
  return errors;
}

/** The content of each variant of an A/B test, checked as the campaign's own. */
async function variantErrors(input: CampaignInput): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const [i, v] of (input.abTest?.variants ?? []).entries()) errors.push(...(await contentErrors(v, `abTest.variants.${i}.`)));
  return errors;
}

const CAMPAIGN_EDIT_SEGMENT_EXISTS = statement('campaign_edit_segment_exists', 'select id from segments where id = $1 and project_id = $2');

const CAMPAIGN_EDIT_TEMPLATE_EXISTS = statement('campaign_edit_template_exists', 'select id from templates where id = $1 and project_id = $2');

/**
 * Everything a write checks, in the order a client can act on: the shape and the content (422), the sender domain
 * (403; only when `from` is new, so a campaign whose domain was demoted later can still be renamed, as templates can),
 * then that the template and segment named in this request exist in the project (422).
 */
async function validate(em: EntityManager, projectId: string, input: CampaignInput, fields: CampaignFields, shapeErrors: FieldError[], previousFrom: string | null) {
  const errors = [...shapeErrors, ...(await contentErrors(input)), ...(await variantErrors(input))];
  if (errors.length) throw validationError(errors);
  if (fields.fromEmail !== previousFrom) await assertSenderDomain(em, projectId, fields.fromEmail, { field: 'from' });
  const missing: FieldError[] = [];
  if (input.templateId) {
    const [t] = await sql(em).query(CAMPAIGN_EDIT_TEMPLATE_EXISTS, [input.templateId, projectId]);
    if (!t) missing.push({ field: 'templateId', message: 'No template with this id in the project', code: 'not_found' });
  }
  for (const [i, v] of (input.abTest?.variants ?? []).entries()) {
    if (!v.templateId) continue;
    const [t] = await sql(em).query(CAMPAIGN_EDIT_TEMPLATE_EXISTS, [v.templateId, projectId]);
    if (!t) missing.push({ field: `abTest.variants.${i}.templateId`, message: 'No template with this id in the project', code: 'not_found' });
  }
  if (input.segmentId) {
    const [s] = await sql(em).query(CAMPAIGN_EDIT_SEGMENT_EXISTS, [input.segmentId, projectId]);
    if (!s) missing.push({ field: 'segmentId', message: 'No segment with this id in the project', code: 'not_found' });
  }
  if (missing.length) throw validationError(missing);
}

/** The field values in the column order of the insert and update statements below ($n to $n+13). */
const values = (f: CampaignFields) => [
  f.name, f.description, f.subject, f.body, f.templateId, f.fromEmail, f.fromName, f.replyTo, f.audienceType, f.segmentId,
  f.audienceFilter === null ? null : JSON.stringify(f.audienceFilter), f.trackOpens, f.trackClicks, f.abTest === null ? null : JSON.stringify(f.abTest),
];

const CAMPAIGN_INSERT = statement(
  'campaign_insert',
  `insert into campaigns (id, project_id, name, description, subject, body, template_id, from_email, from_name, reply_to, audience_type, segment_id,
    audience_filter, track_opens, track_clicks, ab_test)
  values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16::jsonb)
  returning ${CAMPAIGN_SELECT}`,
);

/** `POST /campaigns`: a DRAFT. */
export async function createCampaign(em: EntityManager, projectId: string, input: CreateCampaignInput): Promise<CampaignRow> {
  const { fields, errors } = applyInput(null, input);
  await validate(em, projectId, input, fields, errors, null);
  const [row] = await sql(em).query<CampaignRow>(
    CAMPAIGN_INSERT,
    [uuidv7(), projectId, ...values(fields)],
  );
  return row!;
}

const CAMPAIGN_UPDATE = statement(
  'campaign_update',
  `update campaigns set name = $5, description = $6, subject = $7, body = $8, template_id = $9, from_email = $10, from_name = $11, reply_to = $12,
    audience_type = $13, segment_id = $14, audience_filter = $15::jsonb, track_opens = $16, track_clicks = $17, ab_test = $18::jsonb, updated_at = now()
  where id = $1 and project_id = $2 and xmin = $3::xid and status = any($4::text[])
  returning ${CAMPAIGN_SELECT}`,
);

const CAMPAIGN_FOR_EDIT = statement('campaign_for_edit', `select ${CAMPAIGN_SELECT}, xmin::text as "version" from campaigns where id = $1 and project_id = $2`);

/**
 * `PUT` (`replace`: the body is the whole campaign) and `PATCH` (any subset) of a DRAFT or SCHEDULED campaign. The row
 * is written only if it is still the version that was read and validated (`xmin`) and still editable, in one
 * statement: an edit that loses to a send start is 409 CAMPAIGN_NOT_EDITABLE, one that loses to another edit is 409
 * CONFLICT, and the send never sees half an edit. `scheduledAt` moves a SCHEDULED campaign's time afterwards
 * (rescheduleCampaign wakes its run).
 */
export async function updateCampaign(
  em: EntityManager,
  control: CampaignSendControl,
  projectId: string,
  id: string,
  input: CampaignInput & CampaignEdit,
  opts: { replace: boolean },
): Promise<CampaignRow> {
  const [current] = await sql(em).query<CampaignRow & { version: string }>(
    CAMPAIGN_FOR_EDIT,
    [id, projectId],
  );
  if (!current) throw notFound('Campaign');
  assertEditable(current.status);
  const { scheduledAt, ...content } = input;
  const { fields, errors } = applyInput(opts.replace ? null : current, content);
  const moves = scheduledAt !== undefined && (current.scheduledAt === null || scheduledAt.getTime() !== current.scheduledAt.getTime());
  if (scheduledAt !== undefined && current.status !== 'SCHEDULED') {
    errors.push({ field: 'scheduledAt', message: 'Only a SCHEDULED campaign has a time to move; schedule a DRAFT with POST /campaigns/:id/send { scheduledFor }', code: 'not_scheduled' });
  } else if (moves && scheduledAt.getTime() <= Date.now()) {
    errors.push({ field: 'scheduledAt', message: 'Must be in the future', code: 'in_past' });
  }
  await validate(em, projectId, content, fields, errors, current.fromEmail);

  const [row] = await sql(em).query<CampaignRow>(
    CAMPAIGN_UPDATE,
    [id, projectId, current.version, EDITABLE_CAMPAIGN_STATUSES, ...values(fields)],
  );
  if (!row) {
    const now = await campaignRow(em, projectId, id);
    assertEditable(now.status);
    throw conflict('CONFLICT', 'The campaign was changed by another request while this one was applied', 'Read it again (GET /campaigns/:id) and repeat the change.');
  }
  return moves ? rescheduleCampaign(em, control, projectId, id, scheduledAt) : row;
}

function assertEditable(status: CampaignStatus): void {
  if (!(EDITABLE_CAMPAIGN_STATUSES as readonly CampaignStatus[]).includes(status)) {
    throw conflict('CAMPAIGN_NOT_EDITABLE', `A ${status} campaign cannot be changed (only DRAFT and SCHEDULED)`, 'Duplicate it (POST /campaigns/:id/duplicate) and edit the copy.');
  }
}

/**
 * `GET /campaigns/:id`: the row as stored (a read never asks Temporal or writes: a run terminated in Web UI is mirrored
 * by the email sweeper, domain/temporal-mirror.ts). For a DRAFT or SCHEDULED campaign `audienceSize` is the audience a
 * send would reach now; once sending started it is the snapshot's size. A campaign whose segment was deleted has no
 * audience to count: null.
 */
export async function getCampaign(em: EntityManager, projectId: string, id: string): Promise<CampaignRow> {
  const row = await campaignRow(em, projectId, id);
  if (row.status !== 'DRAFT' && row.status !== 'SCHEDULED') return row;
  return { ...row, audienceSize: await liveAudienceSize(em, row) };
}

async function liveAudienceSize(em: EntityManager, c: CampaignRow): Promise<number | null> {
  try {
    return await countAudience(em, c);
  } catch (err) {
    if (err instanceof AppError && err.code === 'VALIDATION_ERROR') return null;
    throw err;
  }
}

const CAMPAIGN_COUNT = statement('campaign_count', `select count(*)::int as n from campaigns where project_id = $1 and ($2::text is null or status = $2::text) and ($3::text is null or name ilike $3::text)`);

const CAMPAIGN_LIST = statement(
  'campaign_list',
  `select ${CAMPAIGN_SELECT} from campaigns
  where project_id = $1 and ($2::uuid is null or id < $2::uuid) and ($3::text is null or status = $3::text) and ($4::text is null or name ilike $4::text)
  order by id desc limit $5`,
);

/**
 * Newest first (UUIDv7 ids); `search` is a case-insensitive substring of the name, wildcards literal. Rows as stored
 * (no Temporal call, no write); `audienceSize` is the stored one (null before sending), so a page never counts
 * audiences.
 */
export async function listCampaigns(em: EntityManager, projectId: string, q: CampaignListQuery): Promise<CursorPage<CampaignRow>> {
  const after = decodeCursor(q.cursor) ?? null;
  const search = q.search?.trim() ? `%${likeEscape(q.search.trim())}%` : null;
  const status = q.status ?? null;
  const rows = await sql(em).query<CampaignRow>(
    CAMPAIGN_LIST,
    [projectId, after, status, search, q.limit + 1],
  );
  let total = 0;
  if (!after) {
    const [count] = await sql(em).query<{ n: number }>(
      CAMPAIGN_COUNT,
      [projectId, status, search],
    );
    total = count!.n;
  }
  return toPage(rows, q.limit, total);
}

const CAMPAIGN_DELETE = statement('campaign_delete', 'delete from campaigns where id = $1 and project_id = $2 and status <> all($3::text[]) returning id');

/**
 * Deletes a campaign that is not SCHEDULED, SENDING or PAUSED (409 CAMPAIGN_ACTIVE), in one statement, so a send
 * that starts meanwhile wins. Its stats go with it; the emails it sent stay (`emails.campaign_id` has no foreign key).
 */
export async function deleteCampaign(em: EntityManager, projectId: string, id: string): Promise<void> {
  const [gone] = await sql(em).query(
    CAMPAIGN_DELETE,
    [id, projectId, ACTIVE_CAMPAIGN_STATUSES],
  );
  if (gone) return;
  const now = await campaignRow(em, projectId, id);
  assertNotActive(now);
  throw conflict('CONFLICT', 'The campaign changed status while it was being deleted', 'Retry the request.');
}

const CAMPAIGN_DUPLICATE = statement(
  'campaign_duplicate',
  `insert into campaigns (id, project_id, name, description, subject, body, template_id, from_email, from_name, reply_to, audience_type, segment_id,
    audience_filter, track_opens, track_clicks, ab_test)
  select $3, project_id, left(name, $4) || $5, description, subject, body, template_id, from_email, from_name, reply_to, audience_type, segment_id,
    audience_filter, track_opens, track_clicks, ab_test
  from campaigns where id = $1 and project_id = $2
  returning ${CAMPAIGN_SELECT}`,
);

/** A new DRAFT "<name> (copy)" with the same content, audience and settings: no schedule, no send state, no stats. */
export async function duplicateCampaign(em: EntityManager, projectId: string, id: string): Promise<CampaignRow> {
  const [row] = await sql(em).query<CampaignRow>(
    CAMPAIGN_DUPLICATE,
    [id, projectId, uuidv7(), MAX_CAMPAIGN_NAME - COPY_SUFFIX.length, COPY_SUFFIX],
  );
  if (!row) throw notFound('Campaign');
  return row;
}

export interface TestSendResult {
  emailId: string;
  to: string;
  /** Set when the address is on the suppression list: the test email is stored SUPPRESSED and not sent. */
  suppressed?: SuppressionReason;
}

const CAMPAIGN_TEST_CONTACT = statement('campaign_test_contact', 'select id, email, data from contacts where project_id = $1 and email = $2');

/**
 * `POST /campaigns/:id/test`: one message to `to`, in any status, composed as the send composes it (the template
 * under the campaign's own fields) with the data of the project's contact of that address if there is one. It is
 * TRANSACTIONAL so it reaches an unsubscribed tester, has no campaign id so no campaign counts it, tracks nothing so
 * a tester's opens and clicks never become a contact's events, and goes through the email intake like any email.
 * No contact is created or changed: without one, the links are signed for a throw-away id and the row has no contact.
 * A suppressed address gets no test message either (the intake stores it SUPPRESSED): another bounce or complaint
 * hurts the sender's reputation whatever the message.
 */
export async function sendTestEmail(em: EntityManager, intake: EmailIntake, projectId: string, id: string, to: string, billing?: BillingGuard): Promise<TestSendResult> {
  const resolved = await resolveCampaignMessage(em, await campaignRow(em, projectId, id));
  await billing?.assertEmails(em, projectId, 1);

  const email = normalizeEmail(to);
  const [contact] = await sql(em).query<{ id: string; email: string; data: ContactData }>(
    CAMPAIGN_TEST_CONTACT,
    [projectId, email],
  );
  const message = await prepareMessage({
    ...resolved,
    content: { subject: `${TEST_SUBJECT_PREFIX}${resolved.content.subject}`, body: resolved.content.body },
    kind: 'TRANSACTIONAL',
    headers: { [TEST_HEADER]: 'true' },
    tracking: { opens: false, clicks: false },
  });
  const composed = composeEmail(message, { contactId: contact?.id ?? uuidv7(), email: contact?.email ?? email, data: contact?.data ?? {} });
  // emails.contact_id references contacts: a throw-away id cannot be stored, so the row has none (delivery allows it).
  const [suppressed] = await intake.submit(projectId, [{ ...newEmailOf(composed, projectId), contactId: contact?.id ?? null }]);
  return { emailId: composed.emailId, to: composed.to.email, ...(suppressed ? { suppressed } : {}) };
}
