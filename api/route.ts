import fs from 'node:fs';
import Router from '@koa/router';
import { koaBody } from 'koa-body';
import { z, type ZodType } from 'zod';
import { OpenAPIRegistry, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import type Koa from 'koa';
import type { AppContext, AppState, ApiDeps } from './context';
import { requireApiKey, requireSession } from './middleware/auth';
import { AppError, validationError } from '../domain/errors';
import { zodFieldErrors } from './validation';
import { errorResponses } from './common.schema';

export type AuthMode = 'secret' | 'public' | 'session' | 'none';

export interface HandlerInput<B, Q, P> {
  ctx: AppContext;
  body: B;
  query: Q;
  params: P;
}

export interface HandlerResult {
  status?: number;
  body?: unknown;
}

export interface RouteDef<B, Q, P> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Koa-style path: `/contacts/:id`. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: AuthMode;
  body?: ZodType<B>;
  query?: ZodType<Q>;
  params?: ZodType<P>;
  /** JSON body limit for this route (default: MAX_JSON_BODY). */
  bodyLimit?: string;
  /**
   * Opt-in multipart/form-data body instead of JSON: the body schema sees the text fields and the uploaded files
   * (formidable `File`s, deleted after the handler) together. Above `maxFileSize` bytes: 413 PAYLOAD_TOO_LARGE.
   */
  multipart?: { maxFileSize: number };
  /**
   * Opt-in form body instead of JSON: application/x-www-form-urlencoded, or the text fields of multipart/form-data
   * (browser forms, RFC 8058 one-click posts). The body is optional: none, or another content type, parses as `{}`.
   */
  form?: boolean;
  /**
   * Opt-in raw body: the request's bytes as one UTF-8 string, whatever the content type (Amazon SNS posts JSON as
   * text/plain), for handlers that parse it themselves. The body schema sees the string. Above `maxBytes`: 413.
   */
  rawBody?: { maxBytes: number };
  /** `contentType` documents a non-JSON response (the handler sets ctx.type itself). */
  responses: Record<number, { description: string; schema?: ZodType; contentType?: string }>;
  handler: (input: HandlerInput<B, Q, P>) => Promise<HandlerResult>;
}

const SECURITY: Record<AuthMode, RouteConfig['security']> = {
  secret: [{ secretKey: [] }],
  public: [{ secretKey: [] }, { publicKey: [] }],
  session: [{ sessionCookie: [] }],
  none: [],
};

/** Every route is defined once: the same zod schemas validate requests and produce the OpenAPI document. */
export class Routes {
  readonly router = new Router<AppState>();
  readonly registry = new OpenAPIRegistry();

  constructor(private readonly deps: ApiDeps) {
    this.registry.registerComponent('securitySchemes', 'secretKey', {
      type: 'http',
      scheme: 'bearer',
      description: 'Secret key (sk_...). Server-side only; may call every API endpoint.',
    });
    this.registry.registerComponent('securitySchemes', 'publicKey', {
      type: 'http',
      scheme: 'bearer',
      description: 'Public key (pk_...). May call POST /v1/track only.',
    });
    this.registry.registerComponent('securitySchemes', 'sessionCookie', {
      type: 'apiKey',
      in: 'cookie',
      name: 'mailwright_session',
      description: 'Dashboard session, set by POST /auth/login.',
    });
  }

  add<B = undefined, Q = undefined, P = undefined>(def: RouteDef<B, Q, P>): void {
    const middleware: Koa.Middleware<AppState>[] = [];
    if (def.auth === 'secret' || def.auth === 'public') middleware.push(requireApiKey(this.deps, def.auth === 'public'));
    if (def.auth === 'session') middleware.push(requireSession(this.deps));
    if (def.body && def.multipart) middleware.push(multipartBody(def.multipart.maxFileSize));
    else if (def.body && def.form) middleware.push(formBody());
    else if (def.body && def.rawBody) middleware.push(rawTextBody(def.rawBody.maxBytes));
    else if (def.body) {
      middleware.push(
        koaBody({
          json: true,
          jsonStrict: true,
          urlencoded: false,
          text: false,
          multipart: false,
          jsonLimit: def.bodyLimit ?? this.deps.config.limits.jsonBody,
        }) as unknown as Koa.Middleware<AppState>,
      );
    }
    middleware.push(async (ctx: AppContext) => {
      const files = def.multipart ? Object.values(ctx.request.files ?? {}).flat() : [];
      try {
        const raw = def.multipart ? { ...(ctx.request.body as object | undefined), ...ctx.request.files } : ctx.request.body;
        const body = parse(def.body, def.body ? (raw ?? {}) : undefined, []);
        const query = parse(def.query, ctx.query, ['query']);
        const params = parse(def.params, ctx.params, ['params']);
        const result = await def.handler({ ctx, body, query, params } as HandlerInput<B, Q, P>);
        ctx.status = result.status ?? (result.body === undefined ? 204 : 200);
        if (result.body !== undefined) ctx.body = result.body;
      } finally {
        for (const f of files) fs.rm(f.filepath, { force: true }, () => undefined);
      }
    });
    this.router[def.method](def.path, ...middleware);
    this.register(def);
  }

