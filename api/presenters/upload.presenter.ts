import { z } from 'zod';
import type { Config } from '../../domain/config';
import { UPLOAD_CONTENT_TYPES } from '../../domain/uploads/upload.entity';
import { publicUploadUrl, type UploadRecord } from '../../domain/uploads/upload.service';
import { iso } from './time';

export const UploadSchema = z
  .object({
    id: z.string(),
    url: z.string().meta({ description: 'Public URL of the image, for template bodies: no credentials needed, cached for a year (the content never changes).' }),
    sha256: z.string().meta({ description: 'SHA-256 of the bytes (hex); the file name in `url`.' }),
    contentType: z.enum(UPLOAD_CONTENT_TYPES).meta({ description: 'Decided by the bytes, not by the file name or the Content-Type sent.' }),
    size: z.number().int().meta({ description: 'Bytes.' }),
    width: z.number().int(),
    height: z.number().int(),
    fileName: z.string().nullable().meta({ description: 'The file name the client sent, if any.' }),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'Upload' });

export function presentUpload(config: Pick<Config, 'publicUrl' | 'uploads'>, u: UploadRecord): z.infer<typeof UploadSchema> {
  return {
    id: u.id,
    url: publicUploadUrl(config, u),
    sha256: u.sha256,
    contentType: u.contentType,
    size: u.size,
    width: u.width,
    height: u.height,
    fileName: u.fileName ?? null,
    createdAt: iso(u.createdAt),
  };
}
