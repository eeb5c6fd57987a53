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
 * Cursors are opaque to clients: the last id of the page (ids are UUIDv7, so id order is creation order), base64url
 * encoded. Rows inserted while a client walks the list have larger ids and sort before its position, so a walk
 * never sees a row twice and never misses one that existed when it started.
 */
function encodeCursor(lastId: string): string {
  return Buffer.from(`v1:${lastId}`).toString('base64url');
}

export function decodeCursor(cursor: string | undefined, field = 'query.cursor'): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
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
