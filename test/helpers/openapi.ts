import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { stackEnv } from '../stack-env';

/**
 * The served /openapi.json, read as a route registry: it is produced from the one list of routes in api/route.ts, so
 * tests that walk it (isolation-matrix, team's role matrix) cover a route added later without being edited.
 */

type Auth = 'secret' | 'public' | 'session' | 'none';

export interface JsonSchema {
  [key: string]: any;
}

export interface Operation {
  label: string;
  method: string;
  /** OpenAPI path: `/contacts/{id}`. */
  path: string;
  auth: Auth;
  pathParams: string[];
  raw: any;
}

/** The document, fetched synchronously (in a child process) so that every route can become its own named test. */
export function fetchDocumentSync(): any {
  const url = `${stackEnv().apiUrl}/openapi.json`;
  const script = `fetch(${JSON.stringify(url)}).then(async (r) => { if (!r.ok) throw new Error('HTTP ' + r.status); process.stdout.write(await r.text()); }).catch((e) => { console.error(String(e)); process.exit(1); })`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }));
}

function authOf(security: Record<string, unknown>[] | undefined): Auth {
  const schemes = (security ?? []).flatMap((s) => Object.keys(s)).sort().join(',');
  switch (schemes) {
    case '':
      return 'none';
    case 'secretKey':
      return 'secret';
    case 'publicKey,secretKey':
      return 'public';
    case 'sessionCookie':
      return 'session';
    default:
      throw new Error(`unknown security requirement ${schemes}: teach test/helpers/openapi.ts what it means`);
  }
}

/** Every operation of the document. */
export function operationsOf(doc: any): Operation[] {
  return Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, raw]) => ({
        label: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        auth: authOf(raw.security ?? doc.security),
        pathParams: ((raw.parameters ?? []) as { in: string; name: string }[]).filter((p) => p.in === 'path').map((p) => p.name),
        raw,
      })),
  );
}

/** The schema behind a `$ref`. */
export function resolveSchema(doc: any, schema: JsonSchema | undefined): JsonSchema {
  let s = schema ?? {};
  for (let i = 0; s.$ref && i < 20; i++) {
    const name = String(s.$ref).replace('#/components/schemas/', '');
    s = doc.components.schemas[name];
  }
  return s;
}

/** A small value the schema accepts (required properties only; formats and bounds respected). */
export function exampleOf(doc: any, schema: JsonSchema | undefined): unknown {
  const s = resolveSchema(doc, schema);
  if (s.example !== undefined) return s.example;
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.anyOf ?? s.oneOf) return exampleOf(doc, (s.anyOf ?? s.oneOf)[0]);
  if (s.allOf) return Object.assign({}, ...s.allOf.map((p: JsonSchema) => exampleOf(doc, p)));
  const type = Array.isArray(s.type) ? s.type.find((t: string) => t !== 'null') : s.type;
  switch (type ?? (s.properties ? 'object' : undefined)) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of s.required ?? []) out[key] = exampleOf(doc, s.properties?.[key]);
      return out;
    }
    case 'array':
      return Array.from({ length: Math.max(1, s.minItems ?? 1) }, () => exampleOf(doc, s.items));
    case 'string':
      if (s.format === 'email') return `isolation-${randomUUID().slice(0, 8)}@example.com`;
      if (s.format === 'uuid') return randomUUID();
      if (s.format === 'date-time') return new Date().toISOString();
      if (s.format === 'uri' || s.format === 'url') return 'https://example.com/';
      return 'x'.repeat(Math.max(1, s.minLength ?? 1));
    case 'integer':
    case 'number':
      return s.minimum ?? s.exclusiveMinimum ?? 1;
    case 'boolean':
      return false;
    default:
      return {};
  }
}

/** The JSON request body the document describes for an operation, derived with `exampleOf`; undefined: none. */
export function jsonBodyOf(doc: any, op: Operation): { body?: unknown; problem?: string } {
  const content = op.raw.requestBody?.content as Record<string, { schema: JsonSchema }> | undefined;
  if (!content) return {};
  const json = content['application/json'];
  if (!json) return { problem: `${op.label} takes ${Object.keys(content).join(', ')}: give it a body by hand` };
  return { body: exampleOf(doc, json.schema) };
}

/**
 * Where `value` departs from `schema` (a schema of the document, `$ref`s followed): type (3.1 type lists), const,
 * enum, required, properties, items, anyOf/oneOf/allOf and `date-time`. An object schema listing `properties` without
 * `additionalProperties` is closed: a key it does not document is a problem. [] when the value conforms.
 */
export function schemaProblems(doc: any, schema: JsonSchema | undefined, value: unknown, at = '$'): string[] {
  const s = resolveSchema(doc, schema);
  if (s.allOf) return s.allOf.flatMap((part: JsonSchema) => schemaProblems(doc, part, value, at));
  const alternatives: JsonSchema[] | undefined = s.anyOf ?? s.oneOf;
  if (alternatives) return alternatives.some((alt) => schemaProblems(doc, alt, value, at).length === 0) ? [] : [`${at}: matches none of its ${alternatives.length} alternatives`];
  const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : Number.isInteger(value) ? 'integer' : typeof value;
  const types: string[] | undefined = s.type === undefined ? undefined : [s.type].flat();
  if (types && !types.includes(kind) && !(kind === 'integer' && types.includes('number'))) return [`${at}: ${kind}, documented as ${types.join(' or ')}`];
  if (s.const !== undefined && value !== s.const) return [`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(s.const)}`];
  if (s.enum && !s.enum.includes(value)) return [`${at}: ${JSON.stringify(value)} is none of ${JSON.stringify(s.enum)}`];
  if (s.format === 'date-time' && typeof value === 'string' && Number.isNaN(Date.parse(value))) return [`${at}: ${value} is not a date-time`];
  if (kind === 'array' && s.items) return (value as unknown[]).flatMap((v, i) => schemaProblems(doc, s.items, v, `${at}[${i}]`));
  if (kind !== 'object') return [];
  const obj = value as Record<string, unknown>;
  const props: Record<string, JsonSchema> = s.properties ?? {};
  return [
    ...((s.required ?? []) as string[]).filter((k) => !(k in obj)).map((k) => `${at}.${k}: required, missing`),
    ...Object.entries(obj).flatMap(([k, v]) => {
      if (props[k]) return schemaProblems(doc, props[k], v, `${at}.${k}`);
      if (s.additionalProperties === undefined && s.properties) return [`${at}.${k}: not documented`];
      return typeof s.additionalProperties === 'object' ? schemaProblems(doc, s.additionalProperties, v, `${at}.${k}`) : [];
    }),
  ];
}
