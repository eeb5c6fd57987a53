import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { emailOutcomes } from '../metrics';
import { suppressedErrorSql } from '../suppressions/suppression.service';

/**
 * The snapshot's recipients whose address is on the suppression list end SUPPRESSED (with the reason in `error`) and
 * are counted in `campaign_stats.suppressed`, before any of the campaign is sent: one set-based statement per campaign
 * (the campaign's rows by their index, each probing the suppressions' unique index), run by the send's first activity
 * right after the snapshot and before any partition reads a chunk. Idempotent: only QUEUED rows change, so a retried
 * activity counts nothing twice. Returns how many it marked.
 */
export async function suppressCampaignRecipients(em: EntityManager, campaignId: string): Promise<number> {
  const row = await sql(em).one<{ n: number }>(
    `with upd as (
       update emails e set status = 'SUPPRESSED', error = ${suppressedErrorSql('s.reason')}, updated_at = now()
       from suppressions s
       where e.campaign_id = $1 and e.status = 'QUEUED' and s.project_id = e.project_id and s.email = e.to_email
       returning 1
     ),
     n as (select count(*)::int as n from upd),
     st as (update campaign_stats set suppressed = suppressed + n.n, updated_at = now() from n where campaign_id = $1 and n.n > 0)
     select n from n`,
    [campaignId],
  );
  const n = row?.n ?? 0;
  if (n > 0) emailOutcomes.inc({ source: 'campaign', status: 'suppressed' }, n);
  return n;
}
