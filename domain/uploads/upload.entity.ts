import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';

/** The image types `POST /uploads/image` accepts (checked by their bytes, domain/uploads/image-sniff.ts). */
export const UPLOAD_CONTENT_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export type UploadContentType = (typeof UPLOAD_CONTENT_TYPES)[number];

/**
 * A project's uploaded image (migration 20261125110000). The bytes are stored once per content, named by their
 * SHA-256 (domain/uploads/upload-storage.ts); each project that uploads them has its own row, so a project's storage
 * figure and its deletes never depend on another project. Unique on (sha256, project): the same image uploaded twice
 * by one project is one upload, and the index also answers the public file route's lookup by hash alone.
 */
export const Upload = defineEntity({
  name: 'Upload',
  tableName: 'uploads',
  uniques: [{ properties: ['sha256', 'project'] }],
  // Lists are one project's uploads, newest first (UUIDv7 ids); the index also serves the project's cascade delete.
  indexes: [{ properties: ['project', 'id'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    /** Lowercase hex SHA-256 of the stored bytes. */
    sha256: p.string().length(64),
    contentType: p.enum([...UPLOAD_CONTENT_TYPES]),
    /** Bytes. */
    size: p.integer(),
    width: p.integer(),
    height: p.integer(),
    /** The file name the client sent, for people; never used to decide anything. */
    fileName: p.string().length(255).nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type Upload = InferEntity<typeof Upload>;
