import { Migration } from '@mikro-orm/migrations';

/**
 * A segment's compute runs as a Temporal workflow (`segment-compute/<segmentId>`), so its state has to be readable
 * while it runs: the last compute of each segment is kept on the segment's row (one per segment, so nothing to prune):
 * the Temporal run that did it, RUNNING / COMPLETED / FAILED, when it started and ended, and its result
 * `{ entered, exited, memberCount }` or error. The scheduled recompute reads `computed_at` and
 * `compute_started_at` to tell which tracked segments are due. Written by hand.
 */
export class Migration20261125100000 extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "segments" add column "compute_run_id" varchar(64) null,
      add column "compute_status" text check ("compute_status" in ('RUNNING', 'COMPLETED', 'FAILED')) null,
      add column "compute_started_at" timestamptz null, add column "compute_finished_at" timestamptz null,
      add column "compute_result" jsonb null, add column "compute_error" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "segments" drop column if exists "compute_run_id", drop column if exists "compute_status",
      drop column if exists "compute_started_at", drop column if exists "compute_finished_at",
      drop column if exists "compute_result", drop column if exists "compute_error";`);
  }
}
