import { z, type ZodType } from 'zod';
import type { AppContext } from './context';
import { validationError } from '../domain/errors';

/**
 * SPEC.md › Versioning: the earlier response variant, opt-in. In it, dashboard resources (every route outside `/v1`
 * that takes a secret key or a session) are wrapped in `{ success: true, data }`, and cursor lists read
 * `{ items, nextCursor, hasMore, total }`. A request chooses with this header; without it, a secret-key request
 * follows its project's `settings.responseVariant`; otherwise the current variant applies. Errors keep the one
 * envelope in both.
 */
const VARIANT_HEADER = 'Mailwright-Response-Variant';
export const RESPONSE_VARIANTS = ['current', 'earlier'] as const;
export type ResponseVariant = (typeof RESPONSE_VARIANTS)[number];

/** The header as the OpenAPI document states it, on every route that has both variants. */
export const VariantHeaders = z.object({
  [VARIANT_HEADER]: z
    .enum(RESPONSE_VARIANTS)
    .optional()
    .meta({ description: "Response variant: `earlier` wraps the body in `{ success, data }` and names cursor lists' keys `items`/`nextCursor`. Default: the project's `settings.responseVariant` (secret key), else `current`." }),
});

export function hasVariants(route: { path: string; auth: string }): boolean {
  return !route.path.startsWith('/v1/') && (route.auth === 'secret' || route.auth === 'session');
}

/** The variant of this request: the header (a value other than the two is 422), else the project's setting. */
export function requestedVariant(ctx: AppContext): ResponseVariant {
  const asked = ctx.headers[VARIANT_HEADER.toLowerCase()];
  if (asked !== undefined) {
    if (typeof asked === 'string' && (RESPONSE_VARIANTS as readonly string[]).includes(asked)) return asked as ResponseVariant;
    throw validationError([{ field: `headers.${VARIANT_HEADER}`, message: `${VARIANT_HEADER} is current or earlier`, code: 'invalid_enum_value' }]);
  }
  return ctx.state.principal?.settings.responseVariant ?? 'current';
}

const isCursorList = (body: unknown): body is { data: unknown[]; cursor: unknown } =>
  typeof body === 'object' && body !== null && Array.isArray((body as { data?: unknown }).data) && 'cursor' in body && 'hasMore' in body;

/** A response body in the earlier variant. */
export function toEarlier(body: unknown): { success: true; data: unknown } {
  if (isCursorList(body)) {
    const { data, cursor, ...rest } = body;
    return { success: true, data: { items: data, nextCursor: cursor, ...rest } };
  }
  return { success: true, data: body };
}

/** The schema of a response in the earlier variant, from its current schema (the same rule as `toEarlier`). */
export function earlierSchema(schema: ZodType): ZodType {
  let inner: ZodType = schema;
  if (schema instanceof z.ZodObject && 'data' in schema.shape && 'cursor' in schema.shape && 'hasMore' in schema.shape) {
    const { data, cursor, ...rest } = schema.shape as Record<string, ZodType>;
    inner = z.object({ items: data!, nextCursor: cursor!, ...rest });
  }
  return z.object({ success: z.literal(true), data: inner }).meta({ description: `The earlier variant (${VARIANT_HEADER}: earlier).` });
}
