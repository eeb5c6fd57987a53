import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { pgTextArray } from '../filters';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { AppError, conflict, notFound, validationError, type FieldError } from '../errors';
import { decodeCursor, toPage, type CursorPage } from '../pagination';
import { uuidv7 } from '../ids';
import { sql } from '../db/sql';
import { assertSenderDomain } from '../domains/domain.service';
import { emailDomain } from '../contacts/email-address';
import { ACTIVE_EXECUTION_STATUSES, AUTOMATION_SELECT, type AutomationRow, type Branch, type StepType } from './automation.entity';
import { exitLabels, freezeGraph, validateGraphShape, type AutomationGraph, type DraftGraph, type GraphProblem, type GraphStep } from './graph';

/**
 * Automations (the API's workflows) and their graphs. Every write that touches the graph runs in one transaction
 * that locks the automation row, bumps `graph_version`, and, while the automation is enabled, freezes the new graph
 * as a version if it is valid (runs start on the newest frozen version; an edit that leaves the graph invalid keeps
 * the last valid one running and is listed in `problems`). Runs already under way carry their own version and are
 * never affected.
 */

export interface AutomationInput {
  name?: string;
  description?: string | null;
  triggerType?: 'EVENT';
  triggerEvent?: string | null;
  triggerFilter?: Record<string, unknown> | null;
  allowReentry?: boolean;
  enabled?: boolean;
  entryStepId?: string | null;
}

export interface StepRow {
  id: string;
  automationId: string;
  type: StepType;
  name: string | null;
  config: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
}

export interface TransitionRow {
  id: string;
  automationId: string;
  fromStepId: string;
  toStepId: string;
  branch: Branch | null;
  createdAt: Date;
}

export interface AutomationDetail extends AutomationRow {
  steps: StepRow[];
  transitions: TransitionRow[];
  /** What keeps the current graph from being enabled (empty: it can run). */
  problems: GraphProblem[];
}

const STEP_SELECT = 'id, automation_id as "automationId", type, name, config, created_at as "createdAt", updated_at as "updatedAt"';
const TRANSITION_SELECT = 'id, automation_id as "automationId", from_step_id as "fromStepId", to_step_id as "toStepId", branch, created_at as "createdAt"';

export async function automationRow(em: EntityManager, projectId: string, id: string, lock = false): Promise<AutomationRow> {
  const row = await sql(em).one<AutomationRow>(`select ${AUTOMATION_SELECT} from automations where id = $1 and project_id = $2${lock ? ' for update' : ''}`, [id, projectId]);
  if (!row) throw notFound('Workflow');
  return row;
}

async function draftOf(em: EntityManager, automationId: string): Promise<{ steps: StepRow[]; transitions: TransitionRow[] }> {
  const steps = await sql(em).query<StepRow>(`select ${STEP_SELECT} from automation_steps where automation_id = $1 order by created_at, id`, [automationId]);
  const transitions = await sql(em).query<TransitionRow>(`select ${TRANSITION_SELECT} from automation_transitions where automation_id = $1 order by created_at, id`, [automationId]);
  return { steps, transitions };
}

const asDraft = (a: AutomationRow, d: { steps: StepRow[]; transitions: TransitionRow[] }): DraftGraph => ({
  entry: a.entryStepId,
  steps: d.steps.map((s) => ({ id: s.id, type: s.type, name: s.name, config: s.config }) as GraphStep),
  transitions: d.transitions.map((t) => ({ id: t.id, from: t.fromStepId, to: t.toStepId, branch: t.branch })),
});

/**
 * Everything that keeps a graph from running: its shape (graph.ts), a trigger without an event, and each SEND_EMAIL
 * step whose template is not the project's or whose sender is not on a verified domain.
 */
