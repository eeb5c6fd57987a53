import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement, transaction, type Sql } from '../db/sql';
import { AppError, conflict, notFound, validationError } from '../errors';
import { logger } from '../logger';
import { persistThenStart, recordThenTell } from '../workflow-start';
import { workflowIds } from '../../temporal/workflow-ids';
import { resolveCampaignMessage, variantCampaign } from './campaign-send';
import { shareProblem, type AbTest } from './ab-test';
import { audienceWhere, countAudience } from './audience';
import type { BillingGuard } from '../billing/billing.service';
import { assertNotSuspended } from '../reputation/suspension';
import { CAMPAIGN_SELECT, type CampaignRow, type CampaignStatus } from './campaign.entity';

/**
 * Sending, scheduling and steering a campaign. The database is the truth of a campaign's status: every change is
 * one conditional UPDATE (two identical requests cannot both win), and the `campaign-send/<id>` workflow reads the
 * status before each round of sending. Signals only wake the workflow early, so a lost signal delays, never
 * misdirects. A cancel is recorded and told to Temporal as one unit (`recordThenTell`). A run terminated in Web UI is
 * mirrored back by the email sweeper (domain/temporal-mirror.ts), never by a read.
 */

/** What the API needs of Temporal for campaigns (TemporalGateway implements it; tests may double it). */
export interface CampaignSendControl {
  startCampaignSend(input: { projectId: string; campaignId: string; scheduledFor: string | null }): Promise<string>;
  /** Wakes the run to re-read its campaign (a new time, a pause, a resume): the database says what changed. */
  wakeCampaignSend(input: { campaignId: string }): Promise<void>;
  /** Requests cancellation of the run; a run that is not there is fine. */
  cancelCampaignSend(input: { campaignId: string }): Promise<void>;
}


/** How far ahead a campaign may be scheduled: far enough for any plan, near enough that a typo (year 2062) is caught. */
const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 3_600_000;

/** 422 unless `at` is in the future and within MAX_SCHEDULE_AHEAD_MS. */
function assertScheduleTime(field: 'scheduledFor' | 'scheduledAt', at: Date, now: Date): void {
  if (at.getTime() <= now.getTime()) throw validationError([{ field, message: 'Must be in the future (omit it to send now)', code: 'in_past' }]);
  if (at.getTime() - now.getTime() > MAX_SCHEDULE_AHEAD_MS) throw validationError([{ field, message: 'At most a year ahead', code: 'too_far' }]);
}

const CAMPAIGN_ROW = statement('campaign_row', `select ${CAMPAIGN_SELECT} from campaigns where id = $1 and project_id = $2`);

/** A campaign of the project (404 otherwise). */
export async function campaignRow(em: EntityManager, projectId: string, id: string): Promise<CampaignRow> {
  const [row] = await sql(em).query<CampaignRow>(CAMPAIGN_ROW, [id, projectId]);
  if (!row) throw notFound('Campaign');
  return row;
}

const CAMPAIGN_TRANSITION = statement(
  'campaign_transition',
  `update campaigns set status = $4,
    scheduled_at = case when $5::boolean then $6::timestamptz else scheduled_at end,
    workflow_id = case when $7::boolean then $8 else workflow_id end,
    finished_at = case when $9::boolean then now() else finished_at end,
    status_reason = case when $10::boolean then $11 else status_reason end,
    updated_at = now()
  where id = $1 and project_id = $2 and status = any($3::text[])
  returning ${CAMPAIGN_SELECT}`,
);

/**
 * Moves a campaign from one of `from` to `to` (with extra assignments), atomically. Null when the campaign is in
 * another status now (the caller answers 409 with what it is).
 */
async function transition(
  db: Sql,
  projectId: string,
  id: string,
  from: readonly CampaignStatus[],
  to: CampaignStatus,
  extra: { scheduledAt?: Date | null; workflowId?: string | null; finished?: boolean; reason?: string | null } = {},
): Promise<CampaignRow | null> {
  const [row] = await db.query<CampaignRow>(
    CAMPAIGN_TRANSITION,
    [
      id,
      projectId,
      from,
      to,
      extra.scheduledAt !== undefined,
      extra.scheduledAt ?? null,
      extra.workflowId !== undefined,
      extra.workflowId ?? null,
      extra.finished === true,
      extra.reason !== undefined,
      extra.reason ?? null,
    ],
  );
  return row ?? null;
}

