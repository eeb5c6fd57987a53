import fs from 'node:fs';
import Router from '@koa/router';
import { koaBody, HttpMethodEnum } from 'koa-body';
import { z, type ZodType } from 'zod';
import { OpenAPIRegistry, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import type Koa from 'koa';
import type { AppContext, AppState, ApiDeps } from './context';
import type { ApiPrincipal } from '../domain/projects/project.service';
import { authorize, minimumRole, PERMISSIONS, type ProjectAction, type ProjectMember } from '../domain/projects/policy';
import { requireApiKey, requireSession } from './middleware/auth';
import { AppError, validationError, type FieldError } from '../domain/errors';
import { inputProblems, zodFieldErrors } from './validation';
import { errorResponses } from './common.schema';
import { VariantHeaders, earlierSchema, hasVariants, requestedVariant, toEarlier } from './variant';

export type AuthMode = 'secret' | 'public' | 'session' | 'none';

/**
 * A dashboard route's check of the caller's membership of a project (domain/projects/policy.ts), by the route's
 * `permission`. The project of the path (`:id`) or body (`projectId`) is checked before the handler runs; this
 * answers that check, or checks another project.
 */
type MemberCheck = (projectId: string) => Promise<ProjectMember>;

/** Who is calling, by the route's auth mode: the key's project (and settings), or the session's user. */
type Caller<A extends AuthMode> = A extends 'secret' | 'public' ? { principal: ApiPrincipal } : A extends 'session' ? { userId: string; member: MemberCheck } : object;

type HandlerInput<B, Q, P, A extends AuthMode = AuthMode> = {
  ctx: AppContext;
  body: B;
  query: Q;
  params: P;
  /**
   * Runs `fn` once the request's transaction has committed (at once after the handler on a route without one), before
   * the response: starting a workflow that reads what the handler wrote, forgetting a cached value. A hook that fails
   * fails the request, with the transaction already committed (so a hook answers its own 503, like the invitation
   * email's).
   */
  afterCommit: (fn: () => Promise<unknown> | void) => void;
} & Caller<A>;

interface HandlerResult {
  status?: number;
  body?: unknown;
}

export interface RouteDef<B, Q, P, A extends AuthMode = AuthMode> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Koa-style path: `/contacts/:id`. */
  path: string;
  summary: string;
  description?: string;
  tags: string[];
  auth: A;
  /**
   * Dashboard routes that act on a project: the action of the permission table (domain/projects/policy.ts) the caller's
   * role must allow. The handler's `member(projectId)` enforces it; the OpenAPI document states it (`x-permission`).
   */
  permission?: ProjectAction;
  /** The action instead of `permission` when the path's `:userId` is the caller's own (leaving a project). */
  permissionSelf?: ProjectAction;
  body?: ZodType<B>;
  query?: ZodType<Q>;
  params?: ZodType<P>;
  /** JSON body limit for this route (default: MAX_JSON_BODY). */
  bodyLimit?: number;
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
  /**
   * A write route (POST, PUT, PATCH, DELETE) runs its handler in one transaction: `ctx.state.em` is the transaction's
   * EntityManager (and `sql(em)` runs on its connection), so the request's writes commit together or not at all, and
   * `afterCommit` hooks run once they are committed. A route that must not hold one transaction names why here
   * instead: it stores and starts a workflow as its own unit (`persistThenStart`, `recordThenTell`), it is batched
   * with other requests (the intakes), or it waits on a remote service that must not hold a pooled connection.
   */
  ownTransactions?: string;
  /** `contentType` documents a non-JSON response (the handler sets ctx.type itself). */
  responses: Record<number, { description: string; schema?: ZodType; contentType?: string }>;
  handler: (input: HandlerInput<B, Q, P, A>) => Promise<HandlerResult>;
}

const SECURITY: Record<AuthMode, RouteConfig['security']> = {
  secret: [{ secretKey: [] }],
  public: [{ secretKey: [] }, { publicKey: [] }],
  session: [{ sessionCookie: [] }],
  none: [],
};

