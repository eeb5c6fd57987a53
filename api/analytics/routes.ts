import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { Instant } from '../campaigns/schema';
import { timeseries, topEvents } from '../../domain/analytics/timeseries';
import { Limit } from '../contacts/schema';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AbStatsSchema, CampaignStatsSchema, presentAbStats, presentCampaignStats } from '../presenters/campaign-stats.presenter';
import { abStatsOf } from '../../domain/campaigns/campaign-ab';
import { CAMPAIGN_RANKINGS, campaignBreakdown, topCampaigns, type CampaignBreakdown, type CampaignRanking } from '../../domain/analytics/campaign-analytics';
import { ANALYTICS_METRICS } from '../../domain/analytics/analytics-consumer';

const TAGS = ['Analytics'];

const Metric = z.enum(ANALYTICS_METRICS);

const TimeseriesQuery = z.object({
  from: Instant('from').optional().meta({ description: 'Start (inclusive; default: 30 days, or 48 hours for `hour`, before `to`).' }),
  to: Instant('to').optional().meta({ description: 'End (exclusive; default: now).' }),
  interval: z.enum(['hour', 'day'], { error: 'interval is hour or day' }).default('day'),
  timezone: z
    .string()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9_+\-/]+$/, 'timezone is an IANA name such as Europe/Berlin')
    .default('UTC')
    .meta({ description: 'IANA time zone of the days (default UTC); unknown names: 422 `invalid_timezone`.' }),
  metrics: z
    .string()
    .max(200)
    .transform((v, ctx) => {
      const list = v.split(',').map((m) => m.trim()).filter(Boolean);
      for (const m of list) if (!(ANALYTICS_METRICS as readonly string[]).includes(m)) ctx.addIssue({ code: 'custom', message: `Unknown metric ${m} (${ANALYTICS_METRICS.join(', ')})`, params: { code: 'invalid_metric' } });
      return list as z.infer<typeof Metric>[];
    })
    .optional()
    .meta({ description: `Comma-separated subset of ${ANALYTICS_METRICS.join(', ')} (default: all).`, pattern: `^((${ANALYTICS_METRICS.join('|')})(,(${ANALYTICS_METRICS.join('|')}))*)?$` }),
});

const Values = z.object(Object.fromEntries(ANALYTICS_METRICS.map((m) => [m, z.number().int().optional()]))).meta({ description: 'Counts of the requested metrics.' });

const TimeseriesResponse = z
  .object({
    interval: z.enum(['hour', 'day']),
    timezone: z.string(),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    metrics: z.array(Metric),
    data: z.array(
      z.object({
        start: z.iso.datetime().meta({ description: "The bucket's start (UTC)." }),
        local: z.string().meta({ description: "The bucket's start on the zone's clock: YYYY-MM-DD (days) or YYYY-MM-DDTHH:MM (hours)." }),
        values: Values,
      }),
    ),
    totals: Values,
  })
  .meta({ id: 'AnalyticsTimeseries' });