async function wrongStatus(em: EntityManager, projectId: string, id: string, action: string, allowed: readonly CampaignStatus[]): Promise<never> {
  const now = await campaignRow(em, projectId, id); // 404 when it is gone
  throw conflict('CAMPAIGN_STATE', `Cannot ${action} a ${now.status} campaign (only ${allowed.join(' or ')})`);
}

/**
 * What a send needs before it may start: content (inline subject and body, or a template that exists), a verified
 * sender domain, and an audience that resolves (the segment exists; the filter is valid). 422/403 otherwise.
 */
async function assertSendable(em: EntityManager, c: CampaignRow): Promise<void> {
  if (!c.templateId && (!c.subject || !c.body)) {
    throw validationError([{ field: c.subject ? 'body' : 'subject', message: 'Required to send (or set templateId)', code: 'required' }]);
  }
  // What the send's snapshot does first, so a send is refused now rather than FAILED later.
  await resolveCampaignMessage(em, c);
  await audienceWhere(em, c);
  if (c.abTest) {
    const test = c.abTest as unknown as AbTest;
    for (const v of test.variants) await resolveCampaignMessage(em, variantCampaign(c, v));
    // The audience as it is now, counted as the split counts the snapshot (suppressed addresses left out); the split
    // counts again when the snapshot is taken (a scheduled send that shrank below the shares FAILs then).
    const problem = shareProblem(test, await countAudience(em, c, { withoutSuppressed: true }));
    if (problem) throw validationError([problem]);
  }
}

const CAMPAIGN_STATS_INIT = statement('campaign_stats_init', 'insert into campaign_stats (campaign_id) values ($1) on conflict do nothing');

/**
 * `POST /campaigns/:id/send`: a DRAFT becomes SENDING (now) or SCHEDULED (`scheduledFor`, which must be in the
 * future), and its `campaign-send/<id>` workflow starts. The status and the stats row are stored in one transaction
 * before the start (the run reads them), so no failure leaves half of it. If Temporal cannot be reached the campaign
 * is a DRAFT again and the caller gets 503 (persistThenStart).
 */
export async function sendCampaign(
  em: EntityManager,
  control: CampaignSendControl,
  projectId: string,
  id: string,
  opts: { scheduledFor?: Date; now?: Date; billing?: BillingGuard } = {},
): Promise<CampaignRow> {
  const c = await campaignRow(em, projectId, id);
  if (c.status !== 'DRAFT') throw conflict('CAMPAIGN_STATE', `Only a DRAFT campaign can be sent; this one is ${c.status}`, 'Duplicate it to send the same content again.');
  await assertNotSuspended(em, projectId);
  const now = opts.now ?? new Date();
  if (opts.scheduledFor) assertScheduleTime('scheduledFor', opts.scheduledFor, now);
  await assertSendable(em, c);
  // The whole audience against the emails cap, up front (402 BILLING_LIMIT_EXCEEDED; counted only when a cap applies).
  await opts.billing?.assertEmails(em, projectId, () => countAudience(em, c));
  return persistThenStart({
    persist: async () => {
      const row = await transaction(em, async (tx) => {
        const moved = await transition(tx, projectId, id, ['DRAFT'], opts.scheduledFor ? 'SCHEDULED' : 'SENDING', {
          scheduledAt: opts.scheduledFor ?? null,
          workflowId: workflowIds.campaignSend(id),
          reason: null,
        });
        if (moved) await tx.query(CAMPAIGN_STATS_INIT, [id]);
        return moved;
      });
      return row ?? wrongStatus(em, projectId, id, 'send', ['DRAFT']);
    },
    start: () => control.startCampaignSend({ projectId, campaignId: id, scheduledFor: opts.scheduledFor?.toISOString() ?? null }),
    compensate: () => transition(sql(em), projectId, id, ['SENDING', 'SCHEDULED'], 'DRAFT', { scheduledAt: null, workflowId: null }),
    unavailable: 'The campaign could not be started (Temporal is unavailable); it is still a DRAFT',
    log: { projectId, campaignId: id },
  });
}