type Layer = Router<AppState>['stack'][number];

/** Every route is defined once: the same zod schemas validate requests and produce the OpenAPI document. */
export class Routes {
  // Of the routes matching a path and method, only the most specific runs: `/contacts/fields` before `/contacts/:id`.
  readonly router = new Router<AppState>({ exclusive: 'specificity' });
  readonly registry = new OpenAPIRegistry();
  /** Each route's method, path and unit of work, in registration order (the data-access test reads them). */
  readonly defs: Array<{ method: RouteDef<unknown, unknown, unknown>['method']; path: string; transactional: boolean; ownTransactions?: string }> = [];
  /** Path-parameter schemas by router layer, for telling which routes really serve a path. */
  private readonly paramSchemas = new Map<Layer, ZodType>();

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

  add<B = undefined, Q = undefined, P = undefined, A extends AuthMode = AuthMode>(def: RouteDef<B, Q, P, A>): void {
    const middleware: Koa.Middleware<AppState>[] = [];
    const variants = hasVariants(def);
    const own: { layer?: Layer } = {}; // this route's layer, known once it is registered below
    // `/contacts/:id` also matches `/contacts/lookup`, and `/events/:eventName` matches `/events/names`: a path that
    // another route owns is that route's, so another method there is its 405 (with its Allow), not this route's 422
    // or, worse, this route's action.
    if (def.params) {
      const fallback = this.fallback();
      middleware.push(async (ctx, next) => {
        if (!this.owns(own.layer!, ctx.path) && this.router.stack.some((l) => l !== own.layer && this.owns(l, ctx.path))) return fallback(ctx, next);
        await next();
      });
    }
    if (def.auth === 'secret' || def.auth === 'public') middleware.push(requireApiKey(this.deps, def.auth === 'public'));
    if (def.auth === 'session') middleware.push(requireSession(this.deps));
    // The declared length is checked before anything is read. A multipart body is its file plus the fields and
    // boundaries (the parser holds the file itself to its limit); a form is held to its field limits by the parser,
    // but the file parts it ignores still cross the wire, so its declared length is held to the JSON limit only.
    if (def.body) {
      const declaredLimit = def.rawBody?.maxBytes ?? (def.multipart ? def.multipart.maxFileSize + MULTIPART_OVERHEAD : (def.bodyLimit ?? this.deps.config.limits.jsonBody));
      middleware.push(refuseDeclaredLength(declaredLimit));
    }
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
          // DELETE too: some carry a body (DELETE /segments/:id/members { emails }).
          parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
          jsonLimit: def.bodyLimit ?? this.deps.config.limits.jsonBody,
          onError: jsonBodyError,
        }) as unknown as Koa.Middleware<AppState>,
      );
    }
    const transactional = isWrite(def.method) && def.ownTransactions === undefined;
    this.defs.push({ method: def.method, path: def.path, transactional, ownTransactions: def.ownTransactions });
    middleware.push(async (ctx: AppContext) => {
      const files = def.multipart ? Object.values(ctx.request.files ?? {}).flat() : [];
      try {
        const raw = def.multipart ? { ...(ctx.request.body as object | undefined), ...ctx.request.files } : ctx.request.body;
        const body = parse(def.body, def.body ? (raw ?? {}) : undefined, []);
        const query = parse(def.query, ctx.query, ['query']);
        const params = parse(def.params, ctx.params, ['params']);
        const variant = variants ? requestedVariant(ctx) : 'current';
        const hooks: Array<() => Promise<unknown> | void> = [];
        const afterCommit = (fn: () => Promise<unknown> | void) => void hooks.push(fn);
        // The membership check runs in the request's transaction too, so the project it loads is the transaction's
        // entity (the handler may change or remove it).
        const run = async () => {
          // The auth middleware above set what this route's mode promises.
          const member = await memberCheck(ctx, def, params, body);
          const caller = { principal: ctx.state.principal, userId: ctx.state.userId, member } as unknown as Caller<A>;
          return def.handler({ ctx, body, query, params, afterCommit, ...caller } as HandlerInput<B, Q, P, A>);
        };
        const result = transactional ? await inRequestTransaction(ctx, run) : await run();
        for (const hook of hooks) await hook();
        ctx.status = result.status ?? (result.body === undefined ? 204 : 200);
        if (result.body === undefined) return;
        ctx.body = variant === 'earlier' && !def.responses[ctx.status]?.contentType ? toEarlier(result.body) : result.body;
      } finally {
        for (const f of files) fs.rm(f.filepath, { force: true }, () => undefined);
      }
    });
    this.router[def.method](def.path, ...middleware);
    own.layer = this.router.stack.at(-1)!;
    if (def.params) this.paramSchemas.set(own.layer, def.params);
    this.register(def);
  }

  /**
   * Whether the route of `layer` serves `path`: a route of fixed segments always; a route with parameters only where
   * no fixed route serves the path (for any method) and its schema accepts the values.
   */
  private owns(layer: Layer, path: string): boolean {
    if (!layer.match(path)) return false;
    if (layer.paramNames.length === 0) return true;
    if (this.router.stack.some((l) => l.paramNames.length === 0 && l.match(path))) return false;
    const params = this.paramSchemas.get(layer);
    return !params || params.safeParse(layer.params(path, layer.captures(path))).success;
  }

  /**
   * After the routes: a path no route serves is 404; a path served for other methods (any method, also ones the
   * router does not know, such as TRACE or PROPFIND) is 405 with `Allow`; OPTIONS answers 204 with `Allow`.
   */
  fallback(): Koa.Middleware<AppState> {
    return async (ctx) => {
      const allowed = new Set(this.router.stack.filter((l) => this.owns(l, ctx.path)).flatMap((l) => l.methods));
      if (allowed.size === 0) {
        throw new AppError(404, 'NOT_FOUND', `No route for ${ctx.method} ${ctx.path}`, {
          suggestion: 'See GET /openapi.json or /docs for the available endpoints.',
        });
      }
      const allow = [...allowed, 'OPTIONS'].join(', ');
      if (ctx.method === 'OPTIONS') {
        ctx.set('Allow', allow);
        ctx.status = 204;
        return;
      }
      throw new AppError(405, 'METHOD_NOT_ALLOWED', `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allow}`, { headers: { Allow: allow } });
    };
  }

  private register<B, Q, P, A extends AuthMode>(def: RouteDef<B, Q, P, A>): void {
    const responses: Record<string, ResponseConfig> = {};
    const variants = hasVariants(def);
    for (const [status, r] of Object.entries(def.responses)) {
      const type = r.contentType ?? 'application/json';
      // Success bodies of dashboard resources come in both variants (errors keep the one envelope).
      const schema = r.schema && variants && !r.contentType && Number(status) < 300 ? z.union([r.schema, earlierSchema(r.schema)]) : r.schema;
      responses[status] = schema ? { description: r.description, content: { [type]: { schema } } } : { description: r.description };
    }
    // The errors the shared middleware can answer on this route, whatever its handler declares: they join a declared
    // status (a page route's HTML 400 also comes as the JSON envelope when the form itself is malformed).
    for (const [status, r] of Object.entries(errorResponses(...implicitErrorStatuses(def)))) {
      const own = responses[status];
      if (!own) responses[status] = { description: r.description, content: { 'application/json': { schema: r.schema } } };
      else if (!own.content?.['application/json']) own.content = { ...own.content, 'application/json': { schema: r.schema } };
    }
    // A body the schema accepts when empty is optional: the route then reads a missing body as `{}`.
    const bodyRequired = def.body ? !def.body.safeParse({}).success : false;
    this.registry.registerPath({
      method: def.method,
      path: def.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
      summary: def.summary,
      description: def.permission ? `${def.description ? `${def.description}\n\n` : ''}${permissionText(def.permission, def.permissionSelf)}` : def.description,
      ...(def.permission ? { 'x-permission': permissionDoc(def.permission, def.permissionSelf) } : {}),
      tags: def.tags,
      security: SECURITY[def.auth],
      request: {
        ...(def.body && def.form
          ? { body: { content: { 'application/x-www-form-urlencoded': { schema: def.body }, 'multipart/form-data': { schema: def.body } }, required: false } }
          : {}),
        ...(def.body && !def.form
          ? { body: { content: { [def.multipart ? 'multipart/form-data' : def.rawBody ? 'text/plain' : 'application/json']: { schema: def.body } }, required: def.rawBody ? true : bodyRequired } }
          : {}),
        ...(def.query ? { query: def.query as unknown as z.ZodObject } : {}),
        ...(def.params ? { params: def.params as unknown as z.ZodObject } : {}),
        ...(variants ? { headers: VariantHeaders } : {}),
      },
      responses,
    });
  }
}

