import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ActivityDeps } from './deps';
import { completeImport, importChunks, startImport } from '../../domain/contacts/contact-import';
import { CsvRejected } from '../../domain/contacts/contact-import-csv';
import { runBulkJob } from '../../domain/contacts/contact-bulk';
import { finishJob } from '../../domain/jobs/job.service';

/** How long one importContactChunks run goes before it returns to the workflow (bounds a retry's lost work). */
const IMPORT_SLICE_MS = 60_000;

export function createContactJobActivities(deps: ActivityDeps) {
  return {
    /** QUEUED -> RUNNING; `running` is false when the job ended meanwhile (e.g. cancelled before it started). */
    async startContactImport(input: { jobId: string }): Promise<{ running: boolean }> {
      return startImport(deps.orm.em.fork(), input.jobId);
    },

    /**
     * Reads the file (a file that is not usable CSV fails the job, not retried), then imports the chunks not committed
     * yet for up to a minute; `done` once every chunk is committed and the job COMPLETED. Each chunk is committed with
     * its counters, so a retry after a crash continues with the chunks that are missing.
     */
    async importContactChunks(input: { jobId: string }): Promise<{ done: boolean }> {
      const ctx = Context.current();
      try {
        return await importChunks(deps.orm.em.fork(), {
          jobId: input.jobId,
          deadline: Date.now() + IMPORT_SLICE_MS,
          billing: deps.config.billing,
          shouldStop: () => ctx.cancellationSignal.aborted,
          onChunk: (chunk) => ctx.heartbeat({ chunk }),
        });
      } catch (err) {
        if (!(err instanceof CsvRejected)) throw err;
        await finishJob(deps.orm.em.fork(), input.jobId, 'FAILED', err.message);
        throw ApplicationFailure.create({ nonRetryable: true, type: 'CsvRejected', message: err.message });
      }
    },

    async completeContactImport(input: { jobId: string }): Promise<void> {
      await completeImport(deps.orm.em.fork(), input.jobId);
    },

    /** Subscribe, unsubscribe or delete the job's contacts (one transaction; applied once). */
    async runContactBulkJob(input: { jobId: string }): Promise<void> {
      await runBulkJob(deps.orm.em.fork(), input.jobId);
    },

    /** Ends a job that did not complete (FAILED with a message, or CANCELLED); a finished job keeps its state. */
    async endContactJob(input: { jobId: string; status: 'FAILED' | 'CANCELLED'; message?: string }): Promise<void> {
      await finishJob(deps.orm.em.fork(), input.jobId, input.status, input.message);
    },
  };
}

export type ContactJobActivities = ReturnType<typeof createContactJobActivities>;
