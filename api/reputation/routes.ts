import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { IdParams, errorResponses } from '../common.schema';
import { liftSuspension, reputationOf, type Suspension } from '../../domain/reputation/reputation';
import { iso } from '../presenters/time';

const Rate = z.number().nullable();

const SuspensionSchema = z
  .object({
    id: z.string(),
    reason: z.enum(['BOUNCE_RATE', 'COMPLAINT_RATE']),
    sent: z.number().int(),
    bounced: z.number().int(),
    complained: z.number().int(),
    bounceRate: z.number(),
    complaintRate: z.number(),
    windowFrom: z.iso.datetime(),
    createdAt: z.iso.datetime(),
    notifiedAt: z.iso.datetime().nullable(),
    liftedAt: z.iso.datetime().nullable(),
    liftedBy: z.string().nullable(),
  })
  .meta({ id: 'Suspension' });

const Threshold = z.object({ warn: z.number(), suspend: z.number() });

const SecuritySchema = z
  .object({
    status: z.enum(['OK', 'WARNING', 'SUSPENDED']),
    window: z.object({ from: z.iso.datetime(), to: z.iso.datetime() }),
    sent: z.number().int(),
    bounced: z.number().int(),
    complained: z.number().int(),
    bounceRate: Rate.meta({ description: 'Permanent bounces per email sent over the window; null below `thresholds.minSent` emails.' }),
    complaintRate: Rate.meta({ description: 'Complaints per email sent over the window; null below `thresholds.minSent` emails.' }),
    thresholds: z.object({ bounce: Threshold, complaint: Threshold, minSent: z.number().int(), windowDays: z.number() }),
    suspension: SuspensionSchema.nullable().meta({ description: 'The active suspension, if any.' }),
    recentSuspensions: z.array(SuspensionSchema).meta({ description: 'The last ten, newest first.' }),
  })
  .meta({ id: 'ProjectSecurity' });

const present = (s: Suspension) => ({ ...s, windowFrom: iso(s.windowFrom), createdAt: iso(s.createdAt), notifiedAt: iso(s.notifiedAt), liftedAt: iso(s.liftedAt) });

const DESCRIPTION =
  "The project's sending reputation: permanent bounces and complaints per email sent over the window (7 days of whole UTC hours, from the hour after the " +
  'last lifted suspension), the thresholds, and its suspensions. Past a suspend threshold (judged once the window holds `minSent` emails) the ' +
  "`reputation-check` schedule suspends the project's marketing sends: SENDING campaigns are paused, campaign sends and resumes are 403 " +
  '`PROJECT_SUSPENDED`, and the owners are emailed. Transactional sends go on.';

export function reputationRoutes(routes: Routes, deps: ApiDeps): void {
  for (const path of ['/users/@me/projects/:id/security', '/projects/:id/security'] as const) {
    routes.add({
      method: 'get',
      path,
      summary: path.startsWith('/users') ? 'Bounce and complaint rates, thresholds, recent suspensions' : 'Security state: rates, thresholds, suspensions',
      description: DESCRIPTION,
      tags: ['Dashboard'],
      auth: 'session',
      permission: 'reputation.read',
      params: IdParams,
      responses: { 200: { description: 'The reputation', schema: SecuritySchema }, ...errorResponses(401, 403, 404) },
      handler: async ({ ctx, params, member }) => {
        const { project } = await member(params.id);
        const r = await reputationOf(ctx.state.em, project.id, deps.config.reputation);
        return { body: { ...r, suspension: r.suspension && present(r.suspension), recentSuspensions: r.recentSuspensions.map(present) } };
      },
    });
  }

  routes.add({
    method: 'post',
    path: '/users/@me/projects/:id/security/lift',
    summary: 'Lift the suspension of the marketing sends (OWNER)',
    description:
      'Once the cause is fixed (the addresses that bounce or complain removed). Rates are counted again from the next whole hour; campaigns paused by ' +
      'the suspension stay PAUSED until resumed. 409 `NOT_SUSPENDED` when there is no active suspension.',
    tags: ['Dashboard'],
    auth: 'session',
    permission: 'reputation.lift',
    params: IdParams,
    responses: { 200: { description: 'The lifted suspension', schema: SuspensionSchema }, ...errorResponses(401, 403, 404, 409) },
    handler: async ({ ctx, params, member, userId }) => {
      const { project } = await member(params.id);
      return { body: present(await liftSuspension(ctx.state.em, project.id, userId)) };
    },
  });
}