  private register<B, Q, P>(def: RouteDef<B, Q, P>): void {
    const responses: RouteConfig['responses'] = {};
    // Every API-key route is subject to the per-project rate limit.
    const declared: RouteDef<B, Q, P>['responses'] = def.auth === 'secret' || def.auth === 'public' ? { ...def.responses, ...errorResponses(429) } : def.responses;
    for (const [status, r] of Object.entries(declared)) {
      const type = r.contentType ?? 'application/json';
      responses[status] = r.schema ? { description: r.description, content: { [type]: { schema: r.schema } } } : { description: r.description };
    }
    this.registry.registerPath({
      method: def.method,
      path: def.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
      summary: def.summary,
      description: def.description,
      tags: def.tags,
      security: SECURITY[def.auth],
      request: {
        ...(def.body && def.form
          ? { body: { content: { 'application/x-www-form-urlencoded': { schema: def.body }, 'multipart/form-data': { schema: def.body } }, required: false } }
          : {}),
        ...(def.body && !def.form ? { body: { content: { [def.multipart ? 'multipart/form-data' : def.rawBody ? 'text/plain' : 'application/json']: { schema: def.body } }, required: true } } : {}),
        ...(def.query ? { query: def.query as unknown as z.ZodObject } : {}),
        ...(def.params ? { params: def.params as unknown as z.ZodObject } : {}),
      },
      responses,
    });
  }
}

/** multipart/form-data with one file at most; formidable's errors become the envelope's 413 / 400. */
function multipartBody(maxFileSize: number): Koa.Middleware<AppState> {
  return koaBody({
    json: false,
    urlencoded: false,
    text: false,
    multipart: true,
    formidable: { maxFileSize, maxTotalFileSize: maxFileSize, maxFiles: 1, allowEmptyFiles: true, minFileSize: 0, maxFields: 20, maxFieldsSize: 64 * 1024 },
    onError: (err: Error & { httpCode?: number }) => {
      if (err.httpCode === 413) {
        throw new AppError(413, 'PAYLOAD_TOO_LARGE', `The file is larger than ${maxFileSize} bytes`, { suggestion: 'Split the file into smaller parts.' });
      }
      throw new AppError(400, 'BAD_REQUEST', `Malformed multipart body: ${err.message}`, { suggestion: 'Send multipart/form-data with the file in the `file` field.' });
    },
  }) as unknown as Koa.Middleware<AppState>;
}

/** Small form bodies: urlencoded, or the text fields of multipart (file parts are dropped unread, never written). */
function formBody(): Koa.Middleware<AppState> {
  return koaBody({
    json: false,
    urlencoded: true,
    text: false,
    multipart: true,
    formLimit: '16kb',
    formidable: {
      maxFields: 20,
      maxFieldsSize: 16 * 1024,
      // formidable tells fields from files by the part's content type; a file part is simply not handed on.
      onPart: (part, handlePart) => {
        if (!part.mimetype) handlePart(part);
      },
    },
    onError: (err: Error & { status?: number; httpCode?: number }) => {
      if (err.status === 413 || err.httpCode === 413) throw new AppError(413, 'PAYLOAD_TOO_LARGE', 'The form body is too large');
      throw new AppError(400, 'BAD_REQUEST', `Malformed form body: ${err.message}`);
    },
  }) as unknown as Koa.Middleware<AppState>;
}

/** The body as a UTF-8 string, read up to `maxBytes` (a larger declared or actual length: 413). */
function rawTextBody(maxBytes: number): Koa.Middleware<AppState> {
  const tooLarge = () => new AppError(413, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${maxBytes} bytes`);
  return async (ctx, next) => {
    if (Number(ctx.get('content-length') || 0) > maxBytes) throw tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw tooLarge();
      chunks.push(chunk);
    }
    ctx.request.body = Buffer.concat(chunks).toString('utf8');
    await next();
  };
}

function parse<T>(schema: ZodType<T> | undefined, value: unknown, prefix: string[]): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const errors = zodFieldErrors(result.error).map((e) => ({
    ...e,
    field: [...prefix, e.field === '(body)' ? '' : e.field].filter(Boolean).join('.') || e.field,
  }));
  throw validationError(errors);
}
