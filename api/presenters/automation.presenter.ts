import { z } from 'zod';
import { BRANCHES, EXECUTION_STATUSES, STEP_TYPES, type AutomationRow, type ExecutionRow } from '../../domain/automations/automation.entity';
import type { AutomationDetail, StepRow, TransitionRow } from '../../domain/automations/automation.service';
import type { ExecutionDetail } from '../../domain/automations/execution.service';
import { iso } from './time';

export const WorkflowStepSchema = z
  .object({
    id: z.string(),
    type: z.enum(STEP_TYPES),
    name: z.string().nullable(),
    config: z.record(z.string(), z.unknown()).meta({ description: "The type's config (see the *StepConfig schemas)." }),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .meta({ id: 'WorkflowStep' });

export const WorkflowTransitionSchema = z
  .object({
    id: z.string(),
    fromStepId: z.string(),
    toStepId: z.string(),
    branch: z.enum(BRANCHES).nullable().meta({ description: 'yes/no out of CONDITION, event/timeout out of WAIT_FOR_EVENT, null otherwise.' }),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'WorkflowTransition' });

const WorkflowBase = {
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  triggerType: z.literal('EVENT'),
  triggerConfig: z
    .object({ event: z.string().nullable(), filter: z.record(z.string(), z.unknown()).nullable() })
    .meta({ description: 'The trigger: the event name and the optional filter on its data (also as triggerEvent / triggerFilter).' }),
  triggerEvent: z.string().nullable(),
  triggerFilter: z.record(z.string(), z.unknown()).nullable(),
  enabled: z.boolean(),
  allowReentry: z.boolean(),
  entryStepId: z.string().nullable(),
  version: z.number().int().meta({ description: 'The graph version: every change of steps, transitions or the entry adds one.' }),
  publishedVersion: z.number().int().nullable().meta({ description: 'The version new runs start on (frozen when enabled or started; null before).' }),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
};

export const WorkflowSummarySchema = z.object(WorkflowBase).meta({ id: 'WorkflowSummary' });

export const WorkflowSchema = z
  .object({
    ...WorkflowBase,
    webhookSecret: z.string().meta({ description: 'Signs WEBHOOK step requests (Mailwright-Signature).' }),
    steps: z.array(WorkflowStepSchema),
    transitions: z.array(WorkflowTransitionSchema),
    problems: z
      .array(z.object({ field: z.string(), message: z.string(), code: z.string() }))
      .meta({ description: 'What keeps the current graph from running (enabling refuses with these). Empty: it can run.' }),
  })
  .meta({ id: 'Workflow' });

export function presentWorkflowSummary(a: AutomationRow) {
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    triggerType: a.triggerType,
    triggerConfig: { event: a.triggerEvent, filter: a.triggerFilter },
    triggerEvent: a.triggerEvent,
    triggerFilter: a.triggerFilter,
    enabled: a.enabled,
    allowReentry: a.allowReentry,
    entryStepId: a.entryStepId,
    version: a.graphVersion,
    publishedVersion: a.publishedVersion,
    createdAt: iso(a.createdAt),
    updatedAt: iso(a.updatedAt),
  };
}

export const presentStep = (s: StepRow) => ({ id: s.id, type: s.type, name: s.name, config: s.config, createdAt: iso(s.createdAt), updatedAt: iso(s.updatedAt) });
export const presentTransition = (t: TransitionRow) => ({ id: t.id, fromStepId: t.fromStepId, toStepId: t.toStepId, branch: t.branch, createdAt: iso(t.createdAt) });

export function presentWorkflow(a: AutomationDetail) {
  return {
    ...presentWorkflowSummary(a),
    webhookSecret: a.webhookSecret,
    steps: a.steps.map(presentStep),
    transitions: a.transitions.map(presentTransition),
    problems: a.problems,
  };
}

const ExecutionBase = {
  id: z.string(),
  workflowId: z.string(),
  contactId: z.string(),
  status: z.enum(EXECUTION_STATUSES).meta({ description: 'RUNNING or WAITING (in DELAY or WAIT_FOR_EVENT) while active; COMPLETED, CANCELLED or FAILED once ended.' }),
  currentStepId: z.string().nullable().meta({ description: 'The step under way or waited in; null once ended.' }),
  waitingFor: z.string().nullable().meta({ description: 'WAIT_FOR_EVENT: the event the run waits for.' }),
  nextWakeAt: z.iso.datetime().nullable().meta({ description: 'DELAY or WAIT_FOR_EVENT: when the run wakes up at the latest.' }),
  context: z.record(z.string(), z.unknown()).nullable(),
  version: z.number().int().meta({ description: 'The graph version the run carries.' }),
  run: z.number().int().meta({ description: "The contact's n-th run of this workflow." }),
  temporalWorkflowId: z.string().meta({ description: 'The Temporal workflow id (`automation/<workflowId>/<contactId>/<n>`), for Web UI.' }),
  triggerEventId: z.string().nullable().meta({ description: 'The event that started it; null for a manual start.' }),
  statusReason: z.string().nullable(),
  startedAt: z.iso.datetime(),
  finishedAt: z.iso.datetime().nullable(),
};

export const ExecutionSummarySchema = z.object(ExecutionBase).meta({ id: 'WorkflowExecutionSummary' });

export const ExecutionSchema = z
  .object({
    ...ExecutionBase,
    steps: z.array(
      z.object({
        seq: z.number().int(),
        stepId: z.string(),
        type: z.enum(STEP_TYPES),
        startedAt: z.iso.datetime(),
        finishedAt: z.iso.datetime(),
        outcome: z.record(z.string(), z.unknown()).meta({ description: 'What the step did: emailId and status, branch, webhook status, ...' }),
      }),
    ),
  })
  .meta({ id: 'WorkflowExecution' });

export function presentExecutionSummary(x: ExecutionRow) {
  return {
    id: x.id,
    workflowId: x.automationId,
    contactId: x.contactId,
    status: x.status,
    currentStepId: x.currentStepId,
    waitingFor: x.waitingEvent,
    nextWakeAt: iso(x.nextWakeAt),
    context: x.context,
    version: x.version,
    run: x.n,
    temporalWorkflowId: x.workflowId,
    triggerEventId: x.triggerEventId,
    statusReason: x.statusReason,
    startedAt: iso(x.startedAt),
    finishedAt: iso(x.finishedAt),
  };
}

export function presentExecution(x: ExecutionDetail) {
  return {
    ...presentExecutionSummary(x),
    steps: x.steps.map((s) => ({ seq: s.seq, stepId: s.stepId, type: s.type, startedAt: iso(s.startedAt), finishedAt: iso(s.finishedAt), outcome: s.outcome })),
  };
}
