import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/sql';
import { insertEventsSql, type SegmentEventData } from '../events/event-writer';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { compileFilter, pgTextArray, type CompiledFilter, type Filter } from '../filters';
import { AppError, conflict, notFound, validationError } from '../errors';
import { SQL_UUIDV7, uuidv7 } from '../ids';
import { normalizeEmail } from '../contacts/email-address';
import type { ContactRow } from '../contacts/contact.repository';
import { slugify } from './segment-slug';
import { segmentDeletionGuards } from './segment-guards';

type SegmentType = 'DYNAMIC' | 'STATIC';

export interface SegmentRow {
  id: string;
  name: string;
  slug: string;
  description: string | null;
  type: SegmentType;
  condition: Filter | null;
  trackMembership: boolean;
  memberCount: number;
  countedAt: Date | null;
  computedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const COLUMNS = `id, name, slug, description, type, condition, track_membership as "trackMembership", member_count as "memberCount",
  counted_at as "countedAt", computed_at as "computedAt", created_at as "createdAt", updated_at as "updatedAt"`;
const CONTACT_COLUMNS = 'c.id, c.email, c.subscribed, c.data, c.created_at as "createdAt", c.updated_at as "updatedAt"';


const row = (r: SegmentRow): SegmentRow => ({ ...r, memberCount: Number(r.memberCount) });

const entryEventName = (slug: string) => `segment.${slug}.entry`;
const exitEventName = (slug: string) => `segment.${slug}.exit`;

export async function listSegments(em: EntityManager, projectId: string): Promise<SegmentRow[]> {
  const rows = await sql(em).query<SegmentRow>(`select ${COLUMNS} from segments where project_id = $1 order by created_at, id`, [projectId]);
  return rows.map(row);
}

export async function getSegment(em: EntityManager, projectId: string, id: string): Promise<SegmentRow> {
  const [r] = await sql(em).query<SegmentRow>(`select ${COLUMNS} from segments where project_id = $1 and id = $2`, [projectId, id]);
  if (!r) throw notFound('Segment');
  return row(r);
}

function compiled(projectId: string, s: Pick<SegmentRow, 'condition'>): CompiledFilter {
  return compileFilter(s.condition!, { projectId, alias: 'c' });
}

/** Contacts matching a dynamic segment's condition, counted now. */
async function countDynamic(em: EntityManager, projectId: string, s: Pick<SegmentRow, 'condition'>): Promise<number> {
  const f = compiled(projectId, s);
  const [r] = await sql(em).query<{ n: string }>(`select count(*) as n from contacts c where c.project_id = $1 and (${f.at(2)})`, [projectId, ...f.params]);
  return Number(r!.n);
}

async function countMembers(em: EntityManager, segmentId: string): Promise<number> {
  const [r] = await sql(em).query<{ n: string }>('select count(*) as n from segment_memberships where segment_id = $1', [segmentId]);
  return Number(r!.n);
}

async function storeCount(em: EntityManager, id: string, n: number, computed = false): Promise<void> {
  await sql(em).query(`update segments set member_count = $1, counted_at = now()${computed ? ', computed_at = now()' : ''} where id = $2`, [n, id]);
}

export interface CreateSegmentInput {
  name: string;
  type: SegmentType;
  condition?: Filter;
  description?: string;
  trackMembership?: boolean;
}

/** Creates a segment with a slug unique in the project (`vip`, `vip-2`, ...) and counts its members. */
export async function createSegment(em: EntityManager, projectId: string, input: CreateSegmentInput): Promise<SegmentRow> {
  const base = slugify(input.name);
  const id = uuidv7();
  for (let attempt = 0; ; attempt++) {
    const taken = await sql(em).query<{ slug: string }>(
      `select slug from segments where project_id = $1 and (slug = $2 or slug like $3 escape '\\')`,
      [projectId, base, `${base.replace(/[\\%_]/g, (c) => `\\${c}`)}-%`],
    );
    const used = new Set(taken.map((t) => t.slug));
    let slug = base;
    for (let n = 2; used.has(slug); n++) slug = `${base}-${n}`;
    try {
      // Under a savepoint: the request's transaction lives on when the slug was taken meanwhile and this tries again.
      await sql(em).savepoint(() => sql(em).query(
        `insert into segments (id, project_id, name, slug, description, type, condition, track_membership) values ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)`,
        [id, projectId, input.name, slug, input.description ?? null, input.type, input.condition ? JSON.stringify(input.condition) : null, input.trackMembership ?? false],
      ));
      break;
    } catch (err) {
      if (!(err instanceof UniqueConstraintViolationException) || attempt >= 4) throw err;
    }
  }
  if (input.type === 'DYNAMIC') await storeCount(em, id, await countDynamic(em, projectId, { condition: input.condition! }));
  else await storeCount(em, id, 0);
  return getSegment(em, projectId, id);
}

export interface UpdateSegmentInput {
  name?: string;
  description?: string | null;
  condition?: Filter;
  trackMembership?: boolean;
}

/**
 * PATCH: the slug stays as created (it names the segment's events). A static segment refuses `condition`. Turning
 * tracking off forgets the computed membership, so turning it on again starts from an empty membership (the next
 * compute fires entry events for every member).
 */
export async function updateSegment(em: EntityManager, projectId: string, id: string, patch: UpdateSegmentInput): Promise<SegmentRow> {
  const current = await getSegment(em, projectId, id);
  if (patch.condition !== undefined && current.type === 'STATIC') {
    throw validationError([{ field: 'condition', message: 'A static segment has no condition: add or remove members instead', code: 'static_segment' }]);
  }
  await sql(em).query(
    `update segments set name = coalesce($1, name), description = case when $2 then $3 else description end,
       condition = coalesce($4::jsonb, condition), track_membership = coalesce($5, track_membership), updated_at = now()
     where id = $6 and project_id = $7`,
    [
      patch.name ?? null,
      patch.description !== undefined,
      patch.description ?? null,
      patch.condition ? JSON.stringify(patch.condition) : null,
      patch.trackMembership ?? null,
      id,
      projectId,
    ],
  );
  if (current.type === 'DYNAMIC' && patch.trackMembership === false && current.trackMembership) {
    await sql(em).query('delete from segment_memberships where segment_id = $1', [id]);
  }
  if (patch.condition) await storeCount(em, id, await countDynamic(em, projectId, { condition: patch.condition }));
  return getSegment(em, projectId, id);
}

/** Deletes the segment and its memberships; 409 SEGMENT_IN_USE when a registered guard objects. */
export async function deleteSegment(em: EntityManager, projectId: string, id: string): Promise<void> {
  await getSegment(em, projectId, id);
  const reason = await segmentDeletionGuards.blocker(em, projectId, id);
  if (reason) throw conflict('SEGMENT_IN_USE', `The segment cannot be deleted: ${reason}`, 'Finish or cancel what uses it first.');
  await sql(em).query('delete from segments where id = $1 and project_id = $2', [id, projectId]);
}

export interface MemberPage {
  data: ContactRow[];
  total: number;
  page: number;
  pageSize: number;
}

/** Members, newest contact first: evaluated live for a dynamic segment, from the member list for a static one. */
export async function listSegmentContacts(em: EntityManager, projectId: string, id: string, q: { page: number; pageSize: number }): Promise<MemberPage> {
  const s = await getSegment(em, projectId, id);
  const offset = (q.page - 1) * q.pageSize;
  let data: ContactRow[];
  let total: number;
  if (s.type === 'DYNAMIC') {
    const f = compiled(projectId, s);
    data = await sql(em).query<ContactRow>(
      `select ${CONTACT_COLUMNS} from contacts c where c.project_id = $1 and (${f.at(2)}) order by c.id desc limit $${f.params.length + 2} offset $${f.params.length + 3}`,
      [projectId, ...f.params, q.pageSize, offset],
    );
    total = await countDynamic(em, projectId, s);
  } else {
    data = await sql(em).query<ContactRow>(
      `select ${CONTACT_COLUMNS} from segment_memberships m join contacts c on c.id = m.contact_id
       where m.segment_id = $1 order by c.id desc limit $2 offset $3`,
      [id, q.pageSize, offset],
    );
    total = await countMembers(em, id);
  }
  return { data, total, page: q.page, pageSize: q.pageSize };
}

function requireStatic(s: SegmentRow): void {
  if (s.type !== 'STATIC') {
    throw new AppError(422, 'VALIDATION_ERROR', 'Members are managed on static segments only; a dynamic segment is defined by its condition', {
      errors: [{ field: 'id', message: 'Not a static segment', code: 'dynamic_segment' }],
    });
  }
}

export interface AddMembersResult {
  added: number;
  alreadyMembers: number;
  created: number;
  notFound: string[];
  memberCount: number;
}

/**
 * Adds contacts by email to a static segment. Unknown emails are reported in `notFound`, or created first with
 * `createMissing` (subscribed as given, default true; existing contacts keep their subscription). One statement.
 */
export async function addSegmentMembers(
  em: EntityManager,
  projectId: string,
  id: string,
  input: { emails: string[]; createMissing?: boolean; subscribed?: boolean },
): Promise<AddMembersResult> {
  const s = await getSegment(em, projectId, id);
  requireStatic(s);
  const emails = [...new Set(input.emails.map(normalizeEmail))];
  const [r] = await sql(em).query<{ added: string; created: string; targets: string; notFound: string[] | null }>(
    `with input as (select distinct e as email from unnest($1::text[]) as e),
     created as (
       insert into contacts (id, project_id, email, subscribed)
       select ${SQL_UUIDV7}, $2::uuid, i.email, $3::boolean from input i
       where $4::boolean and not exists (select 1 from contacts c where c.project_id = $5 and c.email = i.email)
       order by i.email
       on conflict (project_id, email) do nothing
       returning id, email
     ),
     targets as (
       select c.id, c.email from contacts c join input i on i.email = c.email where c.project_id = $6
       union all select id, email from created
     ),
     added as (
       insert into segment_memberships (segment_id, contact_id) select $7::uuid, t.id from targets t
       on conflict do nothing returning contact_id
     )
     select (select count(*) from added) as added, (select count(*) from created) as created, (select count(*) from targets) as targets,
            (select json_agg(i.email order by i.email) from input i where not exists (select 1 from targets t where t.email = i.email)) as "notFound"`,
    [pgTextArray(emails), projectId, input.subscribed ?? true, input.createMissing ?? false, projectId, projectId, id],
  );
  const memberCount = await countMembers(em, id);
  await storeCount(em, id, memberCount);
  const added = Number(r!.added);
  return { added, alreadyMembers: Number(r!.targets) - added, created: Number(r!.created), notFound: r!.notFound ?? [], memberCount };
}

/** Removes contacts by email from a static segment; the contacts themselves stay. */
export async function removeSegmentMembers(em: EntityManager, projectId: string, id: string, emails: string[]): Promise<{ removed: number; memberCount: number }> {
  const s = await getSegment(em, projectId, id);
  requireStatic(s);
  const [r] = await sql(em).query<{ n: string }>(
    `with gone as (
       delete from segment_memberships m using contacts c
       where m.segment_id = $1 and c.id = m.contact_id and c.project_id = $2 and c.email = any($3::text[])
       returning 1)
     select count(*) as n from gone`,
    [id, projectId, pgTextArray([...new Set(emails.map(normalizeEmail))])],
  );
  const memberCount = await countMembers(em, id);
  await storeCount(em, id, memberCount);
  return { removed: Number(r!.n), memberCount };
}

/** Refreshes the cached count only: no membership writes, no events. */
export async function refreshSegment(em: EntityManager, projectId: string, id: string): Promise<SegmentRow> {
  const s = await getSegment(em, projectId, id);
  const n = s.type === 'DYNAMIC' ? await countDynamic(em, projectId, s) : await countMembers(em, id);
  await storeCount(em, id, n);
  return getSegment(em, projectId, id);
}

export interface ComputeResult {
  entered: number;
  exited: number;
  memberCount: number;
}

/**
 * Recomputes a tracked dynamic segment. One statement, set-based: the current matches are diffed against the
 * persisted membership, the membership is brought up to date, and one `segment.<slug>.entry` / `.exit` event per
 * change is written into the contact's event stream. The segment row is locked for the transaction, so two computes
 * of one segment never interleave and never fire an event twice. The events reach their consumers through the event
 * outbox, written in the same transaction. An untracked or static segment only refreshes its count.
 */
export async function computeSegment(em: EntityManager, projectId: string, id: string): Promise<ComputeResult> {
  const s = await getSegment(em, projectId, id);
  if (s.type !== 'DYNAMIC' || !s.trackMembership) {
    const refreshed = await refreshSegment(em, projectId, id);
    return { entered: 0, exited: 0, memberCount: refreshed.memberCount };
  }
  return em.transactional(async (tx) => {
    const [locked] = await sql(tx).query<SegmentRow>(`select ${COLUMNS} from segments where id = $1 and project_id = $2 for update`, [id, projectId]);
    if (!locked || locked.type !== 'DYNAMIC' || !locked.trackMembership) throw notFound('Segment');
    const f = compiled(projectId, locked);
    // `cur` is read once; every sub-statement sees the membership as it was before this statement.
    const segmentEvent: SegmentEventData = { segmentId: id, segmentName: locked.name, via: 'segment.compute' };
    const changes = await sql(tx).query<{ name: string; n: number }>(
      `with cur as materialized (select c.id from contacts c where c.project_id = $1 and (${f.at(6)})),
       entered as (
         insert into segment_memberships (segment_id, contact_id)
         select $2::uuid, cur.id from cur where not exists (select 1 from segment_memberships m where m.segment_id = $2::uuid and m.contact_id = cur.id)
         returning contact_id
       ),
       exited as (
         delete from segment_memberships m where m.segment_id = $2::uuid and not exists (select 1 from cur where cur.id = m.contact_id)
         returning contact_id
       ),
       changes as (select contact_id, $3::text as name from entered union all select contact_id, $4::text as name from exited),
       ev as (
         ${insertEventsSql({ projectId: '$1::uuid', contactId: 'contact_id', name: 'name', data: '$5::jsonb', source: 'SYSTEM' }, 'from changes', 'name')}
       )
       select name, count(*)::int as n from ev group by name`,
      [projectId, id, entryEventName(locked.slug), exitEventName(locked.slug), JSON.stringify(segmentEvent), ...f.params],
    );
    const memberCount = await countMembers(tx, id);
    await storeCount(tx, id, memberCount, true);
    const entered = changes.find((c) => c.name === entryEventName(locked.slug))?.n ?? 0;
    const exited = changes.find((c) => c.name === exitEventName(locked.slug))?.n ?? 0;
    return { entered, exited, memberCount };
  });
}