async function graphProblems(em: EntityManager, a: AutomationRow, draft: DraftGraph): Promise<GraphProblem[]> {
  const problems = validateGraphShape(draft);
  if (!a.triggerEvent) problems.push({ field: 'triggerEvent', message: 'The trigger has no event name (set triggerEvent)', code: 'no_trigger' });
  const sends = draft.steps.filter((s): s is Extract<GraphStep, { type: 'SEND_EMAIL' }> => s.type === 'SEND_EMAIL');
  if (sends.length === 0) return problems;
  const templates = await sql(em).query<{ id: string; fromEmail: string | null }>(
    'select id, from_email as "fromEmail" from templates where project_id = $1 and id = any($2::uuid[])',
    [a.projectId, `{${[...new Set(sends.map((s) => s.config.templateId))].join(',')}}`],
  );
  const byId = new Map(templates.map((t) => [t.id, t]));
  const checked = new Map<string, string | null>(); // sender domain -> problem
  for (const s of sends) {
    const t = byId.get(s.config.templateId);
    if (!t) {
      problems.push({ field: `steps.${s.id}.config.templateId`, message: `Step ${s.id}: template ${s.config.templateId} does not exist in this project`, code: 'not_found' });
      continue;
    }
    const from = s.config.from ?? t.fromEmail;
    if (!from) {
      problems.push({ field: `steps.${s.id}.config.from`, message: `Step ${s.id}: neither the step nor its template has a sender (from)`, code: 'required' });
      continue;
    }
    const domain = emailDomain(from);
    if (!checked.has(domain)) {
      try {
        await assertSenderDomain(em, a.projectId, from);
        checked.set(domain, null);
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        checked.set(domain, err.message);
      }
    }
    const problem = checked.get(domain);
    if (problem) problems.push({ field: `steps.${s.id}.config.from`, message: `Step ${s.id}: ${problem}`, code: 'domain_not_verified' });
  }
  return problems;
}

function problemsError(problems: GraphProblem[], what: string) {
  return validationError(problems.map((p) => ({ field: p.field, message: p.message, code: p.code })), `The workflow cannot ${what}: its graph has ${problems.length} problem${problems.length === 1 ? '' : 's'}`);
}

/**
 * Freezes the current graph as version `graph_version` (once; a version already frozen is kept) and makes it the one
 * runs start on. Call inside the automation's lock. Returns the problems instead when the graph cannot run.
 */
async function publish(em: EntityManager, a: AutomationRow): Promise<{ graph: AutomationGraph } | { problems: GraphProblem[] }> {
  const draft = asDraft(a, await draftOf(em, a.id));
  const problems = await graphProblems(em, a, draft);
  if (problems.length) return { problems };
  const graph = freezeGraph(draft, a.graphVersion);
  await sql(em).run(
    `insert into automation_versions (automation_id, version, graph) values ($1, $2, $3::jsonb) on conflict (automation_id, version) do nothing`,
    [a.id, a.graphVersion, JSON.stringify(graph)],
  );
  await sql(em).run('update automations set published_version = $1 where id = $2', [a.graphVersion, a.id]);
  a.publishedVersion = a.graphVersion;
  return { graph };
}

/**
 * The graph a new run starts on: the published version when it is the current graph; otherwise the current graph,
 * frozen now if it is valid (a manual start of a disabled workflow), else 422 with its problems.
 */
export async function graphForStart(em: EntityManager, projectId: string, id: string): Promise<{ automation: AutomationRow; graph: AutomationGraph }> {
  return em.transactional(async (tx) => {
    const a = await automationRow(tx, projectId, id, true);
    if (a.publishedVersion !== null && (a.enabled || a.publishedVersion === a.graphVersion)) {
      return { automation: a, graph: await loadVersion(tx, a.id, a.publishedVersion) };
    }
    const published = await publish(tx, a);
    if ('problems' in published) throw problemsError(published.problems, 'start');
    return { automation: a, graph: published.graph };
  });
}

async function loadVersion(em: EntityManager, automationId: string, version: number): Promise<AutomationGraph> {
  const row = await sql(em).one<{ graph: AutomationGraph }>('select graph from automation_versions where automation_id = $1 and version = $2', [automationId, version]);
  if (!row) throw new Error(`automation ${automationId} has no version ${version}`);
  return row.graph;
}

