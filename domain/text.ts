/**
 * Character classes for text patterns that the OpenAPI document publishes. They are spelled with explicit `\uXXXX`
 * ranges and no regex flags, so the pattern text means the same in JavaScript, in JSON Schema validators and in
 * Python's `re` (schemathesis): `\p{Cc}` and the `u` flag are not portable, and `\s` differs between engines.
 */

/** Unicode general category Cc: C0 controls, DEL and C1 controls. */
export const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f';

/** Exactly the characters JavaScript's `\s` matches (line terminators and Unicode spaces included). */
export const SPACE = '\\u0009-\\u000d\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/** `text` with the characters that mean something in a pattern escaped. */
const escapePattern = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** `word` as a case-insensitive pattern without flags: `ab.` -> `[aA][bB]\.` (special characters escaped). */
export function caseInsensitive(word: string): string {
  return escapePattern(word).replace(/[a-zA-Z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`);
}

/** A pattern that matches exactly `words` (escaped), for a negative lookahead. */
export function alternatives(words: Iterable<string>): string {
  return [...words].map(escapePattern).join('|');
}
