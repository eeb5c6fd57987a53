import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { AppError } from '../../domain/errors';
import { metricsText } from '../../domain/metrics';
import { databaseCheck, runHealthChecks } from '../../domain/health';
import { errorResponses } from '../common.schema';
import { metricsAuthorized } from '../metrics-server';
import { configuredProviders } from '../../domain/auth/oauth';
import type { Config } from '../../domain/config';

const oauthProviders = (config: Config) => configuredProviders(config.accounts.oauth).map((p) => p.id);
const PROVIDERS = ['sendgrid', 'mailgun', 'postmark', 'resend'] as const;
const reportReceivers = (config: Config) => ['ses' as const, ...PROVIDERS.filter((p) => config.reportWebhooks[p] !== undefined)];

const ConfigSchema = z
  .object({
    signupEnabled: z.boolean(),
    oauthProviders: z.array(z.string()),
    billing: z.boolean().meta({ description: 'Whether billing through Stripe is enabled (checkout, billing portal, invoices); caps work either way.' }),
    reportReceivers: z.array(z.enum(['ses', 'sendgrid', 'mailgun', 'postmark', 'resend'])).meta({
      description:
        'The delivery report receivers that are on: `ses` (POST /webhooks/sns) always, each provider (POST /webhooks/incoming/<provider>) ' +
        'when its secret is set (README › Delivery reports by webhook).',
    }),
    features: z.record(z.string(), z.boolean()),
    bounceMailbox: z.boolean().meta({ description: 'Whether the bounce mailbox is polled over IMAP (BOUNCE_MAILBOX_HOST; README › Bounce mailbox (IMAP)).' }),
  })
  .meta({ id: 'PublicConfig' });

const HealthCheckResult = z
  .object({
    ok: z.boolean(),
    latencyMs: z.number().int().min(0),
    error: z.string().optional().meta({ description: 'Why the check failed: no answer within the timeout, or failed (with an error code)' }),
  })
  .meta({ id: 'HealthCheckResult' });

const healthReport = (status: 'ok' | 'unavailable') =>
  z.object({
    status: z.literal(status),
    checks: z.object({ database: HealthCheckResult, temporal: HealthCheckResult }),
  });

export function systemRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/config',
    summary: 'Feature flags of this deployment (no authentication)',
    tags: ['System'],
    auth: 'none',
    responses: { 200: { description: 'Public configuration', schema: ConfigSchema } },
    handler: async () => ({
      body: {
        signupEnabled: deps.config.signupEnabled,
        oauthProviders: oauthProviders(deps.config),
        billing: Boolean(deps.config.billing.stripe),
        reportReceivers: reportReceivers(deps.config),
        features: { transactional: true },
        bounceMailbox: Boolean(deps.config.bounceMailbox),
      },
    }),
  });

  routes.add({
    method: 'get',
    path: '/health',
    summary: 'Readiness: whether Postgres and Temporal answer (no authentication)',
    description:
      'Checks each dependency with a short timeout (2 s) and says which one is down: `database` (Postgres answers `select 1`), ' +
      '`temporal` (the Temporal frontend answers GetSystemInfo). For a liveness probe any answer counts: ' +
      'a 503 means the process runs but cannot serve.',
    tags: ['System'],
    auth: 'none',
    responses: {
      200: { description: 'Every dependency answered', schema: healthReport('ok') },
      503: { description: 'A dependency did not answer; `checks` says which', schema: healthReport('unavailable') },
    },
    handler: async ({ ctx }) => {
      const report = await runHealthChecks({ database: databaseCheck(deps.orm), temporal: (timeoutMs) => deps.temporal.ping(timeoutMs) });
      ctx.set('Cache-Control', 'no-store');
      return { status: report.status === 'ok' ? 200 : 503, body: report };
    },
  });

  // With METRICS_PORT set, the metrics have their own listener (api/metrics-server.ts) and this port does not serve them.
  const { onApiPort, token } = deps.config.metrics;
  if (onApiPort) {
    routes.add({
      method: 'get',
      path: '/metrics',
      summary: 'Prometheus metrics of this API process',
      description:
        'The Prometheus text format (README › Metrics and health). ' +
        (token ? 'Requires `Authorization: Bearer <METRICS_TOKEN>`.' : 'Open: this deployment sets no METRICS_TOKEN (never so in production).'),
      tags: ['System'],
      auth: 'none',
      responses: {
        200: { description: 'Metrics in the Prometheus text exposition format', contentType: 'text/plain', schema: z.string() },
        ...(token ? errorResponses(401) : {}),
      },
      handler: async ({ ctx }) => {
        if (!metricsAuthorized(ctx.get('authorization') || undefined, token)) {
          throw new AppError(401, 'UNAUTHORIZED', 'GET /metrics requires the metrics bearer token', {
            suggestion: 'Send Authorization: Bearer <METRICS_TOKEN>.',
            headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' },
          });
        }
        const { contentType, body } = await metricsText();
        ctx.type = contentType;
        ctx.set('Cache-Control', 'no-store');
        return { body };
      },
    });
  }
}

/** The OpenAPI document, generated from the routes' zod schemas (so it cannot drift from validation). */
export function openApiDocument(routes: Routes, deps: ApiDeps): object {
  return new OpenApiGeneratorV31(routes.registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Mailwright API',
      version: '1.0.0',
      description:
        'Self-hostable email engagement service. API requests carry `Authorization: Bearer <key>`; the project comes from the key. ' +
        'Errors use one envelope: `{ success: false, error: { code, message, statusCode, requestId, errors?, suggestion? }, timestamp }`. ' +
        'Rules on every input, which the schemas below do not repeat: no text (string, object key, query or path parameter) contains NUL (U+0000) ' +
        'or an unpaired UTF-16 surrogate (422 `invalid_characters`), no object has the key `__proto__` (422 `forbidden_key`), and JSON nests at ' +
        'most 32 levels (422 `too_deep`).',
    },
    servers: [{ url: deps.config.publicUrl }],
  });
}

const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mailwright API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div><script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui', deepLinking: true });</script></body></html>`;

/** Serves /openapi.json and a Swagger UI page at /docs (assets from the swagger-ui-dist package, no CDN). */
export function docsRoutes(routes: Routes, deps: ApiDeps): void {
  let doc: object | undefined;
  routes.router.get('/openapi.json', (ctx) => {
    doc ??= openApiDocument(routes, deps);
    ctx.body = doc;
  });
  routes.router.get('/docs', (ctx) => {
    ctx.type = 'html';
    ctx.body = DOCS_HTML;
  });
  for (const [file, type] of [['swagger-ui.css', 'text/css'], ['swagger-ui-bundle.js', 'application/javascript']] as const) {
    routes.router.get(`/docs/${file}`, (ctx) => {
      ctx.type = type;
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.body = fs.createReadStream(path.join(SWAGGER_DIR, file));
    });
  }
}
