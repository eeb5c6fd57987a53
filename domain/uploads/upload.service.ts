import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, notFound, serviceUnavailable, validationError } from '../errors';
import { decodeCursor, toPage, type CursorPage } from '../pagination';
import { uuidv7 } from '../ids';
import type { Config } from '../config';
import { ImageRejected, sniffImage } from './image-sniff';
import { s3Key, type UploadStorage } from './upload-storage';
import { Upload, type UploadContentType } from './upload.entity';
import { sql } from '../db/sql';

/** An upload as the API presents it. */
export interface UploadRecord {
  id: string;
  sha256: string;
  contentType: UploadContentType;
  size: number;
  width: number;
  height: number;
  fileName: string | null | undefined;
  createdAt: Date;
}

const EXTENSIONS: Record<UploadContentType, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** The public file name of stored content: `<sha256>.<ext>` (what the storage and the public route know it by). */
const storedName = (u: { sha256: string; contentType: UploadContentType }) => `${u.sha256}.${EXTENSIONS[u.contentType]}`;

/** Where clients fetch an upload: the bucket's public URL when S3_PUBLIC_URL is set, else the API's own route. */
export function publicUploadUrl(config: Pick<Config, 'publicUrl' | 'uploads'>, u: { sha256: string; contentType: UploadContentType }): string {
  const name = storedName(u);
  const bucketUrl = config.uploads.s3?.publicUrl;
  return bucketUrl ? `${bucketUrl}/${s3Key(name)}` : `${config.publicUrl}/uploads/files/${name}`;
}

const COLUMNS = `id, sha256, content_type as "contentType", size, width, height, file_name as "fileName", created_at as "createdAt"`;

/** A storage failure as the envelope's 503; the cause goes to the log with the request id. */
function storageUnavailable(cause: unknown) {
  return Object.assign(serviceUnavailable('The upload storage is unavailable; try again'), { cause });
}

/**
 * Serializes, per content hash, adding a reference and removing the last one with its bytes (transaction-scoped, so
 * it ends with the transaction). One-key advisory locks live apart from the two-key ones of the event dispatcher.
 */
async function lockContent(tx: EntityManager, sha256: string): Promise<void> {
  await sql(tx).run(`select pg_advisory_xact_lock(hashtextextended('upload:' || $1::text, 0))`, [sha256]);
}

export interface SaveImageInput {
  projectId: string;
  bytes: Buffer;
  fileName?: string | null;
}

/**
 * Stores an image for a project, byte for byte (nothing is re-encoded or stripped, so the hash is of what was sent).
 * What it is comes from its bytes (422 `VALIDATION_ERROR` on `file` otherwise). The same bytes uploaded again by the
 * project answer the existing upload (`created: false`).
 *
 * The row is committed before the bytes are written, under the content's lock, and a delete removes the bytes only
 * under that lock when it took the last row: so a delete never removes bytes that a committed row still needs (an
 * upload racing it writes them again after its own commit). If the write fails, a row this call created is removed
 * again and the caller gets 503.
 */
export async function saveImage(em: EntityManager, storage: UploadStorage, input: SaveImageInput): Promise<{ upload: UploadRecord; created: boolean }> {
  let image;
  try {
    image = sniffImage(input.bytes);
  } catch (err) {
    if (err instanceof ImageRejected) throw validationError([{ field: 'file', message: err.message, code: err.code }], err.message);
    throw err;
  }
  const sha256 = createHash('sha256').update(input.bytes).digest('hex');
  const { upload, created } = await em.transactional(async (tx) => {
    await lockContent(tx, sha256);
    const inserted = await sql(tx).one<UploadRecord>(
      `insert into uploads (id, project_id, sha256, content_type, size, width, height, file_name) values ($1, $2, $3, $4, $5, $6, $7, $8)
       on conflict (sha256, project_id) do nothing returning ${COLUMNS}`,
      [uuidv7(), input.projectId, sha256, image.contentType, input.bytes.length, image.width, image.height, input.fileName ?? null],
    );
    if (inserted) return { upload: inserted, created: true };
    const existing = await sql(tx).one<UploadRecord>(`select ${COLUMNS} from uploads where sha256 = $1 and project_id = $2`, [sha256, input.projectId]);
    return { upload: existing!, created: false };
  });
  try {
    // Also when the row existed: the write is idempotent, and it restores bytes lost outside the service.
    await storage.put(storedName(upload), input.bytes, upload.contentType);
  } catch (err) {
    // The bytes may not be there at all; the row must go regardless (bytes without a row are never served).
    if (created) await dropUpload(em, storage, input.projectId, upload.id, false).catch(() => undefined);
    throw storageUnavailable(err);
  }
  return { upload, created };
}

