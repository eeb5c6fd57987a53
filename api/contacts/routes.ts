import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import {
  ContactIdParams,
  CreateContactBody,
  FieldParams,
  FieldSchema,
  FieldValuesQuery,
  FieldValuesResponse,
  ListContactsQuery,
  LookupBody,
  LookupResponse,
  UpdateContactBody,
  UsageSchema,
} from './schema';
import { errorResponses } from '../common.schema';
import { ContactSchema, ContactWithMetaSchema, cursorListSchema, presentContact } from '../presenters/contact.presenter';
import {
  createOrUpdateContact,
  deleteContact,
  getContact,
  listContacts,
  lookupContacts,
  updateContact,
} from '../../domain/contacts/contact.service';
import { customFieldName, deleteField, fieldValues, listFields } from '../../domain/contacts/contact-fields';
import { usageRegistry } from '../../domain/usage/usage-registry';
import { validationError } from '../../domain/errors';
import { billingGuard } from '../billing/guard';

const TAGS = ['Contacts'];

/** Field-value pages are offsets; the cursor keeps them opaque. */
function decodeOffset(cursor: string | undefined): number {
  if (!cursor) return 0;
  const m = /^o:(\d{1,9})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw validationError([{ field: 'query.cursor', message: 'Invalid cursor: pass the `cursor` value of the previous page unchanged', code: 'invalid_cursor' }]);
  return Number(m[1]);
}

export function contactRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = billingGuard(deps);
  // Fixed paths first: /contacts/:id would otherwise take /contacts/fields.
  routes.add({
    method: 'get',
    path: '/contacts/fields',
    summary: 'Standard and custom contact fields with inferred types and coverage',
    tags: TAGS,
    auth: 'secret',
    responses: { 200: { description: 'Fields', schema: z.object({ data: z.array(FieldSchema) }) }, ...errorResponses(401) },
    handler: async ({ ctx, principal }) => ({ body: { data: await listFields(ctx.state.em, principal.projectId) } }),
  });

  routes.add({
    method: 'get',
    path: '/contacts/fields/:field/values',
    summary: 'Distinct values of a custom field, most common first',
    description: '`field` is the data key, with or without the `data.` prefix.',
    tags: TAGS,
    auth: 'secret',
    params: FieldParams,
    query: FieldValuesQuery,
    responses: { 200: { description: 'Values with counts', schema: FieldValuesResponse }, ...errorResponses(401, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      const offset = decodeOffset(query.cursor);
      const page = await fieldValues(ctx.state.em, principal.projectId, params.field, { limit: query.limit, offset });
      const cursor = page.hasMore ? Buffer.from(`o:${offset + query.limit}`).toString('base64url') : null;
      return { body: { data: page.data, cursor, hasMore: page.hasMore, total: page.total } };
    },
  });

  routes.add({
    method: 'get',
    path: '/contacts/fields/:field/usage',
    summary: 'Where a custom field is referenced (segments, campaigns, workflows, templates)',
    tags: TAGS,
    auth: 'secret',
    params: FieldParams,
    responses: { 200: { description: 'References', schema: UsageSchema.extend({ field: z.string() }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, params, principal }) => {
      const field = customFieldName(params.field);
      return { body: { field, ...(await usageRegistry.fieldUsage(ctx.state.em, principal.projectId, field)) } };
    },
  });

  routes.add({
    method: 'delete',
    path: '/contacts/fields/:field',
    summary: 'Delete a custom field from every contact of the project',
    tags: TAGS,
    auth: 'secret',
    params: FieldParams,
    responses: { 200: { description: 'Removed', schema: z.object({ field: z.string(), contactsUpdated: z.number().int() }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: await deleteField(ctx.state.em, principal.projectId, params.field) }),
  });

  routes.add({
    method: 'post',
    path: '/contacts/lookup',
    summary: 'Which of up to 500 emails exist as contacts',
    tags: TAGS,
    auth: 'secret',
    body: LookupBody,
    responses: { 200: { description: 'One result per email, in the order given', schema: LookupResponse }, ...errorResponses(401, 422) },
    handler: async ({ ctx, body, principal }) => ({ body: { results: await lookupContacts(ctx.state.em, principal.projectId, body.emails) } }),
  });

  routes.add({
    method: 'get',
    path: '/contacts',
    summary: 'List contacts, newest first (cursor pagination)',
    tags: TAGS,
    auth: 'secret',
    query: ListContactsQuery,
    responses: { 200: { description: 'A page of contacts', schema: cursorListSchema(ContactSchema, 'ContactList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listContacts(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentContact) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/contacts',
    summary: 'Create or update a contact by email',
    description:
      'Answers 201 when the contact is new, 200 when it existed. New contacts are subscribed unless `subscribed` is false. ' +
      "A new contact past the project's contacts cap: 402 `BILLING_LIMIT_EXCEEDED`.",
    tags: TAGS,
    auth: 'secret',
    body: CreateContactBody,
    responses: {
      201: { description: 'Created', schema: ContactWithMetaSchema },
      200: { description: 'Existing contact (updated when anything changed)', schema: ContactWithMetaSchema },
      ...errorResponses(401, 402, 413, 422),
    },
    handler: async ({ ctx, body, principal }) => {
      await billing.assertContacts(ctx.state.em, principal.projectId, [body.email]);
      const r = await createOrUpdateContact(ctx.state.em, principal.projectId, body);
      return { status: r.isNew ? 201 : 200, body: { ...presentContact(r.contact), _meta: { isNew: r.isNew, isUpdate: r.isUpdate } } };
    },
  });

  routes.add({
    method: 'get',
    path: '/contacts/:id',
    summary: 'Get a contact',
    tags: TAGS,
    auth: 'secret',
    params: ContactIdParams,
    responses: { 200: { description: 'Contact', schema: ContactSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentContact(await getContact(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/contacts/:id',
    summary: 'Update email, subscription or data',
    description: '`data` is merged by the contact data rules (null deletes a key). A subscription change records contact.subscribed / contact.unsubscribed.',
    tags: TAGS,
    auth: 'secret',
    params: ContactIdParams,
    body: UpdateContactBody,
    responses: { 200: { description: 'Updated contact', schema: ContactSchema }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      body: presentContact(await updateContact(ctx.state.em, principal.projectId, params.id, body)),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/contacts/:id',
    summary: 'Delete a contact and its events',
    tags: TAGS,
    auth: 'secret',
    params: ContactIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteContact(ctx.state.em, principal.projectId, params.id);
      return {};
    },
  });
}