export function analyticsRoutes(routes: Routes, _deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/analytics/timeseries',
    summary: 'Email metrics per hour or per day, in a time zone',
    description:
      'sent (accepted by the relay), delivered, opened, clicked, bounced (permanent), complained, unsubscribed and failed, per bucket, every bucket ' +
      'present (zeros where nothing happened). Answered from hourly rollups kept by the `analytics` outbox consumer, never from a scan. Days are the ' +
      "zone's calendar days (23 or 25 hours across a daylight saving change). At most 744 hours or 1100 days per request (422 `range_too_large`).",
    tags: TAGS,
    auth: 'secret',
    query: TimeseriesQuery,
    responses: { 200: { description: 'The series', schema: TimeseriesResponse }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => ({ body: await timeseries(ctx.state.em, principal.projectId, query) }),
  });

  routes.add({
    method: 'get',
    path: '/analytics/top-events',
    summary: 'Tracked event names by count over a range',
    description: 'From the hourly rollup of tracked events (service events such as email.* are not listed). The range is in whole UTC hours: `from` counts from the start of its hour. Default: the last 30 days.',
    tags: TAGS,
    auth: 'secret',
    query: z.object({
      from: Instant('from').optional(),
      to: Instant('to').optional(),
      limit: Limit.meta({ description: 'How many names (1-100, default 20).' }),
    }),
    responses: {
      200: {
        description: 'Names, most frequent first',
        schema: z
          .object({ from: z.iso.datetime(), to: z.iso.datetime(), data: z.array(z.object({ name: z.string(), count: z.number().int() })) })
          .meta({ id: 'AnalyticsTopEvents' }),
      },
      ...errorResponses(401, 422),
    },
    handler: async ({ ctx, query, principal }) => ({ body: await topEvents(ctx.state.em, principal.projectId, query) }),
  });

  const Breakdown = CampaignStatsSchema.extend({
    name: z.string(),
    status: z.string(),
    startedAt: z.iso.datetime().nullable(),
    abTest: AbStatsSchema.optional().meta({
      description: 'Only for an A/B-tested campaign: each variant, the final send and the decision, as GET /campaigns/{id}/stats gives them (counted from its emails).',
    }),
  }).meta({ id: 'CampaignBreakdown' });
  /** Each campaign's figures; an A/B-tested one also its groups (one count of its emails each, so only for those). */
  const present = async (em: EntityManager, campaigns: CampaignBreakdown[]) => {
    const out = [];
    for (const c of campaigns) {
      const ab = await abStatsOf(em, { id: c.campaignId, abTest: c.abTest, abDecision: c.abDecision });
      out.push({ ...presentCampaignStats(c), name: c.name, status: c.status, startedAt: c.startedAt?.toISOString() ?? null, ...(ab ? { abTest: presentAbStats(ab) } : {}) });
    }
    return out;
  };
  const Range = {
    from: Instant('from').optional().meta({ description: 'Campaigns that started sending at or after this (default: 90 days before `to`).' }),
    to: Instant('to').optional().meta({ description: 'Campaigns that started sending before this (default: now).' }),
  };

  routes.add({
    method: 'get',
    path: '/analytics/top-campaigns',
    summary: 'Campaigns ranked by a counter or a rate',
    description:
      "From each campaign's counters (never a scan of emails). `by` is a counter (sent, delivered, openedUnique, clickedUnique, bounced, complained, " +
      'unsubscribed) or a rate (deliveryRate, openRate, clickRate, clickToOpenRate, bounceRate, complaintRate, unsubscribeRate; per message sent); ' +
      '`minSent` leaves out campaigns with fewer messages sent (default 1).',
    tags: TAGS,
    auth: 'secret',
    query: z.object({
      ...Range,
      by: z.enum(Object.keys(CAMPAIGN_RANKINGS) as [CampaignRanking, ...CampaignRanking[]], { error: `by is one of ${Object.keys(CAMPAIGN_RANKINGS).join(', ')}` }).default('openRate'),
      limit: Limit.meta({ description: 'How many campaigns (1-100, default 20).' }),
      minSent: z.coerce.number().int().min(0).max(1_000_000_000).default(1),
    }),
    responses: { 200: { description: 'Campaigns, highest first', schema: z.object({ data: z.array(Breakdown) }).meta({ id: 'TopCampaigns' }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => ({ body: { data: await present(ctx.state.em, await topCampaigns(ctx.state.em, principal.projectId, query)) } }),
  });

  routes.add({
    method: 'get',
    path: '/analytics/campaign-stats',
    summary: 'Per-campaign breakdown: counters and rates of the campaigns that started sending in a range',
    description: 'Newest first; the same figures as GET /campaigns/:id/stats, with the name, status and start.',
    tags: TAGS,
    auth: 'secret',
    query: z.object({ ...Range, limit: Limit.meta({ description: 'How many campaigns (1-100, default 20).' }) }),
    responses: { 200: { description: 'Campaigns', schema: z.object({ data: z.array(Breakdown) }).meta({ id: 'CampaignBreakdownList' }) }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => ({ body: { data: await present(ctx.state.em, await campaignBreakdown(ctx.state.em, principal.projectId, query)) } }),
  });
}
