import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { ContactEventsParams, DashboardTrackBody, DeletableEventNameParams, EventNameParams, ListEventsQuery, NamesSchema, StatsQuery, StatsSchema } from './schema';
import { TrackResponse } from '../track/schema';
import { UsageSchema } from '../contacts/schema';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { EventSchema, presentEvent } from '../presenters/event.presenter';
import { deleteEventsByName, eventNames, eventStats, listEvents } from '../../domain/events/event.service';
import { getContact } from '../../domain/contacts/contact.service';
import { usageRegistry } from '../../domain/usage/usage-registry';
import { billingGuard } from '../billing/guard';

const TAGS = ['Events'];

export function eventRoutes(routes: Routes, deps: ApiDeps): void {
  const billing = billingGuard(deps);
  routes.add({
    method: 'post',
    path: '/events/track',
    summary: 'Track an event from the dashboard (alias of /v1/track)',
    description: 'Session auth; the project is named in the body and the user must be a member of it.',
    tags: TAGS,
    auth: 'session',
    ownTransactions: 'Batched: requests share an intake round (domain/contacts/contact-intake.ts), committed per round',
    permission: 'events.track',
    body: DashboardTrackBody,
    responses: { 200: { description: 'Recorded', schema: TrackResponse }, ...errorResponses(401, 402, 404, 422) },
    handler: async ({ ctx, body, member }) => {
      const { projectId, ...input } = body;
      await member(projectId);
      await billing.assertTrack(ctx.state.em, projectId, input.email);
      const r = await deps.contactIntake.track(projectId, input);
      return { body: { success: true, data: { contact: r.contactId, event: r.eventId, timestamp: new Date(r.timestamp).toISOString() } } };
    },
  });

  routes.add({
    method: 'get',
    path: '/events',
    summary: 'Recent events, newest first (cursor pagination)',
    tags: TAGS,
    auth: 'secret',
    query: ListEventsQuery,
    responses: { 200: { description: 'A page of events', schema: cursorListSchema(EventSchema, 'EventList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listEvents(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentEvent) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/events/stats',
    summary: 'Event counts: totals, per name and per day over a window',
    tags: TAGS,
    auth: 'secret',
    query: StatsQuery,
    responses: { 200: { description: 'Statistics', schema: StatsSchema }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => ({ body: await eventStats(ctx.state.em, principal.projectId, query.days) }),
  });

  routes.add({
    method: 'get',
    path: '/events/names',
    summary: 'Distinct event names with counts',
    tags: TAGS,
    auth: 'secret',
    responses: { 200: { description: 'Names', schema: NamesSchema }, ...errorResponses(401) },
    handler: async ({ ctx, principal }) => ({
      body: { data: (await eventNames(ctx.state.em, principal.projectId)).map((n) => ({ ...n, lastSeenAt: new Date(n.lastSeenAt).toISOString() })) },
    }),
  });

  routes.add({
    method: 'get',
    path: '/events/contact/:contactId',
    summary: "One contact's events, newest first",
    tags: TAGS,
    auth: 'secret',
    params: ContactEventsParams,
    query: ListEventsQuery,
    responses: { 200: { description: 'A page of events', schema: cursorListSchema(EventSchema, 'EventList') }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      const projectId = principal.projectId;
      await getContact(ctx.state.em, projectId, params.contactId); // 404 for unknown or another project's contact
      const page = await listEvents(ctx.state.em, projectId, { ...query, contactId: params.contactId });
      return { body: { ...page, data: page.data.map(presentEvent) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/events/:eventName/usage',
    summary: 'Where an event name is referenced (segment filters, workflow triggers and conditions)',
    tags: TAGS,
    auth: 'secret',
    params: EventNameParams,
    responses: { 200: { description: 'References', schema: UsageSchema.extend({ event: z.string() }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, params, principal }) => ({
      body: { event: params.eventName, ...(await usageRegistry.eventUsage(ctx.state.em, principal.projectId, params.eventName)) },
    }),
  });

  routes.add({
    method: 'delete',
    path: '/events/:eventName',
    summary: 'Delete every event with this name in the project',
    description: 'Only client-tracked names: the service-emitted names (email.*, contact.*, segment.*) are refused with `reserved_event`.',
    tags: TAGS,
    auth: 'secret',
    params: DeletableEventNameParams,
    responses: { 200: { description: 'How many were deleted', schema: z.object({ event: z.string(), deleted: z.number().int() }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, params, principal }) => ({
      body: { event: params.eventName, deleted: await deleteEventsByName(ctx.state.em, principal.projectId, params.eventName) },
    }),
  });
}
