import Koa from 'koa';
import type { AppState, ApiDeps } from './context';
import { errorHandler } from './middleware/error-handler';
import { httpMetrics } from './middleware/metrics';
import { Routes } from './route';
import { sendRoutes } from './send/routes';
import { emailRoutes } from './emails/routes';
import { verifyRoutes } from './verify/routes';
import { trackRoutes } from './track/routes';
import { contactRoutes } from './contacts/routes';
import { contactJobRoutes } from './contacts/import.routes';
import { eventRoutes } from './events/routes';
import { domainRoutes } from './domains/routes';
import { segmentRoutes } from './segments/routes';
import { templateRoutes } from './templates/routes';
import { campaignRoutes } from './campaigns/routes';
import { automationRoutes } from './automations/routes';
import { analyticsRoutes } from './analytics/routes';
import { activityRoutes } from './activity/routes';
import { reputationRoutes } from './reputation/routes';
import { authRoutes } from './auth/routes';
import { userRoutes } from './users/routes';
import { projectRoutes } from './projects/routes';
import { systemRoutes, docsRoutes } from './system/routes';
import { publicRoutes } from './public/routes';
import { webhookRoutes } from './webhooks/routes';
import { uploadRoutes } from './uploads/routes';
import { billingRoutes } from './billing/routes';
import { suppressionRoutes } from './suppressions/routes';
import { webhookEndpointRoutes } from './webhook-endpoints/routes';

/**
 * Every route of the API, registered once. Registration reads only `deps.config`; handlers use the rest when they run
 * (so `scripts/openapi.ts` can build the document without services).
 */
export function buildRoutes(deps: ApiDeps): Routes {
  const routes = new Routes(deps);
  for (const register of [systemRoutes, authRoutes, userRoutes, projectRoutes, sendRoutes, emailRoutes, verifyRoutes, trackRoutes, contactJobRoutes, contactRoutes, eventRoutes, domainRoutes, segmentRoutes, templateRoutes, campaignRoutes, automationRoutes, activityRoutes, analyticsRoutes, reputationRoutes, suppressionRoutes, webhookEndpointRoutes, uploadRoutes, billingRoutes, docsRoutes]) register(routes, deps);
  publicRoutes(routes, deps); // unauthenticated: open pixel, click redirects, subscription pages
  webhookRoutes(routes, deps); // unauthenticated: infrastructure callbacks, verified by their signatures
  return routes;
}

/** Builds the Koa application: request id + error envelope, a forked EntityManager per request, then the routes. */
export function createApp(deps: ApiDeps, routes: Routes = buildRoutes(deps)): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: deps.config.cookieSecure });
  app.silent = true; // errors are rendered and logged by errorHandler

  app.use(httpMetrics()); // outermost: sees the status the error handler rendered
  app.use(errorHandler());
  app.use(async (ctx, next) => {
    // Forked on first use: requests answered from caches or by validation never pay for an EntityManager.
    let em: AppState['em'] | undefined;
    Object.defineProperty(ctx.state, 'em', { get: () => (em ??= deps.orm.em.fork()), configurable: true });
    await next();
  });
  app.use(routes.router.routes());
  app.use(routes.fallback());
  return app;
}
