import fs from 'node:fs/promises';
import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { UploadSchema, presentUpload } from '../presenters/upload.presenter';
import { ListUploadsQuery, PublicFileParams, UploadIdParams, UploadImageBody, UploadUsageResponse } from './schema';
import { notFound } from '../../domain/errors';
import { IMMUTABLE_CACHE_CONTROL, uploadStorageFor } from '../../domain/uploads/upload-storage';
import { deleteUpload, findPublicFile, findUpload, listUploads, openStoredFile, saveImage, uploadStorageUsage } from '../../domain/uploads/upload.service';

const TAGS = ['Uploads'];

/** The client's file name as a label: its last path segment, without control characters, at most 255 characters. */
function fileLabel(name: string | null | undefined): string | null {
  const base = (name ?? '').split(/[/\\]/).pop()!;
  // eslint-disable-next-line no-control-regex
  const clean = [...base.replace(/[\u0000-\u001f\u007f]/g, '').toWellFormed()].slice(0, 255).join('').trim();
  return clean || null;
}

/** Whether If-None-Match names this ETag (or `*`). */
function matchesEtag(ifNoneMatch: string, etag: string): boolean {
  return ifNoneMatch.trim() === '*' || ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

export function uploadRoutes(routes: Routes, deps: ApiDeps): void {
  // Made on first use: registration reads only the configuration (scripts/openapi.ts builds the document without services).
  const store = () => uploadStorageFor(deps.config.uploads);
  const maxBytes = deps.config.uploads.maxBytes;

  routes.add({
    method: 'post',
    path: '/uploads/image',
    summary: 'Upload an image; answers its public URL for template bodies',
    description:
      `multipart/form-data with the image in \`file\`: PNG, JPEG, GIF or WebP, at most ${maxBytes} bytes (UPLOADS_MAX_SIZE), 413 above. ` +
      'The type is decided by the bytes (the file name and the part\'s Content-Type do not count): anything else, an SVG (it can carry script), ' +
      'an empty file or a file that only starts like an image is refused with 422 (`file`: `unsupported_image_type`, `svg_not_allowed`, ' +
      '`empty_file`, `invalid_image`). The bytes are stored as sent (nothing is re-encoded or stripped), named by their SHA-256; the ' +
      'same image uploaded again by the project answers the existing upload with 200. Uploads count toward the project\'s storage (GET /uploads/usage).',
    tags: TAGS,
    auth: 'secret',
    body: UploadImageBody,
    multipart: { maxFileSize: maxBytes },
    responses: {
      201: { description: 'Stored', schema: UploadSchema },
      200: { description: 'The project had uploaded these bytes already: that upload', schema: UploadSchema },
      ...errorResponses(400, 401, 413, 422, 503),
    },
    handler: async ({ ctx, body, principal }) => {
      const bytes = await fs.readFile(body.file.filepath);
      const { upload, created } = await saveImage(ctx.state.em, store(), { projectId: principal.projectId, bytes, fileName: fileLabel(body.file.originalFilename) });
      return { status: created ? 201 : 200, body: presentUpload(deps.config, upload) };
    },
  });

  routes.add({
    method: 'get',
    path: '/uploads',
    summary: "List the project's uploads, newest first (cursor pagination)",
    tags: TAGS,
    auth: 'secret',
    query: ListUploadsQuery,
    responses: { 200: { description: 'A page of uploads', schema: cursorListSchema(UploadSchema, 'UploadList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listUploads(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map((u) => presentUpload(deps.config, u)) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/uploads/usage',
    summary: "The project's storage taken by uploads",
    description: 'Each project counts the images it uploaded, also when another project uploaded the same bytes (stored once).',
    tags: TAGS,
    auth: 'secret',
    responses: { 200: { description: 'Uploads and their bytes', schema: UploadUsageResponse }, ...errorResponses(401) },
    handler: async ({ ctx, principal }) => ({ body: await uploadStorageUsage(ctx.state.em, principal.projectId) }),
  });

  routes.add({
    method: 'get',
    path: '/uploads/:id',
    summary: 'Get an upload',
    tags: TAGS,
    auth: 'secret',
    params: UploadIdParams,
    responses: { 200: { description: 'The upload', schema: UploadSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentUpload(deps.config, await findUpload(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'delete',
    path: '/uploads/:id',
    summary: 'Delete an upload',
    description:
      'The stored bytes are removed too unless another upload (of any project) has the same content; from then on the public URL ' +
      'answers 404, also in mail already sent.',
    tags: TAGS,
    auth: 'secret',
    params: UploadIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal }) => {
      await deleteUpload(ctx.state.em, store(), principal.projectId, params.id);
      return {};
    },
  });

  routes.add({
    method: 'get',
    path: '/uploads/files/:file',
    summary: 'An uploaded image (public)',
    description:
      'No credentials: the URL of an upload, for mail clients and browsers. The name is the content\'s SHA-256, so the answer never ' +
      `changes: \`Cache-Control: ${IMMUTABLE_CACHE_CONTROL}\`, \`ETag\` (the hash; \`If-None-Match\` answers 304), the type found at upload, ` +
      '`X-Content-Type-Options: nosniff` and a sandboxing Content-Security-Policy. 404 once no upload has the content.',
    tags: TAGS,
    auth: 'none',
    params: PublicFileParams,
    responses: {
      200: { description: 'The image', contentType: 'image/*', schema: z.string().meta({ format: 'binary' }) },
      304: { description: 'Not modified (If-None-Match names the ETag)' },
      ...errorResponses(404, 422, 503),
    },
    handler: async ({ ctx, params }) => {
      const file = await findPublicFile(ctx.state.em, params.file);
      if (!file) throw notFound('File');
      const etag = `"${file.sha256}"`;
      // Set only once the answer is known to be the image: a 404 must not be cached for a year.
      const cacheHeaders = { 'Cache-Control': IMMUTABLE_CACHE_CONTROL, ETag: etag };
      if (matchesEtag(ctx.get('if-none-match'), etag)) {
        ctx.set(cacheHeaders);
        return { status: 304 };
      }
      const body = await openStoredFile(store(), params.file);
      if (!body) throw notFound('File');
      ctx.set({
        ...cacheHeaders,
        'X-Content-Type-Options': 'nosniff',
        // Opened on its own (not as an <img>), the file runs nothing and reaches nothing.
        'Content-Security-Policy': "default-src 'none'; sandbox",
        'Cross-Origin-Resource-Policy': 'cross-origin',
      });
      ctx.type = file.contentType;
      ctx.length = file.size;
      return { status: 200, body };
    },
  });
}
