import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import { ZodError } from 'zod';
import { UniqueConstraintViolationException, DriverException } from '@mikro-orm/core';
import { AppError, validationError } from '../../domain/errors';
import type { AppContext, AppState } from '../context';
import { logger } from '../../domain/logger';
import { zodFieldErrors } from '../validation';
import { isDatabaseUnavailable } from '../../domain/db/unavailable';

/** SPEC.md › Errors envelope. */
function errorBody(err: AppError, requestId: string) {
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
 * Database refusals a request can cause, as a safety net behind validation: a unique index that a concurrent twin
 * request won (check-then-insert races) is 409; a value Postgres cannot store or read (SQLSTATE class 22, data
 * exception) is 422; the database being away is 503 (retry later). Anything else stays a 500.
 */
function fromDatabaseError(err: unknown): AppError | undefined {
  if (isDatabaseUnavailable(err)) {
    return new AppError(503, 'SERVICE_UNAVAILABLE', 'The database is temporarily unavailable', { suggestion: 'Retry the request in a few seconds.' });
  }
  if (err instanceof UniqueConstraintViolationException || (err as { code?: string })?.code === '23505') {
    return new AppError(409, 'CONFLICT', 'A concurrent request changed the same resource first', { suggestion: 'Read the resource again, then retry.' });
  }
  const sqlState = err instanceof DriverException ? err.code : (err as { code?: unknown })?.code;
  if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
    return new AppError(422, 'VALIDATION_ERROR', 'A value in the request cannot be stored', { suggestion: 'Check the request for unusual characters or out-of-range numbers.' });
  }
  return undefined;
}

/**
 * The one renderer of errors: assigns the request id, renders AppErrors, and turns anything unknown into a 500
 * that says nothing about internals (the details go to the log, under the same request id).
 */
export function errorHandler(): Koa.Middleware<AppState> {
  return async (ctx: AppContext, next) => {
    // Ours is always a UUID (SPEC.md › Errors); a client's own trace id is logged beside it and echoed back.
    ctx.state.requestId = randomUUID();
    const clientRequestId = ctx.get('x-request-id');
    const traced = /^[\x21-\x7e]{1,128}$/.test(clientRequestId) ? clientRequestId : undefined;
    ctx.state.log = logger.child(traced ? { requestId: ctx.state.requestId, clientRequestId: traced } : { requestId: ctx.state.requestId });
    ctx.set('X-Request-Id', ctx.state.requestId);
    if (traced) ctx.set('X-Client-Request-Id', traced);
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
      else err = fromHttpError(raw as object) ?? fromDatabaseError(raw) ?? new AppError(500, 'INTERNAL_ERROR', 'An unexpected error occurred', {
        suggestion: 'Retry later; if it persists, contact support with the requestId.',
      });
      if (err.statusCode >= 500) ctx.state.log.error({ err: raw }, 'request failed');
      else if (raw !== err && !(raw instanceof ZodError) && !(raw as { status?: number }).status) ctx.state.log.warn({ err: raw }, 'database refused a request');
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
