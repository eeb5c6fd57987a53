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
  responses: Record<number, { description: string; schema?: ZodType }>;
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
    for (const [status, r] of Object.entries(def.responses)) {
      responses[status] = r.schema ? { description: r.description, content: { 'application/json': { schema: r.schema } } } : { description: r.description };
    }
    this.registry.registerPath({
      method: def.method,
      path: def.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
      summary: def.summary,
      description: def.description,
      tags: def.tags,
      security: SECURITY[def.auth],
      request: {
        ...(def.body ? { body: { content: { [def.multipart ? 'multipart/form-data' : 'application/json']: { schema: def.body } }, required: true } } : {}),
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
