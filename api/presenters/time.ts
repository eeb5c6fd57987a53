/**
 * A timestamp as the API writes it: ISO 8601 in UTC with milliseconds (`2026-11-27T02:46:13.123Z`); null stays null.
 * Entities and raw rows (domain/db/sql.ts) both carry timestamps as `Date`, so this is the one conversion.
 */
export function iso(d: Date): string;
export function iso(d: Date | null): string | null;
export function iso(d: Date | null): string | null {
  return d === null ? null : d.toISOString();
}
