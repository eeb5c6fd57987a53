import type { EntityManager } from '@mikro-orm/postgresql';
import { pgTextArray } from '../filters';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { conflict, notFound, serviceUnavailable, validationError } from '../errors';
import { logger } from '../logger';
import { decodeCursor, toPage, type CursorPage } from '../pagination';
import { uuidv7 } from '../ids';
import { sql } from '../db/sql';
import { persistThenStart, recordThenTell } from '../workflow-start';
import { automationRunIdSql } from '../../temporal/workflow-ids';
import { normalizeEmail } from '../contacts/email-address';
import { ACTIVE_EXECUTION_STATUSES, EXECUTION_SELECT, type ExecutionRow, type ExecutionStatus, type StepType } from './automation.entity';
import { automationRow, graphForStart } from './automation.service';
import type { AutomationGraph } from './graph';

/** What automations need of Temporal (TemporalGateway implements it; tests may double it). */
export interface AutomationRunControl {
  /** Starts `automation/<automationId>/<contactId>/<n>`; a run already started under that id counts as started. */
  startAutomationRun(input: AutomationRunStart): Promise<string>;
  /** Requests cancellation of a run; one that is not there (ended, never started) is fine. */
  cancelAutomationRun(input: { workflowId: string }): Promise<void>;
  /** Starts a cancel-all workflow over the automation's runs started before `before`. */
  startAutomationCancelAll(input: { projectId: string; automationId: string; requestId: string; before: string }): Promise<string>;
}

export interface AutomationRunStart {
  executionId: string;
  projectId: string;
  automationId: string;
  contactId: string;
  workflowId: string;
  graph: AutomationGraph;
  context: Record<string, unknown> | null;
}

const ACTIVE = pgTextArray(ACTIVE_EXECUTION_STATUSES);

interface ExecutionStepRow {
  seq: number;
  stepId: string;
  type: StepType;
  startedAt: Date;
  finishedAt: Date;
  outcome: Record<string, unknown>;
}

export interface ExecutionDetail extends ExecutionRow {
  steps: ExecutionStepRow[];
}

/**
 * Manual start (`POST /workflows/:id/executions`): the contact (by id or email) gets a new run on the workflow's
 * current graph, with `context`. A contact with a RUNNING or WAITING run of this workflow is refused (409
 * EXECUTION_ACTIVE); `allowReentry` governs event triggers only, so an operator can always start a contact again.
 * The row is stored first, then the run started (persistThenStart: a failed start removes the row, 503).
 */
export async function startExecution(
  em: EntityManager,
  control: AutomationRunControl,
  projectId: string,
  automationId: string,
  input: ({ contactId: string } | { email: string }) & { context?: Record<string, unknown> },
): Promise<ExecutionDetail> {
  await automationRow(em, projectId, automationId);
  const byId = 'contactId' in input;
  const contact = await sql(em).one<{ id: string }>(
    byId ? 'select id from contacts where project_id = $1 and id = $2' : 'select id from contacts where project_id = $1 and email = $2',
    [projectId, byId ? input.contactId : normalizeEmail(input.email)],
  );
  if (!contact) throw validationError([{ field: byId ? 'contactId' : 'email', message: 'No such contact in this project', code: 'not_found' }]);
  const { automation, graph } = await graphForStart(em, projectId, automationId);
  const row = await persistThenStart({
    persist: async () => {
      try {
        const r = await sql(em).one<ExecutionRow>(
          `insert into automation_executions (id, project_id, automation_id, contact_id, n, version, workflow_id, status, current_step_id, context)
           select $1::uuid, $2::uuid, $3::uuid, $4::uuid, m.n, $5::int, ${automationRunIdSql('$6::text', '$7::text', 'm.n')}, 'RUNNING', $8::uuid, $9::jsonb
           from (select coalesce(max(n), 0) + 1 as n from automation_executions where automation_id = $10 and contact_id = $11) m
           returning ${EXECUTION_SELECT}`,
          [uuidv7(), projectId, automation.id, contact.id, graph.version, automation.id, contact.id, graph.entry, JSON.stringify(input.context ?? {}), automation.id, contact.id],
        );
        return r!;
      } catch (err) {
        if (err instanceof UniqueConstraintViolationException) {
          throw conflict('EXECUTION_ACTIVE', 'The contact already has a RUNNING or WAITING execution of this workflow', 'Cancel it first (DELETE /workflows/:id/executions/:executionId), or wait until it ends.');
        }
        throw err;
      }
    },
    start: (r) => control.startAutomationRun(runStartOf(r, graph)),
    compensate: (r) => sql(em).run('delete from automation_executions where id = $1', [r.id]),
    unavailable: 'The execution could not be started (Temporal is unavailable); nothing was kept',
    log: { automationId, contactId: contact.id },
  });
  return { ...row, steps: [] };
}

