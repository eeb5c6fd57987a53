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
      const [row] = await em.execute<ProjectResetRow[]>(
        `insert into project_resets (id, project_id, status, workflow_id, requested_by) values (?, ?, 'RUNNING', ?, ?)
         on conflict (project_id) where status = 'RUNNING' do nothing returning ${COLUMNS}`,
        [id, input.projectId, workflowId, input.userId],
      );
      if (!row) throw conflict('RESET_RUNNING', 'A reset of this project is running', 'Watch it with GET /users/@me/projects/:id/resets.');
      return row;
    },
    start: () => starter.startProjectReset({ projectId: input.projectId, resetId: id }),
    compensate: () => em.execute(`delete from project_resets where id = ?`, [id]),
    unavailable: 'The reset could not be started; nothing was deleted',
    log: { projectId: input.projectId, resetId: id },
  });
}

/** The project's last 20 resets, newest first. */
export async function listProjectResets(em: EntityManager, projectId: string): Promise<ProjectResetRow[]> {
  return em.execute<ProjectResetRow[]>(`select ${COLUMNS} from project_resets where project_id = ? order by id desc limit 20`, [projectId]);
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
  await em.execute(`update automations set enabled = false, updated_at = now() where project_id = ? and enabled`, [projectId]);
  const campaigns = await em.execute<{ id: string }[]>(`select id from campaigns where project_id = ? and status in ('SCHEDULED', 'SENDING', 'PAUSED')`, [projectId]);
  for (const c of campaigns) {
    await cancelCampaign(em, control, projectId, c.id).catch((err: unknown) => {
      // Ended meanwhile (SENT, FAILED): nothing to stop.
      if (!(err instanceof AppError && err.statusCode === 409)) throw err;
    });
    heartbeat();
  }
  let runs = 0;
  for (;;) {
    const page = await em.execute<{ id: string; workflowId: string }[]>(
      `select id, workflow_id as "workflowId" from automation_executions where project_id = ? and status in ('RUNNING', 'WAITING') order by id limit 200`,
      [projectId],
    );
    for (let i = 0; i < page.length; i += 20) {
      await Promise.all(page.slice(i, i + 20).map((r) => control.cancelAutomationRun({ workflowId: r.workflowId })));
      heartbeat();
    }
    // The runs record their cancellation themselves; rows not yet updated are marked here so the loop ends.
    if (page.length) {
      await em.execute(
        `update automation_executions set status = 'CANCELLED', status_reason = 'The project was reset', finished_at = coalesce(finished_at, now()), updated_at = now()
         where id = any(?::uuid[]) and status in ('RUNNING', 'WAITING')`,
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
    for (const table of ['analytics_hourly', 'event_name_hourly', 'contact_last_event_hourly']) {
      const [r] = await em.execute<{ n: string }[]>(`with gone as (delete from ${table} where project_id = ? returning 1) select count(*) as n from gone`, [input.projectId]);
      n += Number(r!.n);
    }
  } else {
    const conn = em.getConnection().getKnex().client;
    const pg = await conn.acquireConnection();
    try {
      await pg.query('begin');
      const res = await pg.query(CHUNK_SQL[input.kind], [input.projectId, RESET_CHUNK]);
      n = res.rowCount ?? 0;
      await pg.query(
        `update project_resets set deleted = jsonb_set(deleted, array[$2::text], to_jsonb(coalesce((deleted ->> $2)::bigint, 0) + $3)) where id = $1`,
        [input.resetId, input.kind, n],
      );
      await pg.query('commit');
    } catch (err) {
      await pg.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      await conn.releaseConnection(pg);
    }
    return n;
  }
  await em.execute(`update project_resets set deleted = jsonb_set(deleted, array[?::text], to_jsonb(coalesce((deleted ->> ?)::bigint, 0) + ?)) where id = ?`, [
    input.kind,
    input.kind,
    n,
    input.resetId,
  ]);
  return n;
}

/** Records how the reset ended. */
export async function endProjectReset(em: EntityManager, input: { resetId: string; status: 'COMPLETED' | 'FAILED' | 'CANCELLED'; error?: string }): Promise<void> {
  await em.execute(`update project_resets set status = ?, error = ?, finished_at = now() where id = ? and status = 'RUNNING'`, [input.status, input.error ?? null, input.resetId]);
  logger.info({ resetId: input.resetId, status: input.status }, 'project reset ended');
}
