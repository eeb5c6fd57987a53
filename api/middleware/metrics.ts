import type Koa from 'koa';
import type { AppState } from '../context';
import { httpRequestDuration, httpRequests } from '../../domain/metrics';

/** Methods with a label of their own; any other (PROPFIND, made-up ones) is `OTHER`, so clients cannot add series. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The route label of a request: the template of the route that served it (`/contacts/:id`, as registered), never the
 * URL itself, so the label has as many values as there are routes; `unmatched` when no route matched the path and
 * method (404, 405).
 */
export function routeLabel(ctx: object): string {
  const route = (ctx as { _matchedRoute?: unknown })._matchedRoute; // set by @koa/router to the layer's path
  return typeof route === 'string' ? route : 'unmatched';
}

/** Counts and times every request by method, route template and final status; outermost, so errors count as rendered. */
export function httpMetrics(): Koa.Middleware<AppState> {
  return async (ctx, next) => {
    const started = performance.now();
    let failed = false;
    try {
      await next();
    } catch (err) {
      failed = true; // past the error handler: Koa answers 500
      throw err;
    } finally {
      const labels = { method: METHODS.has(ctx.method) ? ctx.method : 'OTHER', route: routeLabel(ctx), status: failed ? '500' : String(ctx.status) };
      httpRequests.inc(labels);
      httpRequestDuration.observe(labels, (performance.now() - started) / 1000);
    }
  };
}
