import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { SuppressionSchema, presentSuppression } from '../presenters/suppression.presenter';
import { AddSuppressionsBody, AddSuppressionsResponse, ListSuppressionsQuery, MAX_SUPPRESSIONS_PER_CALL, SuppressionEmailParams } from './schema';
import { addSuppressions, listSuppressions, removeSuppression } from '../../domain/suppressions/suppression.service';

const TAGS = ['Suppressions'];

/**
 * The project's suppression list (README › Suppression list). Handlers are plain service calls on `ctx.state.em`, so
 * the write routes run in the request's transaction like any other.
 */
export function suppressionRoutes(routes: Routes, _deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/suppressions',
    summary: 'List suppressed addresses, newest first (cursor pagination)',
    description:
      'Addresses no send of the project mails: `/v1/send`, campaigns, automation SEND_EMAIL steps and campaign test sends store an email ' +
      'to one as SUPPRESSED and never hand it to SMTP. Entries come from hard bounces (a 5xx about the recipient while sending, permanent ' +
      'bounce reports), complaints, repeated soft bounces and POST /suppressions. Filter by `reason`, one `email`, or a `search` substring.',
    tags: TAGS,
    auth: 'secret',
    query: ListSuppressionsQuery,
    responses: { 200: { description: 'A page of the list', schema: cursorListSchema(SuppressionSchema, 'SuppressionList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listSuppressions(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentSuppression) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/suppressions',
    summary: 'Suppress addresses by hand',
    description:
      `One to ${MAX_SUPPRESSIONS_PER_CALL} addresses, reason \`manual\`, source \`api\`. Idempotent: an address already on the list keeps its ` +
      'entry (its reason, source and detail) and comes back with `_meta.isNew` false. Answers every distinct address once, in the order given.',
    tags: TAGS,
    auth: 'secret',
    body: AddSuppressionsBody,
    responses: { 200: { description: 'The entries after the call', schema: AddSuppressionsResponse }, ...errorResponses(401, 422) },
    handler: async ({ ctx, body, principal }) => {
      const rows = await addSuppressions(ctx.state.em, principal.projectId, body);
      return { body: { data: rows.map(({ isNew, ...row }) => ({ ...presentSuppression(row), _meta: { isNew } })) } };
    },
  });

  routes.add({
    method: 'delete',
    path: '/suppressions/:email',
    summary: 'Reactivate an address: remove it from the suppression list',
    description:
      'Later sends mail it again, and its soft bounces count afresh. Emails already stored as SUPPRESSED stay so (send again). 404 when the ' +
      'address is not on the list.',
    tags: TAGS,
    auth: 'secret',
    params: SuppressionEmailParams,
    responses: { 204: { description: 'Removed' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      await removeSuppression(ctx.state.em, principal.projectId, params.email);
      return {};
    },
  });
}
