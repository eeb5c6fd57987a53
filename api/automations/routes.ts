import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { errorResponses } from '../common.schema';
import { cursorListSchema } from '../presenters/contact.presenter';
import { FieldSchema } from '../contacts/schema';
import { zodFieldErrors } from '../validation';
import { validationError } from '../../domain/errors';
import { listFields } from '../../domain/contacts/contact-fields';
import { eventNames } from '../../domain/events/event.service';
import {
  ExecutionSchema,
  ExecutionSummarySchema,
  WorkflowSchema,
  WorkflowStepSchema,
  WorkflowSummarySchema,
  WorkflowTransitionSchema,
  presentExecution,
  presentExecutionSummary,
  presentStep,
  presentTransition,
  presentWorkflow,
  presentWorkflowSummary,
} from '../presenters/automation.presenter';
import {
  CreateStepBody,
  CreateTransitionBody,
  CreateWorkflowBody,
  DeleteStepQuery,
  ExecutionParams,
  ListExecutionsQuery,
  ListWorkflowsQuery,
  STEP_CONFIGS,
  StartExecutionBody,
  StepParams,
  TransitionParams,
  UpdateStepBody,
  UpdateWorkflowBody,
  WorkflowIdParams,
} from './schema';
import {
  addStep,
  addTransition,
  createAutomation,
  deleteAutomation,
  deleteStep,
  deleteTransition,
  getAutomation,
  listAutomations,
  updateAutomation,
  updateStep,
} from '../../domain/automations/automation.service';
import { cancelAllExecutions, cancelExecution, getExecution, listExecutions, startExecution } from '../../domain/automations/execution.service';
import type { StepType } from '../../domain/automations/automation.entity';

const TAGS = ['Workflows'];

const GRAPH_RULES =
  'Editing the graph of an enabled workflow is allowed: when the graph is valid afterwards it becomes the version new runs start on; ' +
  'otherwise runs keep starting on the last valid version and `problems` says what is wrong. Runs under way never change: each carries its version.';

