import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { TemplateSchema, presentTemplate } from '../presenters/template.presenter';
import { CreateTemplateBody, DuplicateTemplateResponse, ListTemplatesQuery, TemplateIdParams, TemplateUsageResponse, UpdateTemplateBody } from './schema';
import {
  createTemplate,
  deleteTemplate,
  duplicateTemplate,
  findTemplate,
  getTemplateUsage,
  listTemplates,
  updateTemplate,
} from '../../domain/templates/template.service';
import type { TemplateReference } from '../../domain/usage/usage-registry';

const TAGS = ['Templates'];

// A body at the 512 KB cap must reach validation even when JSON escaping doubles it, whatever MAX_JSON_BODY is.
const TEMPLATE_BODY_LIMIT = 2 * 1024 * 1024;

export function templateRoutes(routes: Routes, deps: ApiDeps): void {
  // A change made here is seen by this process's next send at once; other processes learn it from the change feed.
  const forgetCached = (projectId: string) => deps.caches.templates?.forgetProject(projectId);
  // The contact field usage endpoint lists templates that read a field once the API has loaded this module.

  routes.add({
    method: 'get',
    path: '/templates',
    summary: 'List templates, newest first (cursor pagination)',
    description: '`search` matches a case-insensitive substring of the name or the subject; `type` filters by type.',
    tags: TAGS,
    auth: 'secret',
    query: ListTemplatesQuery,
    responses: { 200: { description: 'A page of templates', schema: cursorListSchema(TemplateSchema, 'TemplateList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listTemplates(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentTemplate) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/templates',
    summary: 'Create a template',
    description:
      'Subject and body are Liquid (syntax errors: 422 `invalid_template`). `from`, when given, must be on a VERIFIED ' +
      'domain of the project (403 DOMAIN_NOT_VERIFIED).',
    tags: TAGS,
    auth: 'secret',
    body: CreateTemplateBody,
    bodyLimit: TEMPLATE_BODY_LIMIT,
    responses: { 201: { description: 'Created', schema: TemplateSchema }, ...errorResponses(401, 403, 413, 422) },
    handler: async ({ ctx, body, principal }) => ({
      status: 201,
      body: presentTemplate(await createTemplate(ctx.state.em, principal.projectId, body)),
    }),
  });

  routes.add({
    method: 'get',
    path: '/templates/:id',
    summary: 'Get a template',
    tags: TAGS,
    auth: 'secret',
    params: TemplateIdParams,
    responses: { 200: { description: 'Template', schema: TemplateSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentTemplate(await findTemplate(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/templates/:id',
    summary: 'Update any subset of a template',
    description: '`from`, `fromName` or `replyTo` set to null clear the setting. A changed `from` must be on a VERIFIED domain.',
    tags: TAGS,
    auth: 'secret',
    params: TemplateIdParams,
    body: UpdateTemplateBody,
    bodyLimit: TEMPLATE_BODY_LIMIT,
    responses: { 200: { description: 'Updated template', schema: TemplateSchema }, ...errorResponses(401, 403, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal, afterCommit }) => {
      const template = await updateTemplate(ctx.state.em, principal.projectId, params.id, body);
      afterCommit(() => forgetCached(principal.projectId));
      return { body: presentTemplate(template) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/templates/:id',
    summary: 'Delete a template',
    description: '409 TEMPLATE_IN_USE while an active campaign or an enabled workflow uses it (see the usage endpoint).',
    tags: TAGS,
    auth: 'secret',
    params: TemplateIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal, afterCommit }) => {
      await deleteTemplate(ctx.state.em, principal.projectId, params.id);
      afterCommit(() => forgetCached(principal.projectId));
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/templates/:id/duplicate',
    summary: 'Copy a template as "<name> (copy)"',
    description: 'The copy keeps subject, body, type and sender settings.',
    tags: TAGS,
    auth: 'secret',
    params: TemplateIdParams,
    responses: { 201: { description: 'The id of the copy', schema: DuplicateTemplateResponse }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      const copy = await duplicateTemplate(ctx.state.em, principal.projectId, params.id);
      return { status: 201, body: { id: copy.id } };
    },
  });

  routes.add({
    method: 'get',
    path: '/templates/:id/usage',
    summary: 'Campaigns and workflow steps that reference the template',
    description: '`active` references (scheduled or sending campaigns, enabled workflows) block DELETE.',
    tags: TAGS,
    auth: 'secret',
    params: TemplateIdParams,
    responses: { 200: { description: 'References', schema: TemplateUsageResponse }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      const usage = await getTemplateUsage(ctx.state.em, principal.projectId, params.id);
      // Finders are other features' code: answer the documented shape only.
      const shape = (r: TemplateReference) => ({ id: r.id, name: r.name, ...(r.where ? { where: r.where } : {}), active: r.active });
      return { body: { campaigns: usage.campaigns.map(shape), workflows: usage.workflows.map(shape) } };
    },
  });
}
