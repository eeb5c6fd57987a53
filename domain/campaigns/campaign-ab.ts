import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import { AppError, conflict, validationError } from '../errors';
import { assertSenderDomain } from '../domains/domain.service';
import type { CampaignSendControl } from './campaign-steering';
import { campaignRow, wake } from './campaign-steering';
import { decideWinner, variantLabel, type AbDecision, type AbTest, type VariantSample } from './ab-test';
import type { CampaignRow, CampaignStatus } from './campaign.entity';

/**
 * The database side of an A/B-tested campaign (ab-test.ts has the rules): each variant's numbers, read from the
 * campaign's emails and the marks the campaign-stats consumer keeps per email; the decision, recorded once; a person's
 * pick. Counting scans the campaign's rows (by its index), which only A/B campaigns do, once at the decision and on
 * each GET of their stats.
 */

/** One group of a campaign's recipients: a variant's test share, or (variant null) the remainder sent the winner. */
interface VariantCounts {
  variant: number | null;
  recipients: number;
  sent: number;
  opens: number;
  clicks: number;
  bounces: number;
  unsubscribes: number;
}

const CAMPAIGN_AB_COUNTS = statement(
  'campaign_ab_counts',
  `with m as (
    select k.email_id, bool_or(k.kind = 'opened') as o, bool_or(k.kind = 'clicked') as c, bool_or(k.kind = 'bounced') as b,
      bool_or(k.kind = 'unsubscribed') as u
    from campaign_email_marks k join emails e on e.id = k.email_id
    where e.campaign_id = $1 group by k.email_id
  )
  select e.variant, count(*)::int as recipients,
    count(*) filter (where e.sent_at is not null or e.status = 'BOUNCED')::int as sent,
    count(*) filter (where m.o)::int as opens, count(*) filter (where m.c)::int as clicks,
    count(*) filter (where m.b)::int as bounces, count(*) filter (where m.u)::int as unsubscribes
  from emails e left join m on m.email_id = e.id
  where e.campaign_id = $1 and e.status <> 'SUPPRESSED'
  group by e.variant order by e.variant nulls last`,
);

/** The campaign's recipients by group: each variant (in order, zeros when it has none yet), then the remainder. */
async function variantCounts(em: EntityManager, campaignId: string, variants: number): Promise<{ variants: VariantCounts[]; remainder: VariantCounts }> {
  const rows = await sql(em).query<VariantCounts>(CAMPAIGN_AB_COUNTS, [campaignId]);
  const zero = (variant: number | null): VariantCounts => ({ variant, recipients: 0, sent: 0, opens: 0, clicks: 0, bounces: 0, unsubscribes: 0 });
  return {
    variants: Array.from({ length: variants }, (_, i) => rows.find((r) => r.variant === i) ?? zero(i)),
    remainder: rows.find((r) => r.variant === null) ?? zero(null),
  };
}

const samplesOf = (counts: VariantCounts[]): VariantSample[] => counts.map((c) => ({ sent: c.sent, opens: c.opens, clicks: c.clicks }));

const CAMPAIGN_AB_WAIT = statement('campaign_ab_wait', 'select status, ab_pick as "abPick", ab_decision as "abDecision" from campaigns where id = $1');

/** What a run waiting for the decision reads after each wake-up: the status, a person's pick, a decision already made. */
export async function abWaitState(em: EntityManager, campaignId: string): Promise<{ status: CampaignStatus; pick: number | null; decided: boolean }> {
  const [row] = await sql(em).query<{ status: CampaignStatus; abPick: number | null; abDecision: unknown }>(CAMPAIGN_AB_WAIT, [campaignId]);
  if (!row) return { status: 'CANCELLED', pick: null, decided: false };
  return { status: row.status, pick: row.abPick, decided: row.abDecision !== null };
}

const CAMPAIGN_AB_RECORD = statement(
  'campaign_ab_record',
  `update campaigns set ab_decision = coalesce(ab_decision, $2::jsonb), updated_at = now() where id = $1 returning ab_decision as "abDecision"`,
);

/**
 * Decides the winner from the test shares' numbers (or a person's pick) and records it on the campaign, once: a retry
 * or a replayed run gets the decision recorded first. `senderProblem` is set, and nothing recorded, when the sender
 * domain lost its verification during the wait (the run then ends the campaign FAILED, sending no remainder).
 */
