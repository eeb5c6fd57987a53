import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, notFound, validationError, type FieldError } from '../errors';
import { compileBody, checkTemplateSyntax } from '../rendering/render';
import { assertSenderDomain } from '../domains/domain.service';
import { decodeCursor, likeEscape, toPage, type CursorPage } from '../pagination';
import { usageRegistry, type TemplateReference, type TemplateUsage } from '../usage/usage-registry';
import { Template, type TemplateType } from './template.entity';
import { sql, statement } from '../db/sql';
import { ProjectScopedCache } from '../cache/lookup-cache';
import type { ChangeFeed } from '../cache/change-feed';

/** What a send needs of a template. */
export interface TemplateForSend {
  id: string;
  type: TemplateType;
  subject: string;
  body: string;
  from: string | null;
  fromName: string | null;
  replyTo: string | null;
}

/**
 * Templates as /v1/send reads them, per API process. A trigger on `templates` (migration 20261122015000) drops a
 * project's entries through the change feed the moment one of its templates changes or is deleted; entries also
 * expire after a minute. Without a healthy feed nothing is cached.
 */
export type TemplateCache = ProjectScopedCache<TemplateForSend>;
export const createTemplateCache = (feed: ChangeFeed | undefined): TemplateCache => new ProjectScopedCache<TemplateForSend>(feed, 'templates', 60_000, 5_000);

const TEMPLATE_FOR_SEND = statement(
  'template_for_send',
  `select id, type, subject, body, from_email as "from", from_name as "fromName", reply_to as "replyTo"
  from templates where id = $1 and project_id = $2`,
);

/**
 * The template a /v1/send names: from the cache, else by one prepared statement (the send path is hot, and the
 * ORM's query building and hydration cost more than the query itself). 404 NOT_FOUND like findTemplate.
 */
export async function templateForSend(em: EntityManager, projectId: string, id: string, cache?: TemplateCache): Promise<TemplateForSend> {
  const load = async () => {
    const row = await sql(em).one<TemplateForSend>(
      TEMPLATE_FOR_SEND,
      [id, projectId],
    );
    return row && { value: row, projectId };
  };
  const row = cache ? await cache.get(`${projectId}:${id}`, load) : (await load())?.value;
  if (!row) throw notFound('Template');
  return row;
}

/** Body cap in UTF-8 bytes: far above any real email, far below what would strain a send or a list page. */
export const MAX_TEMPLATE_BODY_BYTES = 512 * 1024;
export const MAX_TEMPLATE_NAME = 200;
const COPY_SUFFIX = ' (copy)';

export interface CreateTemplateInput {
  name: string;
  subject: string;
  body: string;
  type: TemplateType;
  from?: string | null;
  fromName?: string | null;
  replyTo?: string | null;
}

/** PATCH: absent keys stay; `null` clears a sender setting. */
export type UpdateTemplateInput = Partial<CreateTemplateInput>;

export interface TemplateListQuery {
  limit: number;
  cursor?: string;
  type?: TemplateType;
  search?: string;
}

/** The template of the project, or 404 NOT_FOUND (another project's template is not found either). */
export async function findTemplate(em: EntityManager, projectId: string, id: string): Promise<Template> {
  const template = await em.findOne(Template, { id, project: projectId });
  if (!template) throw notFound('Template');
  return template;
}

/** Liquid syntax of the subject and body, checked at write time so a broken template never reaches a send. */
function assertTemplateSyntax(input: { subject?: string; body?: string }): void {
  const errors: FieldError[] = [];
  for (const field of ['subject', 'body'] as const) {
    const source = input[field];
    if (source === undefined) continue;
    const problem = checkTemplateSyntax(source);
    if (problem) errors.push({ field, message: `Invalid Liquid syntax: ${problem}`, code: 'invalid_template' });
  }
  if (errors.length) throw validationError(errors, 'The template is not valid Liquid');
}

/** Liquid first (both fields' errors at once), then the body as a send compiles it: invalid MJML is refused on save too. */
async function assertTemplateValid(input: { subject?: string; body?: string }): Promise<void> {
  assertTemplateSyntax(input);
  if (input.body !== undefined) await compileBody(input.body);
}

export async function createTemplate(em: EntityManager, projectId: string, input: CreateTemplateInput): Promise<Template> {
  await assertTemplateValid(input);
  if (input.from) await assertSenderDomain(em, projectId, input.from, { field: 'from' });
  const template = em.create(Template, {
    project: projectId,
    name: input.name,
    subject: input.subject,
    body: input.body,
    type: input.type,
    from: input.from ?? null,
    fromName: input.fromName ?? null,
    replyTo: input.replyTo ?? null,
  });
  await em.flush();
  return template;
}

