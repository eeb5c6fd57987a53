import { z } from 'zod';
import type { File as UploadedFile } from 'formidable';
import { inputProblems } from '../validation';

const isUpload = (v: unknown): v is UploadedFile => typeof v === 'object' && v !== null && 'filepath' in v && 'size' in v;

const Mapping = z
  .string()
  .transform((s, ctx) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'mapping must be a JSON object', params: { code: 'invalid_json' } });
      return z.NEVER;
    }
    const r = z.record(z.string().max(200), z.string().max(205)).safeParse(parsed);
    // The field itself passed the input check as text; the JSON inside it may still spell NUL as an escape.
    if (!r.success || Object.keys(r.data).length > 200 || inputProblems(r.data).length) {
      ctx.addIssue({ code: 'custom', message: 'mapping must be a JSON object of "<csv column>": "email" | "subscribed" | "data.<key>" | "ignore"', params: { code: 'invalid_mapping' } });
      return z.NEVER;
    }
    return r.data;
  })
  .meta({ description: 'JSON object: `{ "<csv column>": "email" | "subscribed" | "data.<key>" | "ignore" }`.', example: '{"E-Mail":"email","Plan":"data.plan"}' });

export const ImportBody = z
  .object({
    file: z
      .custom<UploadedFile>(isUpload, { error: 'A CSV file in the multipart field `file` is required' })
      .meta({ type: 'string', format: 'binary', description: 'The CSV file, UTF-8, at most 5 MB.' }),
    mapping: Mapping.optional(),
    subscribed: z
      .enum(['true', 'false'], { error: 'subscribed must be true or false' })
      .transform((v) => v === 'true')
      .optional()
      .meta({ description: 'Subscription of new contacts whose row has no subscribed value (default true).' }),
  })
  .meta({ id: 'ContactImportRequest' });

export const JobIdParams = z.object({ jobId: z.uuid({ error: 'Must be a job id (UUID)' }) });

export const ContactIdsBody = z
  .object({ contactIds: z.array(z.uuid({ error: 'Must be a contact id (UUID)' })).min(1, 'At least one contact id').max(1000, 'At most 1000 contact ids per call') })
  .meta({ id: 'ContactBulkRequest' });

export const JobQueuedResponse = z.object({ jobId: z.string() }).meta({ id: 'JobQueued' });

const JobStatus = z.enum(['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED']);

export const ImportJobResponse = z
  .object({
    jobId: z.string(),
    status: JobStatus,
    total: z.number().int().meta({ description: 'Data rows in the file (known once the job is RUNNING).' }),
    processed: z.number().int(),
    created: z.number().int(),
    updated: z.number().int(),
    skipped: z.number().int().meta({ description: 'Rows superseded by a later row with the same email.' }),
    failed: z.number().int().meta({ description: 'Rows with an error (all counted; the first 100 are listed).' }),
    errors: z.array(z.object({ line: z.number().int(), email: z.string().optional(), message: z.string() })),
    message: z.string().nullable().meta({ description: 'Why a FAILED or CANCELLED job ended.' }),
    createdAt: z.iso.datetime(),
    startedAt: z.iso.datetime().nullable(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ContactImportJob' });

export const BulkJobResponse = z
  .object({
    jobId: z.string(),
    type: z.enum(['BULK_SUBSCRIBE', 'BULK_UNSUBSCRIBE', 'BULK_DELETE']),
    status: JobStatus,
    total: z.number().int(),
    processed: z.number().int(),
    changed: z.number().int(),
    skipped: z.number().int().meta({ description: 'Unknown ids, other projects\' ids, contacts already in the asked state.' }),
    failed: z.number().int(),
    message: z.string().nullable(),
    createdAt: z.iso.datetime(),
    finishedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'ContactBulkJob' });