export async function recordAbDecision(em: EntityManager, campaignId: string): Promise<{ decision: AbDecision } | { senderProblem: string }> {
  const c = await sql(em).one<CampaignRow>(`select project_id as "projectId", from_email as "fromEmail", ab_test as "abTest", ab_pick as "abPick", ab_decision as "abDecision" from campaigns where id = $1`, [campaignId]);
  if (!c?.abTest) throw new Error(`campaign ${campaignId} has no A/B test`);
  if (c.abDecision) return { decision: c.abDecision as unknown as AbDecision };
  try {
    await assertSenderDomain(em, c.projectId, c.fromEmail);
  } catch (err) {
    if (err instanceof AppError) return { senderProblem: `The winner was not sent: ${err.message}` };
    throw err;
  }
  const test = c.abTest as unknown as AbTest;
  const { variants } = await variantCounts(em, campaignId, test.variants.length);
  const decision = decideWinner({ metric: test.metric, samples: samplesOf(variants), pick: c.abPick });
  const [row] = await sql(em).query<{ abDecision: AbDecision }>(CAMPAIGN_AB_RECORD, [campaignId, JSON.stringify(decision)]);
  return { decision: row!.abDecision };
}

const CAMPAIGN_AB_PICK = statement(
  'campaign_ab_pick',
  `update campaigns set ab_pick = $3, updated_at = now()
  where id = $1 and project_id = $2 and ab_test is not null and ab_decision is null and status in ('SENDING', 'PAUSED')
  returning id`,
);

/**
 * `POST /campaigns/:id/winner`: a person picks the variant sent to the remainder. Taken while the campaign sends its
 * test or waits (SENDING or PAUSED) and nothing is decided yet; it ends the wait at once, in either after-test mode.
 * 422 for a campaign without variants or a variant it does not have, 409 once decided or in another status.
 */
export async function pickWinner(em: EntityManager, control: Pick<CampaignSendControl, 'wakeCampaignSend'>, projectId: string, id: string, variant: number): Promise<CampaignRow> {
  const c = await campaignRow(em, projectId, id);
  if (!c.abTest) throw validationError([{ field: 'variant', message: 'This campaign has no variants (set abTest)', code: 'no_variants' }]);
  const count = (c.abTest as unknown as AbTest).variants.length;
  if (variant >= count) throw validationError([{ field: 'variant', message: `The campaign has variants 0 to ${count - 1} (${variantLabel(0)} to ${variantLabel(count - 1)})`, code: 'not_found' }]);
  const [moved] = await sql(em).query(CAMPAIGN_AB_PICK, [id, projectId, variant]);
  if (!moved) {
    const now = await campaignRow(em, projectId, id);
    if (now.abDecision) throw conflict('CAMPAIGN_STATE', `The winner is decided already (variant ${(now.abDecision as unknown as AbDecision).winnerLabel})`);
    throw conflict('CAMPAIGN_STATE', `Cannot pick the winner of a ${now.status} campaign (only while SENDING or PAUSED)`);
  }
  // The pick is stored: a lost wake-up delays it to the run's next re-read (at most an hour), never loses it.
  await wake(() => control.wakeCampaignSend({ campaignId: id }), id);
  return campaignRow(em, projectId, id);
}

/** GET /campaigns/:id/stats of an A/B campaign: each variant's and the final send's counts, and the decision explained. */
export interface AbStatsView {
  metric: AbTest['metric'];
  afterTest: AbTest['afterTest'];
  variants: (VariantCounts & { label: string })[];
  finalSend: VariantCounts & { winner: number | null };
  /** The decision as recorded, or null while the test runs. */
  decision: AbDecision | null;
  /** The same analysis on the numbers as they are now (engagement keeps coming after the decision). */
  current: AbDecision;
}

export async function getCampaignAbStats(em: EntityManager, projectId: string, id: string): Promise<AbStatsView | null> {
  return abStatsOf(em, await campaignRow(em, projectId, id));
}

/** The same of a campaign already read (analytics lists read their campaigns in one statement); null without variants. */
export async function abStatsOf(em: EntityManager, c: Pick<CampaignRow, 'id' | 'abTest' | 'abDecision'>): Promise<AbStatsView | null> {
  if (!c.abTest) return null;
  const test = c.abTest as unknown as AbTest;
  const counts = await variantCounts(em, c.id, test.variants.length);
  const decision = (c.abDecision as unknown as AbDecision | null) ?? null;
  return {
    metric: test.metric,
    afterTest: test.afterTest,
    variants: counts.variants.map((v) => ({ ...v, label: variantLabel(v.variant!) })),
    finalSend: { ...counts.remainder, winner: decision?.winner ?? null },
    decision,
    current: decideWinner({ metric: test.metric, samples: samplesOf(counts.variants) }),
  };
}
