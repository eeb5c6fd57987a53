import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';

const ConfigSchema = z
  .object({
    signupEnabled: z.boolean(),
    oauthProviders: z.array(z.string()),
    billing: z.boolean(),
    features: z.record(z.string(), z.boolean()),
  })
  .meta({ id: 'PublicConfig' });

export function systemRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/config',
    summary: 'Feature flags of this deployment (no authentication)',
    tags: ['System'],
    auth: 'none',
    responses: { 200: { description: 'Public configuration', schema: ConfigSchema } },
    handler: async () => ({
      body: { signupEnabled: deps.config.signupEnabled, oauthProviders: [], billing: false, features: { transactional: true } },
    }),
  });

  routes.add({
    method: 'get',
    path: '/health',
    summary: 'Liveness and database readiness',
    tags: ['System'],
    auth: 'none',
    responses: { 200: { description: 'Healthy', schema: z.object({ status: z.literal('ok') }) } },
    handler: async ({ ctx }) => {
      await ctx.state.em.execute('select 1');
      return { body: { status: 'ok' } };
    },
  });
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
        'Errors use one envelope: `{ success: false, error: { code, message, statusCode, requestId, errors?, suggestion? }, timestamp }`.',
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
