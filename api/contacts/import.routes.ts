import fs from 'node:fs/promises';
import type { Routes } from '../route';
import { errorResponses } from '../common.schema';
import { BulkJobResponse, ContactIdsBody, ImportBody, ImportJobResponse, JobIdParams, JobQueuedResponse } from './import.schema';
import { cancelJob, getJob, submitBulkJob, submitImportJob, type BulkJobType, type JobRow } from '../../domain/jobs/job.service';
import { CsvRejected, MAX_IMPORT_BYTES, readLayout } from '../../domain/contacts/contact-import-csv';
import { validationError } from '../../domain/errors';
import type { ApiDeps } from '../context';
import { iso } from '../presenters/time';

const TAGS = ['Contacts'];

function presentImportJob(j: JobRow) {
  return {
    jobId: j.id,
    status: j.status,
    total: j.total,
    processed: j.processed,
    created: j.created,
    updated: j.updated,
    skipped: j.skipped,
    failed: j.failed,
    errors: j.errors,
    message: j.message,
    createdAt: iso(j.createdAt),
    startedAt: iso(j.startedAt),
    finishedAt: iso(j.finishedAt),
  };
}

function presentBulkJob(j: JobRow) {
  return {
    jobId: j.id,
    type: j.type as BulkJobType,
    status: j.status,
    total: j.total,
    processed: j.processed,
    changed: j.changed,
    skipped: j.skipped,
    failed: j.failed,
    message: j.message,
    createdAt: iso(j.createdAt),
    finishedAt: iso(j.finishedAt),
  };
}

/** CSV import and bulk contact jobs. Registered before contactRoutes, so /contacts/:id does not take these paths. */
export function contactJobRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'post',
    path: '/contacts/import',
    summary: 'Import contacts from a CSV file (queued)',
    description:
      'multipart/form-data: `file` (CSV, UTF-8, at most 5 MB; `,` `;` or tab, detected from the header), optional `mapping` and `subscribed`. ' +
      'The header needs an `email` column (any case) unless `mapping` names one; `subscribed` (true/false/yes/no/1/0) is optional; other columns ' +
      'become contact data (numbers and booleans typed, empty cells ignored). A file that is empty, binary, not UTF-8 or has no email column is refused with 422. ' +
      "New contacts past the project's contacts cap are not created: each is a row error of the job.",
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
    body: ImportBody,
    multipart: { maxFileSize: MAX_IMPORT_BYTES },
    responses: { 202: { description: 'Queued', schema: JobQueuedResponse }, ...errorResponses(400, 401, 413, 422, 503) },
    handler: async ({ ctx, body, principal }) => {
      const content = await fs.readFile(body.file.filepath);
      try {
        readLayout(content, body.mapping);
      } catch (err) {
        if (err instanceof CsvRejected) throw validationError([{ field: err.field, message: err.message, code: err.field === 'mapping' ? 'invalid_mapping' : 'invalid_csv' }], err.message);
        throw err;
      }
      const projectId = principal.projectId;
      const jobId = await submitImportJob(ctx.state.em, deps.temporal, {
        projectId,
        fileName: body.file.originalFilename ?? undefined,
        content,
        options: { mapping: body.mapping, subscribed: body.subscribed },
      });
      return { status: 202, body: { jobId } };
    },
  });

  routes.add({
    method: 'get',
    path: '/contacts/import/:jobId',
    summary: 'Status of a CSV import job',
    tags: TAGS,
    auth: 'secret',
    params: JobIdParams,
    responses: { 200: { description: 'The job', schema: ImportJobResponse }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentImportJob(await getJob(ctx.state.em, principal.projectId, params.jobId, 'import')) }),
  });

  routes.add({
    method: 'post',
    path: '/contacts/import/:jobId/cancel',
    summary: 'Cancel a CSV import job',
    description:
      'Marks the job CANCELLED and cancels its workflow, as one unit: if Temporal is unreachable the answer is 503 and the job is unchanged ' +
      '(retry). Chunks of 1000 rows are committed one by one: the rows of chunks committed ' +
      'before the cancel stay imported (and counted in `processed`), nothing is written after. 409 `JOB_ENDED` when the job already ended.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Records the cancel and tells Temporal as one unit (recordThenTell)',
    params: JobIdParams,
    responses: { 200: { description: 'The cancelled job', schema: ImportJobResponse }, ...errorResponses(401, 404, 409, 422, 503) },
    handler: async ({ ctx, params, principal }) => ({ body: presentImportJob(await cancelJob(ctx.state.em, deps.temporal, principal.projectId, params.jobId, 'import')) }),
  });

  const bulk: [string, BulkJobType, string][] = [
    ['/contacts/bulk-subscribe', 'BULK_SUBSCRIBE', 'Subscribe up to 1000 contacts (queued)'],
    ['/contacts/bulk-unsubscribe', 'BULK_UNSUBSCRIBE', 'Unsubscribe up to 1000 contacts (queued)'],
    ['/contacts/bulk-delete', 'BULK_DELETE', 'Delete up to 1000 contacts and their events (queued)'],
  ];
  for (const [path, type, summary] of bulk) {
    routes.add({
      method: 'post',
      path,
      summary,
      description: 'Ids of other projects and unknown ids are skipped (counted in `skipped`), never touched.',
      tags: TAGS,
      auth: 'secret',
      ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
      body: ContactIdsBody,
      responses: { 202: { description: 'Queued', schema: JobQueuedResponse }, ...errorResponses(400, 401, 422, 503) },
      handler: async ({ ctx, body, principal }) => {
        const projectId = principal.projectId;
        const jobId = await submitBulkJob(ctx.state.em, deps.temporal, { projectId, type, contactIds: body.contactIds });
        return { status: 202, body: { jobId } };
      },
    });
  }

  routes.add({
    method: 'get',
    path: '/contacts/bulk/:jobId',
    summary: 'Status of a bulk contact job',
    tags: TAGS,
    auth: 'secret',
    params: JobIdParams,
    responses: { 200: { description: 'The job', schema: BulkJobResponse }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentBulkJob(await getJob(ctx.state.em, principal.projectId, params.jobId, 'bulk')) }),
  });

  routes.add({
    method: 'post',
    path: '/contacts/bulk/:jobId/cancel',
    summary: 'Cancel a bulk contact job',
    description:
      'Marks the job CANCELLED and cancels its workflow, as one unit: if Temporal is unreachable the answer is 503 and the job is unchanged ' +
      '(retry). A bulk job is applied in one transaction: cancelled before it commits, no contact ' +
      'changes. 409 `JOB_ENDED` when the job already ended.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Records the cancel and tells Temporal as one unit (recordThenTell)',
    params: JobIdParams,
    responses: { 200: { description: 'The cancelled job', schema: BulkJobResponse }, ...errorResponses(401, 404, 409, 422, 503) },
    handler: async ({ ctx, params, principal }) => ({ body: presentBulkJob(await cancelJob(ctx.state.em, deps.temporal, principal.projectId, params.jobId, 'bulk')) }),
  });
}
