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

/** How deep free-form JSON (contact data, event data, filters) may nest; a body deeper than this is refused whole. */
export const MAX_INPUT_DEPTH = 32;

/** Lone UTF-16 surrogates (half of a pair) cannot be stored as UTF-8; `isWellFormed` finds them without a regex. */
const hasNul = (s: string) => s.includes('\u0000');

/**
 * One check that every request input passes before its schema sees it (body, query and path parameters, and the keys
 * and values inside free-form objects): no NUL characters and no lone surrogates in any text (Postgres cannot store
 * either), no nesting deeper than MAX_INPUT_DEPTH, no number JSON rounded to infinity (`1e400`), and no `__proto__`
 * key. Returns field errors; the walk never descends past the depth bound, so a hostile body costs little.
 */
export function inputProblems(value: unknown, prefix: string[] = []): FieldError[] {
  const problems: FieldError[] = [];
  const field = (path: (string | number)[]) => [...prefix, ...path.map(String)].join('.') || '(body)';
  const text = (s: string, path: (string | number)[], what: string) => {
    if (hasNul(s)) problems.push({ field: field(path), message: `${what} must not contain NUL (U+0000) characters`, code: 'invalid_characters' });
    else if (!s.isWellFormed()) problems.push({ field: field(path), message: `${what} must not contain unpaired UTF-16 surrogates`, code: 'invalid_characters' });
  };
  const walk = (v: unknown, path: (string | number)[], depth: number): void => {
    if (problems.length >= 20) return;
    if (typeof v === 'string') return text(v, path, 'Text');
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) problems.push({ field: field(path), message: 'Numbers must be finite (at most about 1.8e308)', code: 'invalid_number' });
      return;
    }
    if (v === null || typeof v !== 'object') return;
    const isArray = Array.isArray(v);
    // Uploaded files (multipart) and other non-plain objects are not JSON input.
    if (!isArray && Object.getPrototypeOf(v) !== Object.prototype && Object.getPrototypeOf(v) !== null) return;
    if (depth >= MAX_INPUT_DEPTH) {
      problems.push({ field: field(path), message: `JSON may nest at most ${MAX_INPUT_DEPTH} levels deep`, code: 'too_deep' });
      return;
    }
    if (isArray) return v.forEach((item, i) => walk(item, [...path, i], depth + 1));
    for (const [k, item] of Object.entries(v)) {
      text(k, [...path, k], 'Keys');
      if (k === '__proto__') problems.push({ field: field([...path, k]), message: 'The key "__proto__" is not allowed', code: 'forbidden_key' });
      walk(item, [...path, k], depth + 1);
    }
  };
  walk(value, [], 0);
  return problems;
}