export const runStartOf = (r: ExecutionRow, graph: AutomationGraph): AutomationRunStart => ({
  executionId: r.id,
  projectId: r.projectId,
  automationId: r.automationId,
  contactId: r.contactId,
  workflowId: r.workflowId,
  graph,
  context: r.context,
});

/** Rows as stored: a read never asks Temporal or writes (a run terminated in Web UI is mirrored by the email sweeper). */
export async function listExecutions(
  em: EntityManager,
  projectId: string,
  automationId: string,
  q: { limit: number; cursor?: string; status?: ExecutionStatus; contactId?: string },
): Promise<CursorPage<ExecutionRow>> {
  await automationRow(em, projectId, automationId);
  const after = decodeCursor(q.cursor) ?? null;
  const status = q.status ?? null;
  const contact = q.contactId ?? null;
  const rows = await sql(em).query<ExecutionRow>(
    `select ${EXECUTION_SELECT} from automation_executions
     where automation_id = $1 and ($2::uuid is null or id < $3::uuid) and ($4::text is null or status = $5::text) and ($6::uuid is null or contact_id = $7::uuid)
     order by id desc limit $8`,
    [automationId, after, after, status, status, contact, contact, q.limit + 1],
  );
  let total = 0;
  if (!after) {
    const count = await sql(em).one<{ n: number }>(
      'select count(*)::int as n from automation_executions where automation_id = $1 and ($2::text is null or status = $3::text) and ($4::uuid is null or contact_id = $5::uuid)',
      [automationId, status, status, contact, contact],
    );
    total = count!.n;
  }
  return toPage(rows, q.limit, total);
}

async function executionRow(em: EntityManager, projectId: string, automationId: string, executionId: string): Promise<ExecutionRow> {
  const row = await sql(em).one<ExecutionRow>(`select ${EXECUTION_SELECT} from automation_executions where id = $1 and automation_id = $2 and project_id = $3`, [
    executionId,
    automationId,
    projectId,
  ]);
  if (!row) throw notFound('Execution');
  return row;
}

export async function getExecution(em: EntityManager, projectId: string, automationId: string, executionId: string): Promise<ExecutionDetail> {
  const row = await executionRow(em, projectId, automationId, executionId);
  const steps = await sql(em).query<ExecutionStepRow>(
    'select seq, step_id as "stepId", type, started_at as "startedAt", finished_at as "finishedAt", outcome from automation_execution_steps where execution_id = $1 order by seq',
    [executionId],
  );
  return { ...row, steps };
}

/**
 * Cancels a RUNNING or WAITING execution: the row becomes CANCELLED and its run is cancelled, as one unit
 * (`recordThenTell`): if Temporal cannot be reached the execution is unchanged and the caller gets 503. The run stops
 * at once (a pending timer or wait ends; a step under way is cancelled) and records the step it finished; its own end
 * record leaves the CANCELLED row as it is. 409 EXECUTION_ENDED for one that has ended.
 */