/** A graph edit: runs `change` under the automation's lock, then bumps the version and republishes an enabled one. */
async function editGraph<T>(em: EntityManager, projectId: string, id: string, change: (tx: EntityManager, a: AutomationRow) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    const a = await automationRow(tx, projectId, id, true);
    const result = await change(tx, a);
    await sql(tx).run('update automations set graph_version = graph_version + 1, updated_at = now() where id = $1', [a.id]);
    a.graphVersion += 1;
    if (a.enabled) await publish(tx, a);
    return result;
  });
}

export async function getAutomation(em: EntityManager, projectId: string, id: string): Promise<AutomationDetail> {
  const a = await automationRow(em, projectId, id);
  const d = await draftOf(em, a.id);
  return { ...a, ...d, problems: await graphProblems(em, a, asDraft(a, d)) };
}

export async function listAutomations(em: EntityManager, projectId: string, q: { limit: number; cursor?: string; enabled?: boolean }): Promise<CursorPage<AutomationRow>> {
  const after = decodeCursor(q.cursor) ?? null;
  const enabled = q.enabled ?? null;
  const rows = await sql(em).query<AutomationRow>(
    `select ${AUTOMATION_SELECT} from automations where project_id = $1 and ($2::uuid is null or id < $3::uuid) and ($4::boolean is null or enabled = $5::boolean)
     order by id desc limit $6`,
    [projectId, after, after, enabled, enabled, q.limit + 1],
  );
  let total = 0;
  if (!after) {
    const count = await sql(em).one<{ n: number }>('select count(*)::int as n from automations where project_id = $1 and ($2::boolean is null or enabled = $3::boolean)', [projectId, enabled, enabled]);
    total = count!.n;
  }
  return toPage(rows, q.limit, total);
}

export async function createAutomation(em: EntityManager, projectId: string, input: AutomationInput & { name: string }): Promise<AutomationDetail> {
  const id = uuidv7();
  await sql(em).run(
    `insert into automations (id, project_id, name, description, trigger_type, trigger_event, trigger_filter, enabled, allow_reentry, webhook_secret)
     values ($1, $2, $3, $4, 'EVENT', $5, $6::jsonb, false, $7, $8)`,
    [id, projectId, input.name, input.description ?? null, input.triggerEvent ?? null, input.triggerFilter ? JSON.stringify(input.triggerFilter) : null, input.allowReentry ?? false, newWebhookSecret()],
  );
  return getAutomation(em, projectId, id);
}

const newWebhookSecret = () => `whsec_${randomBytes(24).toString('base64url')}`;

/**
 * PATCH: metadata, trigger, `allowReentry`, `entryStepId`, `enabled`. Enabling checks the graph (422 naming every
 * problem) and freezes it; disabling stops new runs only (runs under way finish on their version).
 */
export async function updateAutomation(em: EntityManager, projectId: string, id: string, input: AutomationInput): Promise<AutomationDetail> {
  await em.transactional(async (tx) => {
    const a = await automationRow(tx, projectId, id, true);
    const set: string[] = [];
    const values: unknown[] = [];
    const assign = (column: string, value: unknown, cast = '') => {
      values.push(value);
      set.push(`${column} = $${values.length}${cast}`);
    };
    if (input.name !== undefined) assign('name', input.name);
    if (input.description !== undefined) assign('description', input.description);
    if (input.triggerEvent !== undefined) {
      assign('trigger_event', input.triggerEvent);
      a.triggerEvent = input.triggerEvent;
    }
    if (input.triggerFilter !== undefined) assign('trigger_filter', input.triggerFilter === null ? null : JSON.stringify(input.triggerFilter), '::jsonb');
    if (input.allowReentry !== undefined) assign('allow_reentry', input.allowReentry);
    const graphChanged = input.entryStepId !== undefined && input.entryStepId !== a.entryStepId;
    if (input.entryStepId !== undefined) {
      if (input.entryStepId !== null) {
        const step = await sql(tx).one('select 1 from automation_steps where id = $1 and automation_id = $2', [input.entryStepId, a.id]);
        if (!step) throw validationError([{ field: 'entryStepId', message: 'entryStepId must be a step of this workflow', code: 'not_found' }]);
      }
      assign('entry_step_id', input.entryStepId);
      a.entryStepId = input.entryStepId;
    }
    if (graphChanged) {
      set.push('graph_version = graph_version + 1');
      a.graphVersion += 1;
    }
    const enabled = input.enabled ?? a.enabled;
    if (input.enabled !== undefined) assign('enabled', input.enabled);
    if (set.length) await sql(tx).run(`update automations set ${set.join(', ')}, updated_at = now() where id = $${values.length + 1}`, [...values, a.id]);
    if (enabled && (input.enabled === true || graphChanged || input.triggerEvent !== undefined)) {
      a.enabled = true;
      const published = await publish(tx, a);
      // Enabling (or re-pointing an enabled workflow's trigger at nothing) must leave something that can run.
      if ('problems' in published && (input.enabled === true || !a.triggerEvent)) throw problemsError(published.problems, 'be enabled');
    }
  });
  return getAutomation(em, projectId, id);
}

