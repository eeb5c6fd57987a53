import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement } from '../db/sql';
import type { Pool } from 'pg';
import type { EventConsumer, OutboxEvent } from '../events/event-consumer';
import { notFound } from '../errors';
import { logger } from '../logger';
import type { CampaignEmailMarkKind } from './campaign-stats.entity';
import { ENGAGEMENT_EVENT_NAMES, engagementOutcome } from '../events/engagement';

/**
 * A campaign's engagement counters, kept from events (`campaign_stats`, one row per campaign). The send activity
 * counts `audience`, `sent`, `failed` and `skipped` itself, in the statements that record those outcomes; everything
 * that happens after a message left is counted here, from the event outbox:
 *
 *   email.delivered       -> delivered        (once per email)
 *   email.open            -> opened_total     (+ opened_unique on the email's first open)
 *   email.click           -> clicked_total    (+ clicked_unique on the email's first click)
 *   email.bounced         -> bounced          (once per email; transient bounces are not bounces yet: SES retries)
 *   email.complained      -> complained       (once per email)
 *   contact.unsubscribed  -> unsubscribed     (once per email; the event's email is the one whose link was used,
 *                                              or the one complained about)
 *
 * An event belongs to a campaign through its email (`events.email_id` -> `emails.campaign_id`); other events cost
 * nothing (not in the statement) or one primary-key probe (an email without a campaign).
 *
 * Exactly once over an at-least-once outbox: every outcome counted once per email has a row in
 * `campaign_email_marks`, and only the statement that inserts it counts it; opens and clicks also add to the totals
 * only when their event's receipt (`campaign_event_receipts`) is new. Marks, receipts and counters are written by one
 * statement per batch, so a batch counts wholly or not at all, and a redelivered batch finds its marks and receipts.
 */

export const CAMPAIGN_STATS_CONSUMER = 'campaign-stats';

/**
 * One statement per batch ($1 event ids, $2 their email ids, $3 their marks; one entry per event):
 * - `ce`: the batch's events of campaign emails whose campaign has counters (deleted campaigns count nothing);
 * - `fresh`: receipts of the opens and clicks counted for the first time (the totals);
 * - `firsts`: the marks new to this email (the unique counters and the once-per-email ones);
 * - the campaigns' rows are locked in id order before any is updated: the `locked` CTE is forced to run first by the
 *   one-time filter of the UPDATE, so two batches touching the same campaigns never deadlock.
 * Inserts go in key order for the same reason.
 */
const COUNT_SQL = `
with ce as materialized (
  select b.event_id, b.email_id, b.mark, m.campaign_id
  from unnest($1::uuid[], $2::uuid[], $3::text[]) as b(event_id, email_id, mark)
  join emails m on m.id = b.email_id
  join campaign_stats s on s.campaign_id = m.campaign_id
),
fresh as (
  insert into campaign_event_receipts (event_id, campaign_id)
  select event_id, campaign_id from ce where mark in ('opened', 'clicked') order by event_id
  on conflict (event_id) do nothing
  returning event_id
),
firsts as (
  insert into campaign_email_marks (email_id, kind)
  select distinct email_id, mark from ce order by 1, 2
  on conflict (email_id, kind) do nothing
  returning email_id, kind
),
counted as (
  select ce.campaign_id, ce.mark || '_total' as counter from fresh join ce using (event_id)
  union all
  select c.campaign_id, f.kind || '_first' from firsts f join (select distinct email_id, campaign_id from ce) c using (email_id)
),
deltas as (
  select campaign_id,
    count(*) filter (where counter = 'delivered_first')::int as delivered,
    count(*) filter (where counter = 'opened_first')::int as opened_unique,
    count(*) filter (where counter = 'opened_total')::int as opened_total,
    count(*) filter (where counter = 'clicked_first')::int as clicked_unique,
    count(*) filter (where counter = 'clicked_total')::int as clicked_total,
    count(*) filter (where counter = 'bounced_first')::int as bounced,
    count(*) filter (where counter = 'complained_first')::int as complained,
    count(*) filter (where counter = 'unsubscribed_first')::int as unsubscribed
  from counted group by campaign_id
),
locked as (
  select s.campaign_id from campaign_stats s where s.campaign_id in (select campaign_id from deltas) order by s.campaign_id for update
)
update campaign_stats s set
  delivered = s.delivered + d.delivered,
  opened_unique = s.opened_unique + d.opened_unique,
  opened_total = s.opened_total + d.opened_total,
  clicked_unique = s.clicked_unique + d.clicked_unique,
  clicked_total = s.clicked_total + d.clicked_total,
  bounced = s.bounced + d.bounced,
  complained = s.complained + d.complained,
  unsubscribed = s.unsubscribed + d.unsubscribed,
  updated_at = now()
from deltas d
where s.campaign_id = d.campaign_id and (select count(*) from locked) >= 0`;