/** Moves a SCHEDULED campaign's time (PUT/PATCH with `scheduledAt`); the run is woken to re-read it. */
export async function rescheduleCampaign(em: EntityManager, control: CampaignSendControl, projectId: string, id: string, at: Date, now = new Date()): Promise<CampaignRow> {
  assertScheduleTime('scheduledAt', at, now);
  const row = (await transition(sql(em), projectId, id, ['SCHEDULED'], 'SCHEDULED', { scheduledAt: at })) ?? (await wrongStatus(em, projectId, id, 'reschedule', ['SCHEDULED']));
  await wake(() => control.wakeCampaignSend({ campaignId: id }), id);
  return row;
}

/** SENDING -> PAUSED: the send stops after the round in progress (at most one chunk per partition). */
export async function pauseCampaign(em: EntityManager, control: Pick<CampaignSendControl, 'wakeCampaignSend'>, projectId: string, id: string): Promise<CampaignRow> {
  const row = (await transition(sql(em), projectId, id, ['SENDING'], 'PAUSED')) ?? (await wrongStatus(em, projectId, id, 'pause', ['SENDING']));
  await wake(() => control.wakeCampaignSend({ campaignId: id }), id);
  return row;
}

/** PAUSED -> SENDING: the rest of the snapshot is sent, each recipient once. */
export async function resumeCampaign(em: EntityManager, control: CampaignSendControl, projectId: string, id: string): Promise<CampaignRow> {
  await assertNotSuspended(em, projectId);
  const row = (await transition(sql(em), projectId, id, ['PAUSED'], 'SENDING')) ?? (await wrongStatus(em, projectId, id, 'resume', ['PAUSED']));
  await wake(() => control.wakeCampaignSend({ campaignId: id }), id);
  return row;
}

/**
 * SCHEDULED, SENDING or PAUSED -> CANCELLED, and the run is cancelled, as one unit (`recordThenTell`): if Temporal
 * cannot be reached the campaign keeps its status and the caller gets 503. What was sent stays sent; the rest is
 * marked CANCELLED by the run (its activities also stop at a chunk boundary once the row says CANCELLED).
 */
export async function cancelCampaign(em: EntityManager, control: Pick<CampaignSendControl, 'cancelCampaignSend'>, projectId: string, id: string): Promise<CampaignRow> {
  const allowed = ['SCHEDULED', 'SENDING', 'PAUSED'] as const;
  const row = await recordThenTell(em, {
    record: (tx) => transition(tx, projectId, id, allowed, 'CANCELLED', { finished: true, reason: 'Cancelled through the API' }),
    skipTell: (r) => r === null,
    tell: () => control.cancelCampaignSend({ campaignId: id }),
    unavailable: 'The campaign could not be cancelled (Temporal is unavailable); it is unchanged, try again',
    log: { projectId, campaignId: id },
  });
  return row ?? wrongStatus(em, projectId, id, 'cancel', allowed);
}

/**
 * A wake-up of the run. The status change is committed and the run reads it at its next round anyway, so a failed
 * wake-up is logged, not reported: the request did what it says.
 */
export async function wake(call: () => Promise<void>, campaignId: string): Promise<void> {
  try {
    await call();
  } catch (err) {
    logger.warn({ err, campaignId }, 'could not signal the campaign-send workflow; it will see the change at its next round');
  }
}

/** 409 CAMPAIGN_ACTIVE unless the campaign may be deleted (not SCHEDULED, SENDING or PAUSED). */
export function assertNotActive(c: Pick<CampaignRow, 'status'>): void {
  if (c.status === 'SCHEDULED' || c.status === 'SENDING' || c.status === 'PAUSED') {
    throw new AppError(409, 'CAMPAIGN_ACTIVE', `The campaign is ${c.status}`, { suggestion: 'Cancel it first (POST /campaigns/:id/cancel).' });
  }
}
