import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { presentContact } from '../presenters/contact.presenter';
import { SegmentComputeSchema, SegmentSchema, presentSegment, presentSegmentCompute } from '../presenters/segment.presenter';
import {
  AddMembersBody,
  AddMembersResponse,
  CreateSegmentBody,
  RemoveMembersBody,
  RemoveMembersResponse,
  SegmentContactsQuery,
  SegmentContactsResponse,
  SegmentIdParams,
  UpdateSegmentBody,
} from './schema';
import {
  addSegmentMembers,
  createSegment,
  deleteSegment,
  getSegment,
  listSegmentContacts,
  listSegments,
  refreshSegment,
  removeSegmentMembers,
  updateSegment,
} from '../../domain/segments/segment.service';
import { getSegmentCompute, requestSegmentCompute } from '../../domain/segments/segment-compute';
import { asFilter } from '../../domain/filters';

const TAGS = ['Segments'];

export function segmentRoutes(routes: Routes, deps: ApiDeps): void {
  // The usage endpoints of contacts and events report segments once the API has loaded this module.

  routes.add({
    method: 'get',
    path: '/segments',
    summary: 'All segments of the project (no pagination)',
    tags: TAGS,
    auth: 'secret',
    responses: { 200: { description: 'Segments, oldest first', schema: z.object({ data: z.array(SegmentSchema) }) }, ...errorResponses(401) },
    handler: async ({ ctx, principal }) => ({ body: { data: (await listSegments(ctx.state.em, principal.projectId)).map((s) => presentSegment(s)) } }),
  });

  routes.add({
    method: 'post',
    path: '/segments',
    summary: 'Create a segment',
    description:
      'DYNAMIC requires `condition`, STATIC refuses it. The variant body `{ name, filters, trackMembership? }` creates a dynamic segment ' +
      'whose condition is `filters`. The member count is computed on creation.',
    tags: TAGS,
    auth: 'secret',
    body: CreateSegmentBody,
    responses: { 201: { description: 'Created', schema: SegmentSchema }, ...errorResponses(401, 413, 422) },
    handler: async ({ ctx, body, principal }) => {
      const variant = body.filters !== undefined;
      const condition = body.filters ?? body.condition;
      const segment = await createSegment(ctx.state.em, principal.projectId, {
        name: body.name,
        type: variant ? 'DYNAMIC' : body.type!,
        condition: condition ? asFilter(condition) : undefined,
        description: body.description,
        trackMembership: body.trackMembership,
      });
      return { status: 201, body: presentSegment(segment, { echoFilters: variant }) };
    },
  });

  routes.add({
    method: 'get',
    path: '/segments/:id',
    summary: 'Get a segment with its cached member count',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    responses: { 200: { description: 'Segment', schema: SegmentSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentSegment(await getSegment(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/segments/:id',
    summary: 'Update name, description, condition (dynamic only) or trackMembership',
    description: 'A new condition recounts the members. Turning trackMembership off forgets the computed membership.',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    body: UpdateSegmentBody,
    responses: { 200: { description: 'Updated segment', schema: SegmentSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      body: presentSegment(
        await updateSegment(ctx.state.em, principal.projectId, params.id, {
          ...body,
          condition: body.condition ? asFilter(body.condition) : undefined,
        }),
      ),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/segments/:id',
    summary: 'Delete a segment',
    description: '409 SEGMENT_IN_USE while an active campaign uses it.',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteSegment(ctx.state.em, principal.projectId, params.id);
      return {};
    },
  });

  routes.add({
    method: 'get',
    path: '/segments/:id/contacts',
    summary: 'Members of a segment, newest first (live for dynamic segments)',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    query: SegmentContactsQuery,
    responses: { 200: { description: 'A page of members', schema: SegmentContactsResponse }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      const page = await listSegmentContacts(ctx.state.em, principal.projectId, params.id, query);
      return { body: { ...page, data: page.data.map(presentContact) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/segments/:id/members',
    summary: 'Add contacts to a static segment by email',
    description: 'Static segments only (422 `dynamic_segment` otherwise). Unknown emails are listed in notFound unless createMissing creates them.',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    body: AddMembersBody,
    responses: { 200: { description: 'Result', schema: AddMembersResponse }, ...errorResponses(401, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({ body: await addSegmentMembers(ctx.state.em, principal.projectId, params.id, body) }),
  });

  routes.add({
    method: 'delete',
    path: '/segments/:id/members',
    summary: 'Remove contacts from a static segment by email',
    description: 'JSON body `{ emails }` (1 to 1000 addresses). The contacts themselves stay. Static segments only.',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    body: RemoveMembersBody,
    responses: { 200: { description: 'Result', schema: RemoveMembersResponse }, ...errorResponses(400, 401, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => {
      return { body: await removeSegmentMembers(ctx.state.em, principal.projectId, params.id, body.emails) };
    },
  });

  routes.add({
    method: 'post',
    path: '/segments/:id/compute',
    summary: 'Start a membership compute (a workflow); poll GET /segments/:id/compute for its result',
    description:
      'Runs as the Temporal workflow `segment-compute/<segmentId>` and answers 202 at once with the compute, usually RUNNING ' +
      '(`Location` names the status endpoint). One compute per segment runs at a time: a request while one runs answers that one. ' +
      'Tracked dynamic segments: the membership is diffed against the last compute, stored, and every change records ' +
      '`segment.<slug>.entry` or `segment.<slug>.exit` on the contact. Other segments: the count is refreshed only (entered and exited 0). ' +
      "Tracked dynamic segments are also recomputed on a schedule (the project's settings.segmentRecomputeMinutes, hourly by default).",
    tags: TAGS,
    auth: 'secret',
    ownTransactions: "Starts the compute's workflow, then records its run beside the run's own end (segment-compute.ts): each write commits alone",
    params: SegmentIdParams,
    responses: { 202: { description: 'The compute (started, or the one running)', schema: SegmentComputeSchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal }) => {
      const compute = await requestSegmentCompute(ctx.state.em, deps.temporal, principal.projectId, params.id);
      ctx.set('Location', `/segments/${params.id}/compute`);
      return { status: 202, body: presentSegmentCompute(compute) };
    },
  });

  routes.add({
    method: 'get',
    path: '/segments/:id/compute',
    summary: "The segment's last compute: RUNNING, COMPLETED with { entered, exited, memberCount }, or FAILED",
    description: 'The last compute, started through the API or by the schedule. 404 also when the segment was never computed.',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    responses: { 200: { description: 'The last compute', schema: SegmentComputeSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentSegmentCompute(await getSegmentCompute(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'post',
    path: '/segments/:id/refresh',
    summary: 'Refresh the cached member count (no events, no membership writes)',
    tags: TAGS,
    auth: 'secret',
    params: SegmentIdParams,
    responses: { 200: { description: 'Segment with the fresh count', schema: SegmentSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentSegment(await refreshSegment(ctx.state.em, principal.projectId, params.id)) }),
  });
}
