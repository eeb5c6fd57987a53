import { z, type ZodError } from 'zod';
import type { FieldError } from '../domain/errors';

/** zod issues as SPEC.md field errors. zod 4 reports bad emails/urls as `invalid_format`; SPEC calls it `invalid_string`. */
export function zodFieldErrors(err: ZodError): FieldError[] {
  return err.issues.map((issue) => ({
    field: issue.path.map(String).join('.') || '(body)',
    message: issue.message,
    code: issue.code === 'invalid_format' ? 'invalid_string' : issue.code === 'custom' ? String((issue as { params?: { code?: string } }).params?.code ?? 'custom') : issue.code,
  }));
}

/** A custom issue whose field error code is `code` (e.g. `reserved_event`). */
export function customIssue(ctx: z.RefinementCtx, message: string, code: string, path: (string | number)[] = []) {
  ctx.addIssue({ code: 'custom', message, path, params: { code } });
}

/** An email address; surrounding whitespace is forgiven (and trimmed). */
export const emailString = z.preprocess(
  (v) => (typeof v === 'string' ? v.trim() : v),
  z.email({ error: 'Must be a valid email address' }).max(320),
);

/** Query strings arrive as text. */
export const queryBoolean = z.enum(['true', 'false']).transform((v) => v === 'true');