/**
 * The membership check of a route with a `permission`: the project it names (path `:id`, else body `projectId`) is
 * checked now, before the handler does anything (404 not a member, 403 a role too low), and `member()` answers it.
 */
async function memberCheck(ctx: AppContext, def: Pick<RouteDef<unknown, unknown, unknown>, 'method' | 'path' | 'permission' | 'permissionSelf'>, params: unknown, body: unknown): Promise<MemberCheck> {
  const userId = ctx.state.userId!;
  const named = (params as { id?: unknown; userId?: unknown } | undefined) ?? {};
  const action = def.permissionSelf && named.userId === userId ? def.permissionSelf : def.permission;
  const check = (projectId: string) => {
    if (!action) throw new Error(`${def.method.toUpperCase()} ${def.path} checks a project membership but declares no permission`);
    return authorize(ctx.state.em, userId, projectId, action);
  };
  const projectId = typeof named.id === 'string' ? named.id : (body as { projectId?: unknown } | undefined)?.projectId;
  if (!action || typeof projectId !== 'string') return check;
  const checked = await check(projectId);
  return async (id) => (id === projectId ? checked : check(id));
}

/** The sentence of an operation's description that states its permission. */
function permissionText(action: ProjectAction, self?: ProjectAction): string {
  const who = (a: ProjectAction) => ({ OWNER: 'an OWNER', ADMIN: 'an ADMIN or OWNER', MEMBER: 'any member' })[minimumRole(a)];
  const own = self ? ` For your own userId: \`${self}\`, ${who(self)}.` : '';
  return `Permission \`${action}\`: ${who(action)} of the project (${PERMISSIONS[action][1]}).${own} Not a member: 404; a lower role: 403 FORBIDDEN.`;
}

