import { z } from 'zod';

export const ErrorEnvelope = z
  .object({
    success: z.literal(false),
    error: z.object({
      code: z.string().meta({ example: 'VALIDATION_ERROR' }),
      message: z.string(),
      statusCode: z.number().int(),
      requestId: z.uuid(),
      errors: z.array(z.object({ field: z.string(), message: z.string(), code: z.string() })).optional(),
      suggestion: z.string().optional(),
    }),
    timestamp: z.iso.datetime(),
  })
  .meta({ id: 'Error', description: 'The error envelope of every error response.' });

/** The usual error responses of an authenticated JSON endpoint. */
export function errorResponses(...statuses: number[]): Record<number, { description: string; schema: typeof ErrorEnvelope }> {
  const text: Record<number, string> = {
    400: 'Malformed request (e.g. invalid JSON)',
    401: 'Missing or invalid credentials (INVALID_API_KEY, UNAUTHORIZED)',
    402: 'A billing cap of the project would be passed (BILLING_LIMIT_EXCEEDED); nothing was done',
    403: 'Not allowed (project disabled, role too low, unverified sender domain)',
    404: 'Not found',
    409: 'Conflict',
    413: 'Body too large',
    422: 'Validation failed (VALIDATION_ERROR with field errors)',
    429: "The project's request budget is spent (RATE_LIMIT_EXCEEDED); see Retry-After",
    503: 'A dependency is unavailable; nothing was done',
  };
  return Object.fromEntries(statuses.map((s) => [s, { description: text[s] ?? 'Error', schema: ErrorEnvelope }]));
}

export const IdParams = z.object({ id: z.uuid({ error: 'Must be a UUID' }) });
