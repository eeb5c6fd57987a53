import type { EntityManager } from '@mikro-orm/postgresql';
import { andFilters, compileFilter, fixedFilter, parseFilter, type CompiledFilter } from '../filters';
import { sql } from '../db/sql';
import { validationError } from '../errors';
import { suppressedReasonSql } from '../suppressions/suppression.repository';
import type { CampaignRow } from './campaign.entity';

type AudienceSpec = Pick<CampaignRow, 'projectId' | 'audienceType' | 'segmentId' | 'audienceFilter'>;

/**
 * A campaign's audience as a WHERE expression over `contacts c`: every subscribed contact of the
 * project (marketing mail never reaches an unsubscribed contact), narrowed by the segment (a static segment's
 * members; a dynamic segment's condition, evaluated now) or by the campaign's own filter. The one definition used by
 * the draft's audience size and the send's snapshot, so both count the same people.
 */
export async function audienceWhere(em: EntityManager, c: AudienceSpec): Promise<CompiledFilter> {
  const base = fixedFilter('c.project_id = $1::uuid and c.subscribed', [c.projectId]);
  const narrow = await narrowing(em, c);
  return narrow ? andFilters(base, narrow) : base;
}

async function narrowing(em: EntityManager, c: AudienceSpec): Promise<CompiledFilter | null> {
  if (c.audienceType === 'ALL') return null;
  if (c.audienceType === 'FILTERED') {
    const parsed = parseFilter(c.audienceFilter);
    if (!parsed.ok) throw validationError(parsed.issues.map((i) => ({ field: ['audienceFilter', ...i.path].join('.'), message: i.message, code: i.code })));
    return compileFilter(parsed.filter, { projectId: c.projectId, alias: 'c' });
  }
  const [segment] = c.segmentId
    ? await sql(em).query<{ type: 'STATIC' | 'DYNAMIC'; condition: unknown }>('select type, condition from segments where id = $1 and project_id = $2', [
        c.segmentId,
        c.projectId,
      ])
    : [];
  if (!segment) throw validationError([{ field: 'segmentId', message: 'The segment no longer exists', code: 'not_found' }]);
  if (segment.type === 'STATIC') return fixedFilter('c.id in (select m.contact_id from segment_memberships m where m.segment_id = $1::uuid)', [c.segmentId]);
  const parsed = parseFilter(segment.condition);
  // A stored condition was valid when saved; one that no longer parses matches nobody rather than everybody.
  if (!parsed.ok) return fixedFilter('false', []);
  return compileFilter(parsed.filter, { projectId: c.projectId, alias: 'c' });
}

/**
 * How many contacts the campaign would reach if it were sent now. `withoutSuppressed`: only those whose address is not
 * suppressed, the rows an A/B test's split deals from once the snapshot is taken.
 */
export async function countAudience(em: EntityManager, c: AudienceSpec, opts: { withoutSuppressed?: boolean } = {}): Promise<number> {
  const where = await audienceWhere(em, c);
  const unsuppressed = opts.withoutSuppressed ? ` and ${suppressedReasonSql('c.project_id', 'c.email')} is null` : '';
  const [row] = await sql(em).query<{ n: string }>(`select count(*) as n from contacts c where ${where.at(1)}${unsuppressed}`, where.params);
  return Number(row!.n);
}