export async function cancelExecution(em: EntityManager, control: Pick<AutomationRunControl, 'cancelAutomationRun'>, projectId: string, automationId: string, executionId: string): Promise<ExecutionDetail> {
  const cancelled = await recordThenTell(em, {
    record: (tx) =>
      tx.one<ExecutionRow>(
        `update automation_executions set status = 'CANCELLED', status_reason = 'Cancelled through the API', waiting_event = null, next_wake_at = null,
           finished_at = now(), updated_at = now()
         where id = $1 and automation_id = $2 and project_id = $3 and status = any($4::text[]) returning ${EXECUTION_SELECT}`,
        [executionId, automationId, projectId, ACTIVE],
      ),
    skipTell: (r) => r === undefined,
    tell: (r) => control.cancelAutomationRun({ workflowId: r!.workflowId }),
    unavailable: 'The execution could not be cancelled (Temporal is unavailable); it is unchanged, try again',
    log: { automationId, executionId },
  });
  if (!cancelled) {
    const row = await executionRow(em, projectId, automationId, executionId); // 404 when there is none
    throw conflict('EXECUTION_ENDED', `The execution has already ended (${row.status})`);
  }
  return getExecution(em, projectId, automationId, executionId);
}

/**
 * Cancel-all: one workflow (`automation-cancel-all/<id>/<requestId>`) walks the active executions started before
 * now and requests cancellation of each, so any number is handled without holding the request. Answers with what
 * it will cancel.
 */
export async function cancelAllExecutions(em: EntityManager, control: AutomationRunControl, projectId: string, automationId: string): Promise<{ jobId: string; workflowId: string; active: number }> {
  const a = await automationRow(em, projectId, automationId);
  // `now` as text: Postgres' microseconds, so a run started in the same millisecond before the request is included.
  const count = await sql(em).one<{ n: number; now: string }>(
    'select count(*)::int as n, now()::text as now from automation_executions where automation_id = $1 and status = any($2::text[])',
    [a.id, ACTIVE],
  );
  const requestId = uuidv7();
  // Nothing is stored before this start, so an unreachable Temporal leaves nothing behind: 503, retry.
  const workflowId = await control.startAutomationCancelAll({ projectId, automationId: a.id, requestId, before: count!.now }).catch((err: unknown) => {
    logger.error({ err, automationId }, 'could not start a cancel-all');
    throw serviceUnavailable('The executions could not be cancelled (Temporal is unavailable); nothing was done, try again');
  });
  return { jobId: requestId, workflowId, active: count!.n };
}

const CANCEL_PAGE = 200;

/**
 * One page of cancel-all: the next CANCEL_PAGE active executions after `cursor` started before `before`, each asked to
 * cancel (in parallel). Returns the cursor to go on from, null when none are left.
 */
export async function cancelExecutionsPage(
  em: EntityManager,
  control: Pick<AutomationRunControl, 'cancelAutomationRun'>,
  input: { automationId: string; before: string; cursor: string | null; heartbeat?: (cursor: string) => void },
): Promise<{ cancelled: number; cursor: string | null }> {
  const rows = await sql(em).query<{ id: string; workflowId: string }>(
    `select id, workflow_id as "workflowId" from automation_executions
     where automation_id = $1 and status = any($2::text[]) and started_at <= $3 and ($4::uuid is null or id > $5::uuid)
     order by id limit $6`,
    [input.automationId, ACTIVE, input.before, input.cursor, input.cursor, CANCEL_PAGE],
  );
  const parallel = 20;
  for (let i = 0; i < rows.length; i += parallel) {
    await Promise.all(rows.slice(i, i + parallel).map((r) => control.cancelAutomationRun({ workflowId: r.workflowId })));
    input.heartbeat?.(rows[Math.min(i + parallel, rows.length) - 1]!.id);
  }
  return { cancelled: rows.length, cursor: rows.length < CANCEL_PAGE ? null : rows[rows.length - 1]!.id };
}