export function automationRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/workflows',
    summary: 'List workflows, newest first (cursor pagination)',
    tags: TAGS,
    auth: 'secret',
    query: ListWorkflowsQuery,
    responses: { 200: { description: 'A page of workflows', schema: cursorListSchema(WorkflowSummarySchema, 'WorkflowList') }, ...errorResponses(401, 422) },
    handler: async ({ ctx, query, principal }) => {
      const page = await listAutomations(ctx.state.em, principal.projectId, query);
      return { body: { ...page, data: page.data.map(presentWorkflowSummary) } };
    },
  });

  routes.add({
    method: 'get',
    path: '/workflows/fields',
    summary: 'Contact and event fields usable in CONDITION step filters',
    description:
      '`contact`: the standard and custom contact fields (as GET /contacts/fields), addressed as `email`, `subscribed`, `createdAt`, `data.<key>`; ' +
      '`events`: the event names recorded in the project, for `{ event, operator: hasDone | hasNotDone }` conditions, WAIT_FOR_EVENT steps and triggers.',
    tags: TAGS,
    auth: 'secret',
    responses: {
      200: {
        description: 'Fields',
        schema: z
          .object({
            contact: z.array(FieldSchema),
            events: z.array(z.object({ name: z.string(), count: z.number().int(), source: z.enum(['TRACKED', 'SYSTEM']), lastSeenAt: z.iso.datetime() })),
          })
          .meta({ id: 'WorkflowFields' }),
      },
      ...errorResponses(401),
    },
    handler: async ({ ctx, principal }) => {
      const [contact, events] = [await listFields(ctx.state.em, principal.projectId), await eventNames(ctx.state.em, principal.projectId)];
      return { body: { contact, events: events.map((e) => ({ name: e.name, count: e.count, source: e.source, lastSeenAt: new Date(e.lastSeenAt).toISOString() })) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/workflows',
    summary: 'Create a workflow (triggerType EVENT, enabled false)',
    tags: TAGS,
    auth: 'secret',
    body: CreateWorkflowBody,
    responses: { 201: { description: 'Created, disabled', schema: WorkflowSchema }, ...errorResponses(401, 413, 422) },
    handler: async ({ ctx, body, principal }) => ({ status: 201, body: presentWorkflow(await createAutomation(ctx.state.em, principal.projectId, body)) }),
  });

  routes.add({
    method: 'get',
    path: '/workflows/:id',
    summary: 'Get a workflow with its steps and transitions',
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    responses: { 200: { description: 'Workflow', schema: WorkflowSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({ body: presentWorkflow(await getAutomation(ctx.state.em, principal.projectId, params.id)) }),
  });

  routes.add({
    method: 'patch',
    path: '/workflows/:id',
    summary: 'Update metadata, trigger, allowReentry, entryStepId or enabled',
    description:
      '`enabled: true` checks the graph and answers 422 naming every problem (unreachable steps, a cycle without a DELAY or WAIT_FOR_EVENT, a CONDITION or ' +
      'WAIT_FOR_EVENT without both branches, a SEND_EMAIL whose template is missing or whose sender is not on a verified domain, no trigger event). ' +
      '`enabled: false` stops new runs; runs under way finish on their own version. ' + GRAPH_RULES,
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    body: UpdateWorkflowBody,
    responses: { 200: { description: 'The workflow as stored', schema: WorkflowSchema }, ...errorResponses(401, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({ body: presentWorkflow(await updateAutomation(ctx.state.em, principal.projectId, params.id, body)) }),
  });

  routes.add({
    method: 'delete',
    path: '/workflows/:id',
    summary: 'Delete a workflow',
    description: '409 WORKFLOW_ACTIVE while it has RUNNING or WAITING executions (cancel them first: POST /workflows/:id/executions/cancel-all). Its ended executions go with it.',
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 409, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteAutomation(ctx.state.em, principal.projectId, params.id);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/workflows/:id/steps',
    summary: 'Add a step of one of the seven types',
    description: `The first step added becomes the entry step. Connect steps with POST /workflows/:id/transitions. ${GRAPH_RULES}`,
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    body: CreateStepBody,
    responses: { 201: { description: 'The step', schema: WorkflowStepSchema }, ...errorResponses(401, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      status: 201,
      body: presentStep(await addStep(ctx.state.em, principal.projectId, params.id, { type: body.type, name: body.name, config: body.config })),
    }),
  });

  routes.add({
    method: 'patch',
    path: '/workflows/:id/steps/:stepId',
    summary: "Update a step's name or config",
    description: `\`config\` replaces the step's config whole and is validated as its type's (the type cannot change). ${GRAPH_RULES}`,
    tags: TAGS,
    auth: 'secret',
    params: StepParams,
    body: UpdateStepBody,
    responses: { 200: { description: 'The step', schema: WorkflowStepSchema }, ...errorResponses(401, 404, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => {
      const { config } = body;
      // Validated as the stored step's type, which the service reads under the workflow's lock.
      const parseConfig =
        config === undefined
          ? undefined
          : (type: StepType) => {
              const parsed = (STEP_CONFIGS[type] as z.ZodType<Record<string, unknown>>).safeParse(config);
              if (parsed.success) return parsed.data;
              const details = zodFieldErrors(parsed.error).map((e) => `${e.field === '(body)' ? 'config' : `config.${e.field}`}: ${e.message}`);
              throw validationError([{ field: 'config', message: `Not a ${type} step's config (${details.join('; ')})`, code: 'wrong_step_type' }]);
            };
      return { body: presentStep(await updateStep(ctx.state.em, principal.projectId, params.id, params.stepId, { name: body.name, config: parseConfig })) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/workflows/:id/steps/:stepId',
    summary: 'Delete a step (and its transitions)',
    description:
      '`splice=true` reconnects: every transition into the step is redirected to its successor, and an entry step hands the entry to it (a step with ' +
      `both branches connected cannot be spliced: 422). Without splice, the neighbours are left unconnected. ${GRAPH_RULES}`,
    tags: TAGS,
    auth: 'secret',
    params: StepParams,
    query: DeleteStepQuery,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      await deleteStep(ctx.state.em, principal.projectId, params.id, params.stepId, query.splice ?? false);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/workflows/:id/transitions',
    summary: 'Connect two steps',
    description: `Each exit of a step takes one transition (409 TRANSITION_EXISTS). ${GRAPH_RULES}`,
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    body: CreateTransitionBody,
    responses: { 201: { description: 'The transition', schema: WorkflowTransitionSchema }, ...errorResponses(401, 404, 409, 413, 422) },
    handler: async ({ ctx, params, body, principal }) => ({
      status: 201,
      body: presentTransition(await addTransition(ctx.state.em, principal.projectId, params.id, body)),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/workflows/:id/transitions/:transitionId',
    summary: 'Delete a transition',
    tags: TAGS,
    auth: 'secret',
    params: TransitionParams,
    responses: { 204: { description: 'Deleted' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      await deleteTransition(ctx.state.em, principal.projectId, params.id, params.transitionId);
      return {};
    },
  });

  routes.add({
    method: 'post',
    path: '/workflows/:id/executions',
    summary: 'Start an execution for a contact (manual start)',
    description:
      'The contact is given by `contactId` or `email`; `context` is available to templates as `{{ context.* }}`. Runs on the version new runs start on ' +
      '(a disabled workflow: its current graph, which must be valid: 422 with its problems). 409 EXECUTION_ACTIVE while the contact has a RUNNING or ' +
      'WAITING execution of this workflow (allowReentry governs event triggers only). 503 when Temporal is unavailable (nothing is kept).',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
    params: WorkflowIdParams,
    body: StartExecutionBody,
    responses: { 201: { description: 'The execution, RUNNING', schema: ExecutionSchema }, ...errorResponses(401, 404, 409, 413, 422, 503) },
    handler: async ({ ctx, params, body, principal }) => ({
      status: 201,
      body: presentExecution(await startExecution(ctx.state.em, deps.temporal, principal.projectId, params.id, body)),
    }),
  });

  routes.add({
    method: 'get',
    path: '/workflows/:id/executions',
    summary: "List a workflow's executions, newest first (cursor pagination)",
    description: '`status` filters (RUNNING, WAITING, COMPLETED, CANCELLED, FAILED); `contactId` narrows to one contact.',
    tags: TAGS,
    auth: 'secret',
    params: WorkflowIdParams,
    query: ListExecutionsQuery,
    responses: { 200: { description: 'A page of executions', schema: cursorListSchema(ExecutionSummarySchema, 'WorkflowExecutionList') }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, query, principal }) => {
      const page = await listExecutions(ctx.state.em, principal.projectId, params.id, query);
      return { body: { ...page, data: page.data.map(presentExecutionSummary) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/workflows/:id/executions/cancel-all',
    summary: 'Cancel every active execution',
    description:
      'Starts a cancel-all workflow that asks every RUNNING or WAITING execution started before now to cancel (each records CANCELLED itself within ' +
      'moments). Answers 202 with how many were active. New runs keep starting while the workflow is enabled: disable it first to stop them.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Records the cancel job and starts its workflow as one unit (persistThenStart)',
    params: WorkflowIdParams,
    responses: {
      202: {
        description: 'Accepted',
        schema: z
          .object({ jobId: z.string(), temporalWorkflowId: z.string(), active: z.number().int().meta({ description: 'Executions active when the request came.' }) })
          .meta({ id: 'WorkflowCancelAllResponse' }),
      },
      ...errorResponses(401, 404, 422, 503),
    },
    handler: async ({ ctx, params, principal }) => {
      const r = await cancelAllExecutions(ctx.state.em, deps.temporal, principal.projectId, params.id);
      return { status: 202, body: { jobId: r.jobId, temporalWorkflowId: r.workflowId, active: r.active } };
    },
  });

  routes.add({
    method: 'get',
    path: '/workflows/:id/executions/:executionId',
    summary: 'Get an execution: status, current step, the steps taken, next wake-up',
    description:
      'The execution as stored: a read never asks Temporal. A run cancelled in Temporal Web UI records CANCELLED itself; one terminated there ' +
      'shows as FAILED once the email sweeper (every 5 minutes) has seen it.',
    tags: TAGS,
    auth: 'secret',
    params: ExecutionParams,
    responses: { 200: { description: 'Execution', schema: ExecutionSchema }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => ({
      body: presentExecution(await getExecution(ctx.state.em, principal.projectId, params.id, params.executionId)),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/workflows/:id/executions/:executionId',
    summary: 'Cancel a running or waiting execution',
    description:
      'The execution becomes CANCELLED and its run is cancelled, as one unit: if Temporal is unreachable the answer is 503 and the execution is ' +
      'unchanged (retry). 409 EXECUTION_ENDED once it has ended. Answers with the execution, CANCELLED.',
    tags: TAGS,
    auth: 'secret',
    ownTransactions: 'Records the cancel and tells Temporal as one unit (recordThenTell)',
    params: ExecutionParams,
    responses: { 200: { description: 'The execution', schema: ExecutionSchema }, ...errorResponses(401, 404, 409, 422, 503) },
    handler: async ({ ctx, params, principal }) => ({
      body: presentExecution(await cancelExecution(ctx.state.em, deps.temporal, principal.projectId, params.id, params.executionId)),
    }),
  });
}
