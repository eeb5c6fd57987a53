import { UUID_RE } from './ids';
import { validationError } from './errors';

/** Cursor lists return `{ data, cursor, hasMore, total }`; `total` only on the first page (SPEC.md › Contacts). */
export interface CursorPage<T> {
  data: T[];
  cursor: string | null;
  hasMore: boolean;
  total: number;
}

/**
 * Cursors are opaque to clients: the last id of the page (ids are UUIDv7, so id order is creation order), its 16
 * bytes in unpadded base64url (22 characters). Rows inserted while a client walks the list have larger ids and sort
 * before its position, so a walk never sees a row twice and never misses one that existed when it started.
 *
 * Every 22-character string of that alphabet whose last character carries no bits beyond the 128th (`A`, `Q`, `g`,
 * `w`) is 16 bytes, so is a position: the OpenAPI document publishes ID_CURSOR_PATTERN and the server takes every
 * string that matches it (a position past any row gives an empty page). The empty string is the first page.
 */
export const ID_CURSOR_PATTERN = '^(?:[A-Za-z0-9_-]{21}[AQgw])?$';
const ID_CURSOR = /^[A-Za-z0-9_-]{21}[AQgw]$/;

function encodeCursor(lastId: string): string {
  return Buffer.from(lastId.replace(/-/g, ''), 'hex').toString('base64url');
}

export function decodeCursor(cursor: string | undefined, field = 'query.cursor'): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  if (ID_CURSOR.test(cursor)) {
    const hex = Buffer.from(cursor, 'base64url').toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
  // The form cursors had before 2026-11 (`v1:<id>` in base64url) is still read, so a walk begun before an upgrade
  // goes on; the document gives only the current form.
  const raw = Buffer.from(cursor, 'base64url').toString('utf8');
  const id = raw.startsWith('v1:') ? raw.slice(3) : '';
  if (!UUID_RE.test(id)) {
    throw validationError([{ field, message: 'Invalid cursor: pass the `cursor` value of the previous page unchanged', code: 'invalid_cursor' }]);
  }
  return id;
}

/** Builds a page from `limit + 1` rows fetched in list order. */
export function toPage<T extends { id: string }>(rows: T[], limit: number, total: number): CursorPage<T> {
  const hasMore = rows.length > limit;
  const data = hasMore ? rows.slice(0, limit) : rows;
  return { data, cursor: hasMore ? encodeCursor(data[data.length - 1]!.id) : null, hasMore, total };
}

/** Escapes LIKE wildcards so a search term matches literally. */
export function likeEscape(term: string): string {
  return term.replace(/[\\%_]/g, (c) => `\\${c}`);
}
