import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { Instant } from '../campaigns/schema';
import { Cursor, Limit } from '../contacts/schema';
import { ACTIVITY_TYPE_NAMES, type ActivityType } from '../../domain/activity/activity-types';
import { activityFeed, activityRecentCount, activityStats, activityTypes, activityUpcoming } from '../../domain/activity/activity.service';

const TAGS = ['Activity'];

const TypeName = z.enum(ACTIVITY_TYPE_NAMES);
const TYPE_ALT = ACTIVITY_TYPE_NAMES.map((t) => t.replace(/\./g, '\\.')).join('|');

const Types = z
  .string()
  .max(500)
  .transform((v, ctx) => {
    const list = v.split(',').map((t) => t.trim()).filter(Boolean);
    for (const t of list) if (!(ACTIVITY_TYPE_NAMES as readonly string[]).includes(t)) ctx.addIssue({ code: 'custom', message: `Unknown activity type ${t} (GET /activity/types lists them)`, params: { code: 'invalid_type' } });
    return [...new Set(list)] as ActivityType[];
  })
  .optional()
  .meta({ description: 'Comma-separated activity types (default: all; `GET /activity/types` lists them).', pattern: `^((${TYPE_ALT})(,(${TYPE_ALT}))*)?$` });

const Uuid = (what: string) => z.uuid({ error: `${what} must be a UUID` });

const FeedQuery = z.object({
  limit: Limit,
  cursor: Cursor,
  types: Types,
  contactId: Uuid('contactId').optional().meta({ description: "One contact's activity (events and automation steps)." }),
  campaignId: Uuid('campaignId').optional().meta({ description: "One campaign's activity (its start and end, and its emails' events)." }),
  automationId: Uuid('automationId').optional().meta({ description: "One automation's steps." }),
  from: Instant('from').optional().meta({ description: 'Only what happened at or after this.' }),
  to: Instant('to').optional().meta({ description: 'Only what happened before this.' }),
});

const Item = z
  .object({
    id: z.string().meta({ description: 'Stable key of the item: the event id, `c:<campaign>:1|2` (start, end) or `s:<execution>:<seq>`.' }),
    type: TypeName,
    occurredAt: z.iso.datetime(),
    name: z.string().meta({ description: 'The event name, the campaign name, or the step type.' }),
    contactId: z.string().nullable(),
    emailId: z.string().nullable(),
    campaignId: z.string().nullable(),
    automationId: z.string().nullable(),
    executionId: z.string().nullable(),
    data: z.record(z.string(), z.unknown()).meta({ description: "The event's data, the campaign's status and audience size, or the step's outcome." }),
  })
  .meta({ id: 'ActivityItem' });

const Counts = z.object(Object.fromEntries(ACTIVITY_TYPE_NAMES.map((t) => [t, z.number().int()]))).meta({ id: 'ActivityCounts' });

const Upcoming = z
  .object({
    type: z.enum(['campaign.scheduled', 'automation.wake']),
    at: z.iso.datetime(),
    campaignId: z.string().nullable(),
    automationId: z.string().nullable(),
    executionId: z.string().nullable(),
    contactId: z.string().nullable(),
    name: z.string().nullable().meta({ description: "The campaign's name, or the name (else the type) of the step the run waits in." }),
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'UpcomingItem' });

export function activityRoutes(routes: Routes, _deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/activity',
    summary: 'What happened, across resources, newest first',
    description:
      "Sends, deliveries, opens, clicks, bounces, complaints, failures, subscriptions, segment entries and exits, tracked events, campaign starts and ends, " +
      "and automation steps (`GET /activity/types`). Campaign messages appear as the campaign's start and end (with its audience size) and through their " +
      'engagement events. Filters combine; `contactId` leaves out campaign items, `campaignId` leaves out automation steps, `automationId` shows that ' +
      "automation's steps only. Cursor pagination: pass the page's `cursor` for the next one.",
    tags: TAGS,
    auth: 'secret',
    query: FeedQuery,
    responses: {
      200: {
        description: 'A page of activity',
        schema: z
          .object({
            data: z.array(Item),
            cursor: z.string().nullable(),
            hasMore: z.boolean(),
            total: z.number().int().meta({ description: 'Items for these filters (first page only; 0 on later pages), events as the rollups have counted them.' }),
          })
          .meta({ id: 'ActivityPage' }),
      },
      ...errorResponses(401, 422),
    },
    handler: async ({ ctx, query, principal }) => ({ body: await activityFeed(ctx.state.em, principal.projectId, query) }),
  });

  routes.add({
    method: 'get',
    path: '/activity/stats',
    summary: 'Activity counts per type over a window',
    description:
      'Counts per activity type over whole UTC hours, from the start of `from`\'s hour to the end of `to`\'s (default: the last 30 days), from the hourly ' +
      'rollups (events) and the campaign and step indexes, never a scan of events.',
    tags: TAGS,
    auth: 'secret',
    query: z.object({ from: Instant('from').optional(), to: Instant('to').optional() }),
    responses: {
      200: { description: 'Counts', schema: z.object({ from: z.iso.datetime(), to: z.iso.datetime(), total: z.number().int(), counts: Counts }).meta({ id: 'ActivityStats' }) },
      ...errorResponses(401, 422),
    },
    handler: async ({ ctx, query, principal }) => ({ body: await activityStats(ctx.state.em, principal.projectId, query) }),
  });

  routes.add({
    method: 'get',
    path: '/activity/recent-count',
    summary: 'How many activity items happened since a time',
    description: "For a 'new activity' badge: every activity type, from `since` up to now (events as the outbox consumers have counted them).",
    tags: TAGS,
    auth: 'secret',
    query: z.object({ since: Instant('since') }),
    responses: {
      200: { description: 'The count', schema: z.object({ since: z.iso.datetime(), count: z.number().int() }).meta({ id: 'ActivityRecentCount' }) },
      ...errorResponses(401, 422),
    },
    handler: async ({ ctx, query, principal }) => ({ body: await activityRecentCount(ctx.state.em, principal.projectId, query.since) }),
  });

  routes.add({
    method: 'get',
    path: '/activity/types',
    summary: 'The activity types',
    tags: TAGS,
    auth: 'secret',
    responses: {
      200: {
        description: 'Every activity type',
        schema: z.object({ data: z.array(z.object({ type: TypeName, source: z.enum(['event', 'campaign', 'automation']), description: z.string() })) }).meta({ id: 'ActivityTypes' }),
      },
      ...errorResponses(401),
    },
    handler: async () => ({ body: { data: activityTypes() } }),
  });

  routes.add({
    method: 'get',
    path: '/activity/upcoming',
    summary: 'Scheduled campaigns and automation runs with a timed wake-up, soonest first',
    description: 'Campaigns in SCHEDULED with their `scheduledAt`, and running automation runs with their next wake-up (a DELAY, a WAIT_FOR_EVENT timeout).',
    tags: TAGS,
    auth: 'secret',
    query: z.object({ limit: Limit }),
    responses: { 200: { description: 'What comes next', schema: z.object({ data: z.array(Upcoming) }).meta({ id: 'ActivityUpcoming' }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => ({ body: await activityUpcoming(ctx.state.em, principal.projectId, query.limit) }),
  });
}