/** The events of a batch that can count, once each (a batch never holds one event twice, but a direct call might). */
function countable(events: readonly OutboxEvent[]): { ids: string[]; emailIds: string[]; marks: string[] } {
  const seen = new Set<string>();
  const out = { ids: [] as string[], emailIds: [] as string[], marks: [] as string[] };
  for (const e of events) {
    // The outcome names are the marks' (one per-email mark per outcome).
    const mark: CampaignEmailMarkKind | undefined = engagementOutcome(e);
    if (!mark || !e.emailId || seen.has(e.id)) continue;
    seen.add(e.id);
    out.ids.push(e.id);
    out.emailIds.push(e.emailId);
    out.marks.push(mark);
  }
  return out;
}

// Receipts only matter while their event can be delivered again: until the dispatcher removed its outbox row (in the
// round that handed it over, or when an operator discards it). Pruned by age of the event (UUIDv7 ids carry their
// creation time, so the primary key serves the range) with a week's margin, and never while an outbox row remains.
const RECEIPT_RETENTION_MS = 7 * 24 * 3_600_000;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_CHUNK = 5_000;
const PRUNE_SQL = `
delete from campaign_event_receipts where event_id in (
  select r.event_id from campaign_event_receipts r
  where r.event_id < $1::uuid
    and not exists (select 1 from event_outbox o where o.consumer = $2 and o.event_id = r.event_id)
  order by r.event_id limit $3
)`;

