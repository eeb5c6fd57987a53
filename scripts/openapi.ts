/** Prints the OpenAPI document to stdout, built from the route registry without any service (`npm run openapi`). */
import { loadConfig } from '../domain/config';
import type { ApiDeps } from '../api/context';
import { buildRoutes } from '../api/app';
import { openApiDocument } from '../api/system/routes';

// The document needs no database: any URL satisfies the configuration's shape.
const deps = { config: loadConfig({ DATABASE_URL: 'postgres://unused/openapi', ...process.env }) } as ApiDeps;
process.stdout.write(`${JSON.stringify(openApiDocument(buildRoutes(deps), deps), null, 2)}\n`);