/** `x-permission` of an operation: the action of the permission table and its minimum role (and the one for oneself). */
function permissionDoc(action: ProjectAction, self?: ProjectAction) {
  return { action, minimumRole: minimumRole(action), ...(self ? { self: { action: self, minimumRole: minimumRole(self) } } : {}) };
}

/** Statuses that the shared middleware (auth, rate limit, body parsing, input checks) can answer on a route. */
function implicitErrorStatuses(def: Pick<RouteDef<unknown, unknown, unknown>, 'auth' | 'body' | 'query' | 'params' | 'rawBody' | 'path' | 'permission'>): number[] {
  const statuses = new Set<number>();
  if (def.auth === 'secret' || def.auth === 'public') [401, 403, 429].forEach((s) => statuses.add(s));
  if (def.auth === 'session') statuses.add(401);
  if (def.permission) [403, 404].forEach((s) => statuses.add(s)); // a role too low; not a member
  if (def.body) {
    statuses.add(413);
    if (!def.rawBody) statuses.add(400); // malformed JSON, form or multipart
  }
  if (def.body || def.query || def.params || hasVariants(def)) statuses.add(422);
  return [...statuses];
}

const FORM_LIMIT = 16 * 1024;
/** Room for a multipart body's text fields (64 KB at most) and part headers beside its file. */
const MULTIPART_OVERHEAD = 128 * 1024;