/** Deletes a workflow without RUNNING or WAITING executions (409 WORKFLOW_ACTIVE); its ended executions go with it. */
export async function deleteAutomation(em: EntityManager, projectId: string, id: string): Promise<void> {
  await em.transactional(async (tx) => {
    const a = await automationRow(tx, projectId, id, true);
    const active = await sql(tx).one<{ n: number }>('select count(*)::int as n from automation_executions where automation_id = $1 and status = any($2::text[])', [
      a.id,
      pgTextArray(ACTIVE_EXECUTION_STATUSES),
    ]);
    if (active!.n > 0) {
      throw conflict('WORKFLOW_ACTIVE', `The workflow has ${active!.n} active execution${active!.n === 1 ? '' : 's'}`, 'Cancel them (POST /workflows/:id/executions/cancel-all) or wait until they finish, then delete.');
    }
    await sql(tx).run('delete from automations where id = $1', [a.id]);
  });
}

export interface StepInput {
  type: StepType;
  name?: string | null;
  config: Record<string, unknown>;
}

/** Adds a step; the first step of a workflow becomes its entry step. */
export async function addStep(em: EntityManager, projectId: string, automationId: string, input: StepInput): Promise<StepRow> {
  return editGraph(em, projectId, automationId, async (tx, a) => {
    const id = uuidv7();
    const step = await sql(tx).one<StepRow>(
      `insert into automation_steps (id, automation_id, type, name, config) values ($1, $2, $3, $4, $5::jsonb) returning ${STEP_SELECT}`,
      [id, a.id, input.type, input.name ?? null, JSON.stringify(input.config)],
    );
    if (!a.entryStepId) {
      await sql(tx).run('update automations set entry_step_id = $1 where id = $2', [id, a.id]);
      a.entryStepId = id;
    }
    return step!;
  });
}

async function stepRow(em: EntityManager, automationId: string, stepId: string): Promise<StepRow> {
  const step = await sql(em).one<StepRow>(`select ${STEP_SELECT} from automation_steps where id = $1 and automation_id = $2`, [stepId, automationId]);
  if (!step) throw notFound('Step');
  return step;
}

/**
 * PATCH a step: `name` and `config`. The config replaces the stored one whole; `config` gets the step's type (read
 * under the workflow's lock) and answers the config to store, validated as that type's (it throws the 422).
 */
export async function updateStep(
  em: EntityManager,
  projectId: string,
  automationId: string,
  stepId: string,
  input: { name?: string | null; config?: (type: StepType) => Record<string, unknown> },
): Promise<StepRow> {
  return editGraph(em, projectId, automationId, async (tx, a) => {
    const current = await stepRow(tx, a.id, stepId); // 404 for a step not in this workflow, config or not
    const config = input.config?.(current.type);
    const step = await sql(tx).one<StepRow>(
      `update automation_steps set name = case when $1::boolean then $2 else name end, config = coalesce($3::jsonb, config), updated_at = now()
       where id = $4 returning ${STEP_SELECT}`,
      [input.name !== undefined, input.name ?? null, config ? JSON.stringify(config) : null, stepId],
    );
    return step!;
  });
}