/**
 * Applies any subset of fields. The sender domain is checked only when `from` changes: a template whose domain was
 * demoted later can still be renamed (sending from it is refused at send time anyway).
 */
export async function updateTemplate(em: EntityManager, projectId: string, id: string, patch: UpdateTemplateInput): Promise<Template> {
  const template = await findTemplate(em, projectId, id);
  await assertTemplateValid(patch);
  if (patch.from && patch.from !== template.from) await assertSenderDomain(em, projectId, patch.from, { field: 'from' });
  if (patch.name !== undefined) template.name = patch.name;
  if (patch.subject !== undefined) template.subject = patch.subject;
  if (patch.body !== undefined) template.body = patch.body;
  if (patch.type !== undefined) template.type = patch.type;
  if (patch.from !== undefined) template.from = patch.from;
  if (patch.fromName !== undefined) template.fromName = patch.fromName;
  if (patch.replyTo !== undefined) template.replyTo = patch.replyTo;
  await em.flush();
  return template;
}

/** Newest first (UUIDv7 ids); `search` is a case-insensitive substring of the name or subject, wildcards literal. */
export async function listTemplates(em: EntityManager, projectId: string, q: TemplateListQuery): Promise<CursorPage<Template>> {
  const after = decodeCursor(q.cursor);
  const search = q.search?.trim();
  const where = {
    project: projectId,
    ...(q.type ? { type: q.type } : {}),
    ...(search ? { $or: [{ name: { $ilike: `%${likeEscape(search)}%` } }, { subject: { $ilike: `%${likeEscape(search)}%` } }] } : {}),
  };
  const rows = await em.find(Template, after ? { ...where, id: { $lt: after } } : where, { orderBy: { id: 'desc' }, limit: q.limit + 1 });
  const total = after ? 0 : await em.count(Template, where);
  return toPage(rows, q.limit, total);
}

/** A copy in the same project named "<name> (copy)" (the name shortened to stay within 200 characters). */
export async function duplicateTemplate(em: EntityManager, projectId: string, id: string): Promise<Template> {
  const source = await findTemplate(em, projectId, id);
  const copy = em.create(Template, {
    project: projectId,
    name: `${[...source.name].slice(0, MAX_TEMPLATE_NAME - COPY_SUFFIX.length).join('')}${COPY_SUFFIX}`,
    subject: source.subject,
    body: source.body,
    type: source.type,
    from: source.from,
    fromName: source.fromName,
    replyTo: source.replyTo,
  });
  await em.flush();
  return copy;
}

/** Campaigns and workflow steps that reference the template, as registered by those features. */
export async function getTemplateUsage(em: EntityManager, projectId: string, id: string): Promise<TemplateUsage> {
  await findTemplate(em, projectId, id);
  return usageRegistry.templateUsage(em, projectId, id);
}

const label = (kind: 'campaign' | 'workflow', r: TemplateReference) => `${kind} "${r.name}"${r.where ? ` (${r.where})` : ''}`;

/**
 * Deletes the template unless an active campaign or an enabled workflow uses it (409 TEMPLATE_IN_USE). The template
 * row stays locked from the check to the delete, so a feature that activates a reference while holding a lock on
 * the template row (FOR SHARE, or a foreign key insert) cannot slip in between.
 */
export async function deleteTemplate(em: EntityManager, projectId: string, id: string): Promise<void> {
  await em.transactional(async (tx) => {
    const row = await sql(tx).one<{ id: string }>('select id from templates where id = $1 and project_id = $2 for update', [id, projectId]);
    if (!row) throw notFound('Template');
    const usage = await usageRegistry.templateUsage(tx, projectId, id);
    const blockers = [
      ...usage.campaigns.filter((r) => r.active).map((r) => label('campaign', r)),
      ...usage.workflows.filter((r) => r.active).map((r) => label('workflow', r)),
    ];
    if (blockers.length) {
      const shown = blockers.slice(0, 5).join(', ') + (blockers.length > 5 ? ` and ${blockers.length - 5} more` : '');
      throw conflict(
        'TEMPLATE_IN_USE',
        `The template cannot be deleted: it is used by the active ${shown}`,
        'See GET /templates/:id/usage; finish or cancel those campaigns and disable those workflows (or point them to another template) first.',
      );
    }
    await tx.nativeDelete(Template, { id, project: projectId });
  });
}