/**
 * 413 at once when the declared Content-Length is over the limit (the body parser truncates lengths to 32 bits, so
 * 2^31..2^32-1 would otherwise hold the connection until the limit's worth of bytes arrived).
 */
function refuseDeclaredLength(maxBytes: number): Koa.Middleware<AppState> {
  return async (ctx, next) => {
    const declared = ctx.get('content-length');
    if (declared && !(/^\d{1,15}$/.test(declared) && Number(declared) <= maxBytes)) {
      throw new AppError(413, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${maxBytes} bytes`, {
        suggestion: 'Send a smaller body; see the limits in the API documentation.',
      });
    }
    await next();
  };
}

/**
 * JSON parse failures as the envelope's 400 INVALID_JSON. A `__proto__` key is valid JSON, refused by co-body's
 * parser (it would set the prototype of the object it parses into); such a body is read again with JSON.parse, which
 * makes the key an ordinary own property, only so the answer can be the one a query or form gets: 422
 * VALIDATION_ERROR with field code `forbidden_key` at the key's path. Nothing of it reaches a schema or a handler.
 */
function jsonBodyError(err: Error & { status?: number; body?: unknown }): never {
  if (err.status === 413) throw err;
  if (/prototype property/.test(err.message) && typeof err.body === 'string') {
    let problems: FieldError[] = [];
    try {
      problems = inputProblems(JSON.parse(err.body));
    } catch {
      // not JSON after all: co-body's own error below
    }
    if (problems.length) throw validationError(problems);
  }
  throw err;
}

/** multipart/form-data with one file at most; formidable's errors become the envelope's 413 / 400. */
function multipartBody(maxFileSize: number): Koa.Middleware<AppState> {
  return koaBody({
    json: false,
    urlencoded: false,
    text: false,
    multipart: true,
    formidable: {
      maxFileSize,
      maxTotalFileSize: maxFileSize,
      maxFiles: 1,
      allowEmptyFiles: true,
      minFileSize: 0,
      maxFields: 20,
      maxFieldsSize: 64 * 1024,
      // formidable takes a part without Content-Type for a text field; RFC 7578 defaults it to text/plain, and a part
      // with a filename is a file (Python `requests` sends files this way).
      onPart: (part, handlePart) => {
        if (!part.mimetype && part.originalFilename) part.mimetype = 'text/plain';
        handlePart(part);
      },
    },
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
    formLimit: FORM_LIMIT,
    formidable: {
      maxFields: 20,
      maxFieldsSize: FORM_LIMIT,
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

/** The body as a UTF-8 string, read up to `maxBytes` (a larger actual length: 413; the declared one is checked before). */
function rawTextBody(maxBytes: number): Koa.Middleware<AppState> {
  const tooLarge = () => new AppError(413, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${maxBytes} bytes`);
  return async (ctx, next) => {
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

function isWrite(method: RouteDef<unknown, unknown, unknown>['method']): boolean {
  return method !== 'get';
}

/**
 * Runs the handler (and the membership check before it) in one transaction on the request's EntityManager, which
 * `ctx.state.em` is for their duration. The ORM flushes the transaction's EntityManager before it
 * commits; a thrown error rolls everything back and then reaches the error handler as it would have.
 */
async function inRequestTransaction<T>(ctx: AppContext, run: () => Promise<T>): Promise<T> {
  const outer = ctx.state.em;
  return outer.transactional(async (tx) => {
    Object.defineProperty(ctx.state, 'em', { get: () => tx, configurable: true });
    try {
      return await run();
    } finally {
      Object.defineProperty(ctx.state, 'em', { get: () => outer, configurable: true });
    }
  });
}

function parse<T>(schema: ZodType<T> | undefined, value: unknown, prefix: string[]): T {
  if (!schema) return undefined as T;
  const problems = inputProblems(value, prefix);
  if (problems.length) throw validationError(problems);
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const errors = zodFieldErrors(result.error).map((e) => ({
    ...e,
    field: [...prefix, e.field === '(body)' ? '' : e.field].filter(Boolean).join('.') || e.field,
  }));
  throw validationError(errors);
}
