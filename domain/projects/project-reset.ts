import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError, conflict, validationError } from '../errors';
import { uuidv7 } from '../ids';
import { logger } from '../logger';
import { persistThenStart } from '../workflow-start';
import { cancelCampaign, type CampaignSendControl } from '../campaigns/campaign-steering';
import type { AutomationRunControl } from '../automations/execution.service';
import { deleteProjectUploads } from '../uploads/upload.service';
import type { UploadStorage } from '../uploads/upload-storage';
import { RESET_CHUNK, type ResetKind } from './reset-kinds';
import { sql, transaction, type Sql } from '../db/sql';

/**
 * A project reset (`POST /users/@me/projects/:id/reset`): the project keeps its keys, members, domains and settings
 * and loses its data. The workflow `project-reset/<projectId>` first stops what runs (automations disabled, active
 * campaigns cancelled, automation runs cancelled), then deletes contacts, events, emails, campaigns, workflows,
 * segments, templates, uploads and the analytics rollups, a chunk per activity, and records how many rows of each it
 * deleted on the `project_resets` row that `GET .../resets` shows.
 */


export interface ProjectResetRow {
  id: string;
  projectId: string;
  status: 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';
  workflowId: string;
  requestedBy: string | null;
  deleted: Partial<Record<ResetKind, number>>;
  error: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

const COLUMNS = `id, project_id as "projectId", status, workflow_id as "workflowId", requested_by as "requestedBy", deleted, error,
                 created_at as "createdAt", finished_at as "finishedAt"`;

const projectResetWorkflowId = (projectId: string) => `project-reset/${projectId}`;

export interface ProjectResetStarter {
  startProjectReset(input: { projectId: string; resetId: string }): Promise<string>;
}

/**
 * Starts a reset: the caller's `confirm` must be the project's name (422 `confirmation_mismatch` otherwise); one reset
 * at a time (409 `RESET_RUNNING`).
 */
export async function requestProjectReset(
  em: EntityManager,
  starter: ProjectResetStarter,
  input: { projectId: string; projectName: string; userId: string; confirm: string },
): Promise<ProjectResetRow> {
  if (input.confirm !== input.projectName) {
    throw validationError([{ field: 'body.confirm', message: "confirm must be the project's name, exactly", code: 'confirmation_mismatch' }]);
  }
  const id = uuidv7();
  const workflowId = projectResetWorkflowId(input.projectId);
  return persistThenStart({
    persist: async () => {
      const row = await sql(em).one<ProjectResetRow>(
        `insert into project_resets (id, project_id, status, workflow_id, requested_by) values ($1, $2, 'RUNNING', $3, $4)
         on conflict (project_id) where status = 'RUNNING' do nothing returning ${COLUMNS}`,
        [id, input.projectId, workflowId, input.userId],
      );
      if (!row) throw conflict('RESET_RUNNING', 'A reset of this project is running', 'Watch it with GET /users/@me/projects/:id/resets.');
      return row;
    },
    start: () => starter.startProjectReset({ projectId: input.projectId, resetId: id }),
    compensate: () => sql(em).run(`delete from project_resets where id = $1`, [id]),
    unavailable: 'The reset could not be started; nothing was deleted',
    log: { projectId: input.projectId, resetId: id },
  });
}

/** The project's last 20 resets, newest first. */
export async function listProjectResets(em: EntityManager, projectId: string): Promise<ProjectResetRow[]> {
  return sql(em).query<ProjectResetRow>(`select ${COLUMNS} from project_resets where project_id = $1 order by id desc limit 20`, [projectId]);
}

/**
 * Stops what runs in the project: disables its automations (no new runs), cancels its active campaigns (each as
 * `POST /campaigns/:id/cancel` would) and asks every active automation run to cancel. Safe to repeat.
 */
export async function stopProjectActivity(
  em: EntityManager,
  control: Pick<CampaignSendControl, 'cancelCampaignSend'> & Pick<AutomationRunControl, 'cancelAutomationRun'>,
  projectId: string,
  heartbeat: () => void,
): Promise<{ campaigns: number; runs: number }> {
  await sql(em).run(`update automations set enabled = false, updated_at = now() where project_id = $1 and enabled`, [projectId]);
  const campaigns = await sql(em).query<{ id: string }>(`select id from campaigns where project_id = $1 and status in ('SCHEDULED', 'SENDING', 'PAUSED')`, [projectId]);
  for (const c of campaigns) {
    await cancelCampaign(em, control, projectId, c.id).catch((err: unknown) => {
      // Ended meanwhile (SENT, FAILED): nothing to stop.
      if (!(err instanceof AppError && err.statusCode === 409)) throw err;
    });
    heartbeat();
  }
  let runs = 0;
  for (;;) {
    const page = await sql(em).query<{ id: string; workflowId: string }>(
      `select id, workflow_id as "workflowId" from automation_executions where project_id = $1 and status in ('RUNNING', 'WAITING') order by id limit 200`,
      [projectId],
    );
    for (let i = 0; i < page.length; i += 20) {
      await Promise.all(page.slice(i, i + 20).map((r) => control.cancelAutomationRun({ workflowId: r.workflowId })));
      heartbeat();
    }
    // The runs record their cancellation themselves; rows not yet updated are marked here so the loop ends.
    if (page.length) {
      await sql(em).run(
        `update automation_executions set status = 'CANCELLED', status_reason = 'The project was reset', finished_at = coalesce(finished_at, now()), updated_at = now()
         where id = any($1::uuid[]) and status in ('RUNNING', 'WAITING')`,
        [`{${page.map((r) => r.id).join(',')}}`],
      );
    }
    runs += page.length;
    if (page.length < 200) break;
  }
  return { campaigns: campaigns.length, runs };
}

/** One delete per kind: at most RESET_CHUNK rows of the project (uploads: all, with their stored bytes). */
const CHUNK_SQL: Record<Exclude<ResetKind, 'uploads' | 'rollups'>, string> = {
  events: `delete from events where id in (select id from events where project_id = $1 limit $2)`,
  emails: `delete from emails where id in (select id from emails where project_id = $1 limit $2)`,
  contacts: `delete from contacts where id in (select id from contacts where project_id = $1 limit $2)`,
  campaigns: `delete from campaigns where id in (select id from campaigns where project_id = $1 limit $2)`,
  automations: `delete from automations where id in (select id from automations where project_id = $1 limit $2)`,
  segments: `delete from segments where id in (select id from segments where project_id = $1 limit $2)`,
  templates: `delete from templates where id in (select id from templates where project_id = $1 limit $2)`,
};

/**
 * Deletes the next chunk of one kind and adds the count to the reset's row, in one transaction. Returns how many rows
 * went (fewer than RESET_CHUNK: the kind is done).
 */
export async function deleteResetChunk(em: EntityManager, storage: UploadStorage, input: { resetId: string; projectId: string; kind: ResetKind }): Promise<number> {
  let n: number;
  if (input.kind === 'uploads') {
    n = await deleteProjectUploads(em, storage, input.projectId);
  } else if (input.kind === 'rollups') {
    n = 0;
    for (const table of ['event_tallies', 'analytics_hourly', 'event_name_hourly', 'contact_last_event_hourly']) {
      const r = await sql(em).one<{ n: string }>(`with gone as (delete from ${table} where project_id = $1 returning 1) select count(*) as n from gone`, [input.projectId]);
      n += Number(r!.n);
    }
  } else {
    const kind = input.kind;
    return transaction(em, async (trx) => {
      const deleted = await trx.run(CHUNK_SQL[kind], [input.projectId, RESET_CHUNK]);
      await addDeleted(trx, input.resetId, kind, deleted);
      return deleted;
    });
  }
  await addDeleted(sql(em), input.resetId, input.kind, n);
  return n;
}

/** Adds `n` to the reset's count of `kind`. */
async function addDeleted(db: Sql, resetId: string, kind: ResetKind, n: number): Promise<void> {
  await db.run(`update project_resets set deleted = jsonb_set(deleted, array[$2::text], to_jsonb(coalesce((deleted ->> $2)::bigint, 0) + $3)) where id = $1`, [resetId, kind, n]);
}

/** Records how the reset ended. */
export async function endProjectReset(em: EntityManager, input: { resetId: string; status: 'COMPLETED' | 'FAILED' | 'CANCELLED'; error?: string }): Promise<void> {
  await sql(em).run(`update project_resets set status = $1, error = $2, finished_at = now() where id = $3 and status = 'RUNNING'`, [input.status, input.error ?? null, input.resetId]);
  logger.info({ resetId: input.resetId, status: input.status }, 'project reset ended');
}