/**
 * Deletes a step and its transitions. With `splice`, each transition into the step is redirected to the step's one
 * successor (a step with two branches set cannot be spliced: 422), and an entry step hands the entry to it.
 */
export async function deleteStep(em: EntityManager, projectId: string, automationId: string, stepId: string, splice: boolean): Promise<void> {
  await editGraph(em, projectId, automationId, async (tx, a) => {
    await stepRow(tx, a.id, stepId);
    const out = await sql(tx).query<{ toStepId: string }>('select to_step_id as "toStepId" from automation_transitions where from_step_id = $1 and to_step_id <> from_step_id', [stepId]);
    const successor = splice && out.length === 1 ? out[0]!.toStepId : null;
    if (splice && out.length > 1) {
      throw validationError([{ field: 'splice', message: 'The step has two outgoing branches; splice cannot tell which one to reconnect to. Delete a branch first, or delete without splice.', code: 'ambiguous_splice' }]);
    }
    if (successor) {
      // Edges into the step now lead to its successor; one that would duplicate an exit already taken is dropped.
      await sql(tx).run(
        `update automation_transitions t set to_step_id = $1 where t.to_step_id = $2 and t.from_step_id <> $3`,
        [successor, stepId, stepId],
      );
    }
    if (a.entryStepId === stepId) await sql(tx).run('update automations set entry_step_id = $1 where id = $2', [successor, a.id]);
    await sql(tx).run('delete from automation_steps where id = $1', [stepId]);
  });
}

export async function addTransition(em: EntityManager, projectId: string, automationId: string, input: { fromStepId: string; toStepId: string; branch?: Branch | null }): Promise<TransitionRow> {
  return editGraph(em, projectId, automationId, async (tx, a) => {
    const steps = await sql(tx).query<{ id: string; type: StepType }>('select id, type from automation_steps where automation_id = $1 and id in ($2, $3)', [a.id, input.fromStepId, input.toStepId]);
    const errors: FieldError[] = [];
    const from = steps.find((s) => s.id === input.fromStepId);
    if (!from) errors.push({ field: 'fromStepId', message: 'fromStepId must be a step of this workflow', code: 'not_found' });
    if (!steps.some((s) => s.id === input.toStepId)) errors.push({ field: 'toStepId', message: 'toStepId must be a step of this workflow', code: 'not_found' });
    if (from) {
      const labels = exitLabels(from.type);
      const label = input.branch ?? 'next';
      if (labels.length === 0) errors.push({ field: 'fromStepId', message: 'An EXIT step has no outgoing transitions', code: 'invalid_branch' });
      else if (!labels.includes(label)) {
        const wanted = labels.includes('next') ? 'no branch' : `branch ${labels.map((l) => `"${l}"`).join(' or ')}`;
        errors.push({ field: 'branch', message: `A transition out of a ${from.type} step takes ${wanted}`, code: 'invalid_branch' });
      }
    }
    if (errors.length) throw validationError(errors);
    try {
      const row = await sql(tx).one<TransitionRow>(
        `insert into automation_transitions (id, automation_id, from_step_id, to_step_id, branch) values ($1, $2, $3, $4, $5) returning ${TRANSITION_SELECT}`,
        [uuidv7(), a.id, input.fromStepId, input.toStepId, input.branch ?? null],
      );
      return row!;
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) {
        const which = input.branch ? `The "${input.branch}" branch of step ${input.fromStepId}` : `Step ${input.fromStepId}`;
        throw conflict('TRANSITION_EXISTS', `${which} already has a transition`, 'Delete that transition first (DELETE /workflows/:id/transitions/:transitionId).');
      }
      throw err;
    }
  });
}

export async function deleteTransition(em: EntityManager, projectId: string, automationId: string, transitionId: string): Promise<void> {
  await editGraph(em, projectId, automationId, async (tx, a) => {
    const gone = await sql(tx).run('delete from automation_transitions where id = $1 and automation_id = $2', [transitionId, a.id]);
    if (gone === 0) throw notFound('Transition');
  });
}
