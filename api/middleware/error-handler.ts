import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import { ZodError } from 'zod';
import { AppError, validationError } from '../../domain/errors';
import type { AppContext, AppState } from '../context';
import { logger } from '../../domain/logger';
import { zodFieldErrors } from '../validation';

/** SPEC.md › Errors envelope. */
export function errorBody(err: AppError, requestId: string) {
  return {
    success: false as const,
    error: {
      code: err.code,
      message: err.message,
      statusCode: err.statusCode,
      requestId,
      ...(err.options.errors?.length ? { errors: err.options.errors } : {}),
      ...(err.options.suggestion ? { suggestion: err.options.suggestion } : {}),
    },
    timestamp: new Date().toISOString(),
  };
}

/** Errors from Koa, koa-body and raw-body carry an HTTP status; map the ones clients can cause to our codes. */
function fromHttpError(err: { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean }): AppError | undefined {
  const status = err.status ?? err.statusCode;
  if (!status || status < 400 || status >= 500) return undefined;
  if (status === 413) {
    return new AppError(413, 'PAYLOAD_TOO_LARGE', 'The request body is too large', {
      suggestion: 'Send a smaller body; see the limits in the API documentation.',
    });
  }
  if (status === 400 && (err.type === 'entity.parse.failed' || /JSON|Unexpected token|Unexpected end/i.test(err.message ?? ''))) {
    return new AppError(400, 'INVALID_JSON', 'The request body is not valid JSON', {
      suggestion: 'Send a JSON body with "Content-Type: application/json".',
    });
  }
  if (status === 415) return new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', err.message ?? 'Unsupported media type');
  if (status === 405) return new AppError(405, 'METHOD_NOT_ALLOWED', err.message ?? 'Method not allowed');
  if (status === 404) return new AppError(404, 'NOT_FOUND', 'Not found');
  return new AppError(status, 'BAD_REQUEST', err.expose && err.message ? err.message : 'Bad request');
}

/**
 * The one renderer of errors: assigns the request id, renders AppErrors, and turns anything unknown into a 500
 * that says nothing about internals (the details go to the log, under the same request id).
 */
export function errorHandler(): Koa.Middleware<AppState> {
  return async (ctx: AppContext, next) => {
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = /^[A-Za-z0-9-]{8,64}$/.test(incoming) ? incoming : randomUUID();
    ctx.state.log = logger.child({ requestId: ctx.state.requestId });
    ctx.set('X-Request-Id', ctx.state.requestId);
    const started = performance.now();
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new AppError(404, 'NOT_FOUND', `No route for ${ctx.method} ${ctx.path}`, {
          suggestion: 'See GET /openapi.json or /docs for the available endpoints.',
        });
      }
    } catch (raw) {
      let err: AppError;
      if (raw instanceof AppError) err = raw;
      else if (raw instanceof ZodError) err = validationError(zodFieldErrors(raw));
      else err = fromHttpError(raw as object) ?? new AppError(500, 'INTERNAL_ERROR', 'An unexpected error occurred', {
        suggestion: 'Retry later; if it persists, contact support with the requestId.',
      });
      if (err.statusCode >= 500) ctx.state.log.error({ err: raw }, 'request failed');
      ctx.status = err.statusCode;
      ctx.body = errorBody(err, ctx.state.requestId);
      for (const [k, v] of Object.entries(err.options.headers ?? {})) ctx.set(k, v);
    } finally {
      ctx.state.log.info(
        { method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - started) },
        'request',
      );
    }
  };
}
