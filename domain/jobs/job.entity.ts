import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * Import and bulk jobs (migration 20261122000000). job.service.ts works in SQL; these definitions keep the schema
 * snapshot complete.
 */
export const Job = defineEntity({
  name: 'Job',
  tableName: 'jobs',
  indexes: [{ properties: ['project', 'id'] }],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    type: p.enum(['IMPORT', 'BULK_SUBSCRIBE', 'BULK_UNSUBSCRIBE', 'BULK_DELETE'] as const),
    status: p.enum(['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'] as const).default('QUEUED'),
    options: p.json<Record<string, unknown>>().default('{}'),
    contactIds: p.type('uuid[]').columnType('uuid[]').nullable(),
    total: p.integer().default(0),
    processed: p.integer().default(0),
    created: p.integer().default(0),
    updated: p.integer().default(0),
    changed: p.integer().default(0),
    skipped: p.integer().default(0),
    failed: p.integer().default(0),
    errors: p.json<unknown[]>().default('[]'),
    message: p.text().nullable(),
    nextOffset: p.integer().default(0),
    nextLine: p.integer().default(1),
    nextChunk: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()'),
    startedAt: p.datetime().nullable(),
    finishedAt: p.datetime().nullable(),
  },
});

export const ContactImportFile = defineEntity({
  name: 'ContactImportFile',
  tableName: 'contact_import_files',
  checks: [{ name: 'contact_import_files_size', expression: 'octet_length(content) <= 5242880' }],
  properties: {
    job: () => p.manyToOne(Job).primary().deleteRule('cascade').updateRule('no action'),
    fileName: p.text().nullable(),
    content: p.blob(),
  },
});

export const JobChunk = defineEntity({
  name: 'JobChunk',
  tableName: 'job_chunks',
  properties: {
    job: () => p.manyToOne(Job).primary().deleteRule('cascade').updateRule('no action'),
    chunk: p.integer().primary(),
    rows: p.integer().default(0),
    doneAt: p.datetime().defaultRaw('now()'),
  },
});