/** The project's upload, or 404 NOT_FOUND (another project's upload is not found either). */
export async function findUpload(em: EntityManager, projectId: string, id: string): Promise<Upload> {
  const upload = await em.findOne(Upload, { id, project: projectId });
  if (!upload) throw notFound('Upload');
  return upload;
}

/** Newest first (UUIDv7 ids). */
export async function listUploads(em: EntityManager, projectId: string, q: { limit: number; cursor?: string }): Promise<CursorPage<Upload>> {
  const after = decodeCursor(q.cursor);
  const where = { project: projectId };
  const rows = await em.find(Upload, after ? { ...where, id: { $lt: after } } : where, { orderBy: { id: 'desc' }, limit: q.limit + 1 });
  const total = after ? 0 : await em.count(Upload, where);
  return toPage(rows, q.limit, total);
}

/**
 * The project's storage figure: its uploads and their bytes. Each project counts what it uploaded, even when another
 * project uploaded the same bytes (stored once); the same bytes uploaded twice by one project count once.
 */
export async function uploadStorageUsage(em: EntityManager, projectId: string): Promise<{ uploads: number; bytes: number }> {
  const row = await sql(em).one<{ uploads: number; bytes: string }>(
    'select count(*)::int as uploads, coalesce(sum(size), 0)::bigint as bytes from uploads where project_id = $1',
    [projectId],
  );
  return { uploads: row?.uploads ?? 0, bytes: Number(row?.bytes ?? 0) };
}

/**
 * Deletes the project's upload (404 if it has none by that id). The stored bytes go too when no other upload (of any
 * project) has the same content; its public URL then stops working, also in mail already sent.
 */
export function deleteUpload(em: EntityManager, storage: UploadStorage, projectId: string, id: string): Promise<void> {
  return dropUpload(em, storage, projectId, id, true);
}

/**
 * Deletes every upload of a project (before the project itself goes): each one's bytes too when no other project has
 * the same content. A storage that cannot remove bytes does not stop the deletion (the bytes stay behind, served no
 * more: nothing references them).
 */
export async function deleteProjectUploads(em: EntityManager, storage: UploadStorage, projectId: string): Promise<number> {
  const rows = await sql(em).query<{ id: string }>('select id from uploads where project_id = $1', [projectId]);
  for (const r of rows) {
    await dropUpload(em, storage, projectId, r.id, false).catch((err: unknown) => {
      if (!(err instanceof AppError && err.statusCode === 404)) throw err; // gone meanwhile
    });
  }
  return rows.length;
}

/** `strict`: the row stays when its bytes cannot be removed; otherwise the row goes whatever the storage says. */
async function dropUpload(em: EntityManager, storage: UploadStorage, projectId: string, id: string, strict: boolean): Promise<void> {
  const row = await sql(em).one<{ sha256: string }>('select sha256 from uploads where id = $1 and project_id = $2', [id, projectId]);
  if (!row) throw notFound('Upload');
  await em.transactional(async (tx) => {
    await lockContent(tx, row.sha256);
    const deleted = await sql(tx).one<{ sha256: string; contentType: UploadContentType }>(
      'delete from uploads where id = $1 and project_id = $2 returning sha256, content_type as "contentType"',
      [id, projectId],
    );
    if (!deleted) throw notFound('Upload');
    const other = await sql(tx).one<{ one: number }>('select 1 as one from uploads where sha256 = $1 limit 1', [row.sha256]);
    if (other) return;
    // Inside the transaction: if the bytes cannot be removed, the row stays too (and the caller may retry).
    await storage.remove(storedName(deleted)).catch((err: unknown) => {
      if (strict) throw storageUnavailable(err);
    });
  });
}

/** `<sha256>.<ext>` as the public route receives it. */
export const PUBLIC_FILE_NAME = /^([0-9a-f]{64})\.(png|jpg|gif|webp)$/;

/**
 * What a public file name is, if an upload of any project has that content with that extension (so nothing is served
 * that no upload references, e.g. bytes a failed delete left behind). No project is needed: the name is the content's
 * hash.
 */
export async function findPublicFile(em: EntityManager, name: string): Promise<{ sha256: string; contentType: UploadContentType; size: number } | undefined> {
  const m = PUBLIC_FILE_NAME.exec(name);
  if (!m) return undefined;
  const sha256 = m[1]!;
  const row = await sql(em).one<{ contentType: UploadContentType; size: number }>(
    'select content_type as "contentType", size from uploads where sha256 = $1 limit 1',
    [sha256],
  );
  if (!row || storedName({ sha256, contentType: row.contentType }) !== name) return undefined;
  return { sha256, ...row };
}

/** The stored bytes of a name found by findPublicFile (undefined if the storage has lost them; 503 if it fails). */
export async function openStoredFile(storage: UploadStorage, name: string): Promise<Readable | undefined> {
  try {
    return await storage.open(name);
  } catch (err) {
    throw storageUnavailable(err);
  }
}
