import { z, type ZodError } from 'zod';
import type { FieldError } from '../domain/errors';
import { SPACE } from '../domain/text';

type Issue = ZodError['issues'][number];

/**
 * A union whose value had the type of exactly one of its options (a string for `email | { email, name }`) reports
 * that option's problems, which say what is wrong, rather than "matches none of the options".
 */
function unionBranch(issue: Issue): Issue[] {
  if (issue.code !== 'invalid_union') return [issue];
  const typed = issue.errors.filter((branch) => !branch.some((i) => i.code === 'invalid_type' && i.path.length === 0));
  if (typed.length !== 1) return [issue];
  return typed[0]!.flatMap((i) => unionBranch({ ...i, path: [...issue.path, ...i.path] } as Issue));
}

/** zod issues as SPEC.md field errors. zod 4 reports bad emails/urls as `invalid_format`; SPEC calls it `invalid_string`. */
export function zodFieldErrors(err: ZodError): FieldError[] {
  return err.issues.flatMap(unionBranch).map((issue) => ({
    field: issue.path.map(String).join('.') || '(body)',
    message: issue.message,
    code: issue.code === 'invalid_format' ? 'invalid_string' : issue.code === 'custom' ? String((issue as { params?: { code?: string } }).params?.code ?? 'custom') : issue.code,
  }));
}

/** A custom issue whose field error code is `code` (e.g. `reserved_event`). */
export function customIssue(ctx: z.RefinementCtx, message: string, code: string, path: (string | number)[] = []) {
  ctx.addIssue({ code: 'custom', message, path, params: { code } });
}

/** The address rule every email field uses (zod's), published as the field's pattern, around optional whitespace. */
const EMAIL_PATTERN = new RegExp(`^[${SPACE}]*${z.regexes.email.source.slice(1, -1)}[${SPACE}]*$`);

/**
 * An email address; surrounding whitespace is forgiven (and trimmed). The length limit counts the text as sent, and
 * the document states the address rule as a pattern, so a client validating against it agrees with the server. (Not
 * `format: email`: that format allows no surrounding whitespace and other local parts than the rule does.)
 */
export const emailString = z
  .string()
  .max(320)
  .regex(EMAIL_PATTERN, { error: 'Must be a valid email address' })
  .transform((v) => v.trim())
  .meta({ description: 'An email address (surrounding whitespace is ignored).', example: 'jane@example.com' });

/**
 * A name: at most `max` characters as sent, trimmed, and not blank. The document says "not blank" as a pattern (some
 * character that is not whitespace), so a client validating against it agrees with the server.
 */
export function nameText(max: number, messages: { required?: string; tooLong?: string } = {}, base = z.string()) {
  return base
    .max(max, messages.tooLong)
    .trim()
    .min(1, messages.required)
    .meta({ pattern: `[^${SPACE}]` });
}

/** A pattern for text that goes into a header line: no CR or LF. */
export const NO_LINE_BREAKS = '^[^\\r\\n]*$';

/** A sender's display name (`fromName` of templates and campaigns): it ends up in the From header, so no line breaks; "" means no name. */
export const senderName = z
  .string()
  .max(200, 'fromName is at most 200 characters')
  .refine((s) => !/[\r\n]/.test(s), { message: 'fromName cannot contain CR or LF', params: { code: 'header_injection' } })
  .meta({ pattern: NO_LINE_BREAKS })
  .trim()
  .transform((s) => (s === '' ? null : s));


/** Query strings arrive as text. */
export const queryBoolean = z.enum(['true', 'false']).transform((v) => v === 'true');

/** How deep free-form JSON (contact data, event data, filters) may nest; a body deeper than this is refused whole. */
const MAX_INPUT_DEPTH = 32;

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
    if (s.includes('\u0000')) problems.push({ field: field(path), message: `${what} must not contain NUL (U+0000) characters`, code: 'invalid_characters' });
    // Lone UTF-16 surrogates (half of a pair) cannot be stored as UTF-8; `isWellFormed` finds them without a regex.
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