/** The smallest UUIDv7 of the millisecond `ms`: every id made before it sorts lower. */
export function uuidv7Floor(ms: number): string {
  const h = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-7000-8000-000000000000`;
}

let lastPrune = 0;
let pruning = false;

const CAMPAIGN_STATS_PRUNE = statement('campaign_stats_prune', PRUNE_SQL);

/** Deletes old receipts in small chunks (short transactions), in the background of the consumer. */
async function pruneReceipts(pool: Pool, now: number): Promise<number> {
  const floor = uuidv7Floor(now - RECEIPT_RETENTION_MS);
  let deleted = 0;
  for (;;) {
    const n = await sql(pool).run(CAMPAIGN_STATS_PRUNE, [floor, CAMPAIGN_STATS_CONSUMER, PRUNE_CHUNK]);
    deleted += n;
    if (n < PRUNE_CHUNK) return deleted;
  }
}

/** Starts a prune at most once an hour per process, never two at once; it does not hold up the batch. */
function maybePrune(pool: Pool): void {
  const now = Date.now();
  if (pruning || now - lastPrune < PRUNE_EVERY_MS) return;
  lastPrune = now;
  pruning = true;
  void pruneReceipts(pool, now)
    .then((n) => {
      if (n > 0) logger.debug({ deleted: n }, 'campaign stats: pruned event receipts');
    })
    .catch((err: unknown) => logger.warn({ err }, 'campaign stats: pruning event receipts failed; next try in an hour'))
    .finally(() => {
      pruning = false;
    });
}

const CAMPAIGN_STATS_COUNT = statement('campaign_stats_count', COUNT_SQL);

/** The outbox consumer that keeps campaigns' engagement counters (register it in domain/registry.ts). */
export const campaignStatsConsumer: EventConsumer = {
  name: CAMPAIGN_STATS_CONSUMER,
  eventNames: ENGAGEMENT_EVENT_NAMES,
  async handle(events, { pool }) {
    const { ids, emailIds, marks } = countable(events);
    if (ids.length > 0) await sql(pool).run(CAMPAIGN_STATS_COUNT, [ids, emailIds, marks]);
    maybePrune(pool);
  },
};

/** Prunes receipts now (tests and operators); the consumer does it by itself hourly. Returns how many were deleted. */
export function pruneCampaignEventReceipts(pool: Pool, now = Date.now()): Promise<number> {
  return pruneReceipts(pool, now);
}

// ---------------------------------------------------------------------------------------------------------------
// Reading

export interface CampaignCounters {
  audience: number;
  sent: number;
  delivered: number;
  openedUnique: number;
  openedTotal: number;
  clickedUnique: number;
  clickedTotal: number;
  bounced: number;
  complained: number;
  unsubscribed: number;
  failed: number;
  skipped: number;
}

export interface CampaignRates {
  deliveryRate: number;
  openRate: number;
  clickRate: number;
  clickToOpenRate: number;
  bounceRate: number;
  complaintRate: number;
  unsubscribeRate: number;
}

export type CampaignStatsView = { campaignId: string } & CampaignCounters & CampaignRates & { updatedAt: Date | null };

const ratio = (n: number, d: number) => (d > 0 ? Math.round((n / d) * 10_000) / 10_000 : 0);

/**
 * Rates of a campaign's counters, 0 when the denominator is 0, rounded to 4 decimals. Every rate is per message
 * sent, whether or not the relay reports deliveries (a plain SMTP relay reports none, so a rate per delivered
 * message would be undefined there, and would jump once reports start); click-to-open is unique clicks per unique
 * open, and can exceed 1 (readers whose mail client blocks the pixel still click).
 */
export function campaignRates(c: CampaignCounters): CampaignRates {
  return {
    deliveryRate: ratio(c.delivered, c.sent),
    openRate: ratio(c.openedUnique, c.sent),
    clickRate: ratio(c.clickedUnique, c.sent),
    clickToOpenRate: ratio(c.clickedUnique, c.openedUnique),
    bounceRate: ratio(c.bounced, c.sent),
    complaintRate: ratio(c.complained, c.sent),
    unsubscribeRate: ratio(c.unsubscribed, c.sent),
  };
}

type StatsRow = CampaignCounters & { campaignId: string; suppressed: number; updatedAt: Date | null };

const CAMPAIGN_STATS_GET = statement(
  'campaign_stats_get',
  `select c.id as "campaignId",
    coalesce(s.audience, 0) as audience, coalesce(s.sent, 0) as sent, coalesce(s.delivered, 0) as delivered,
    coalesce(s.opened_unique, 0) as "openedUnique", coalesce(s.opened_total, 0) as "openedTotal",
    coalesce(s.clicked_unique, 0) as "clickedUnique", coalesce(s.clicked_total, 0) as "clickedTotal",
    coalesce(s.bounced, 0) as bounced, coalesce(s.complained, 0) as complained, coalesce(s.unsubscribed, 0) as unsubscribed,
    coalesce(s.failed, 0) as failed, coalesce(s.skipped, 0) as skipped, coalesce(s.suppressed, 0) as suppressed, s.updated_at as "updatedAt"
  from campaigns c left join campaign_stats s on s.campaign_id = c.id
  where c.id = $1 and c.project_id = $2`,
);

/**
 * A campaign's counters and rates: one row (the campaign joined to its counters by primary key), never a scan of its
 * emails. Zeros and no `updatedAt` before the send started (no counters yet). 404 when the campaign is not the
 * project's.
 */
export async function getCampaignStats(em: EntityManager, projectId: string, campaignId: string): Promise<CampaignStatsView & { suppressed: number }> {
  const [row] = await sql(em).query<StatsRow>(
    CAMPAIGN_STATS_GET,
    [campaignId, projectId],
  );
  if (!row) throw notFound('Campaign');
  return { ...row, ...campaignRates(row) };
}
