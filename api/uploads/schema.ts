import { z } from 'zod';
import type { File as UploadedFile } from 'formidable';
import { IdCursor, Limit } from '../contacts/schema';
import { PUBLIC_FILE_NAME } from '../../domain/uploads/upload.service';

const isUpload = (v: unknown): v is UploadedFile => typeof v === 'object' && v !== null && 'filepath' in v && 'size' in v;

export const UploadImageBody = z
  .object({
    file: z
      .custom<UploadedFile>(isUpload, { error: 'An image file in the multipart field `file` is required' })
      .meta({ type: 'string', format: 'binary', description: 'The image: PNG, JPEG, GIF or WebP (decided by its bytes; SVG is refused), at most UPLOADS_MAX_SIZE (5 MB by default).' }),
  })
  .meta({ id: 'UploadImageRequest' });

export const ListUploadsQuery = z.object({ limit: Limit, cursor: IdCursor });

export const UploadIdParams = z.object({ id: z.uuid({ error: 'Must be an upload id (UUID)' }) });

export const PublicFileParams = z.object({
  file: z
    .string()
    .regex(PUBLIC_FILE_NAME, 'Must be <sha256>.<png|jpg|gif|webp>')
    .meta({ description: 'The file name in an upload\'s `url`: the SHA-256 of its bytes and its extension.', example: `${'0'.repeat(64)}.png` }),
});

export const UploadUsageResponse = z
  .object({
    uploads: z.number().int().meta({ description: "The project's uploads (the same image uploaded twice is one)." }),
    bytes: z.number().int().meta({ description: 'Their bytes together: what uploads add to the project\'s storage.' }),
  })
  .meta({ id: 'UploadUsage' });
