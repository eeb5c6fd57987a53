import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';
import { selectList } from '../db/rows';

/*
 * Automations (SPEC.md › Workflow; migration 20261124140000). The API calls them workflows; the code says
 * "automation" so they are never confused with Temporal workflows. An automation is an event trigger and a graph of
 * steps joined by transitions. The graph as clients edit it lives in `automation_steps` and `automation_transitions`;
 * every valid state of it that runs may start on is frozen as a numbered `automation_versions` row, and each
 * execution carries the version it started on (in its Temporal input), so an edit never changes a run under way.
 */

export const STEP_TYPES = ['SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type StepType = (typeof STEP_TYPES)[number];

/** Out-edge labels: CONDITION has yes/no, WAIT_FOR_EVENT has event/timeout, every other step one unlabelled edge. */
export const BRANCHES = ['yes', 'no', 'event', 'timeout'] as const;
export type Branch = (typeof BRANCHES)[number];

const TRIGGER_TYPES = ['EVENT'] as const;
type TriggerType = (typeof TRIGGER_TYPES)[number];

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'CANCELLED', 'FAILED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
/** An execution in one of these has a live Temporal run. */
export const ACTIVE_EXECUTION_STATUSES = ['RUNNING', 'WAITING'] as const satisfies readonly ExecutionStatus[];

export const Automation = defineEntity({
  name: 'Automation',
  tableName: 'automations',
  indexes: [
    { properties: ['project', 'id'] },
    {
      name: 'automations_trigger_index',
      expression: 'create index "automations_trigger_index" on "automations" ("project_id", "trigger_event") where enabled',
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    name: p.string().length(200),
    description: p.text().nullable(),
    triggerType: p.enum([...TRIGGER_TYPES]).default('EVENT'),
    /** The event name that starts a run (tracked or a service event); null until configured. */
    triggerEvent: p.string().length(200).nullable(),
    /** A filter on the triggering event's `data` (the filter language, `data.*` fields only). */
    triggerFilter: p.json<Record<string, unknown>>().nullable(),
    enabled: p.boolean().default(false),
    allowReentry: p.boolean().default(false),
    /** The first step of every run. */
    entryStepId: p.uuid().nullable(),
    /** Bumped by every change of the graph (steps, transitions, entry). */
    graphVersion: p.integer().default(1),
    /** The frozen version new runs start on; null until the graph was first valid when enabling or starting. */
    publishedVersion: p.integer().nullable(),
    /** Signs WEBHOOK step requests (`Mailwright-Signature`). */
    webhookSecret: p.string().length(100),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Automation = InferEntity<typeof Automation>;

export const AutomationStep = defineEntity({
  name: 'AutomationStep',
  tableName: 'automation_steps',
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    automation: () => p.manyToOne(Automation).deleteRule('cascade').updateRule('no action').index(),
    type: p.enum([...STEP_TYPES]),
    name: p.string().length(200).nullable(),
    config: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});

export const AutomationTransition = defineEntity({
  name: 'AutomationTransition',
  tableName: 'automation_transitions',
  indexes: [{ properties: ['toStep'] }],
  uniques: [
    {
      name: 'automation_transitions_out_unique',
      expression:
        'create unique index "automation_transitions_out_unique" on "automation_transitions" ("from_step_id", coalesce("branch", \'\'))',
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    automation: () => p.manyToOne(Automation).deleteRule('cascade').updateRule('no action').index(),
    fromStep: () => p.manyToOne(AutomationStep).deleteRule('cascade').updateRule('no action'),
    toStep: () => p.manyToOne(AutomationStep).deleteRule('cascade').updateRule('no action'),
    branch: p.enum([...BRANCHES]).nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});

/** A frozen, validated graph (domain/automations/graph.ts › AutomationGraph) that runs start on. */
export const AutomationVersion = defineEntity({
  name: 'AutomationVersion',
  tableName: 'automation_versions',
  properties: {
    automation: () => p.manyToOne(Automation).deleteRule('cascade').updateRule('no action').primary(),
    version: p.integer().primary(),
    graph: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});

/**
 * One contact's run through an automation: Temporal workflow `automation/<automationId>/<contactId>/<n>`. The row is
 * written before the run starts and kept up to date by the run's activities; the API mirrors Temporal on read for
 * runs ended outside the workflow code (terminated in Web UI). No foreign key to contacts: a run outlives its
 * contact's deletion long enough to end itself.
 */
export const AutomationExecution = defineEntity({
  name: 'AutomationExecution',
  tableName: 'automation_executions',
  indexes: [
    { properties: ['automation', 'id'] },
    {
      name: 'automation_executions_status_index',
      expression: 'create index "automation_executions_status_index" on "automation_executions" ("automation_id", "status", "id")',
    },
    {
      name: 'automation_executions_waiting_index',
      expression:
        'create index "automation_executions_waiting_index" on "automation_executions" ("contact_id", "waiting_event") where waiting_event is not null',
    },
    {
      name: 'automation_executions_trigger_index',
      expression: 'create index "automation_executions_trigger_index" on "automation_executions" ("trigger_event_id") where trigger_event_id is not null',
    },
    {
      name: 'automation_executions_project_id_next_wake_at_index',
      expression:
        'create index "automation_executions_project_id_next_wake_at_index" on "automation_executions" ("project_id", "next_wake_at") where next_wake_at is not null and status in (\'RUNNING\', \'WAITING\')',
    },
  ],
  uniques: [
    { properties: ['automation', 'contactId', 'n'] },
    {
      name: 'automation_executions_one_active',
      expression:
        'create unique index "automation_executions_one_active" on "automation_executions" ("automation_id", "contact_id") where status in (\'RUNNING\', \'WAITING\')',
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    projectId: p.uuid().index(),
    automation: () => p.manyToOne(Automation).deleteRule('cascade').updateRule('no action'),
    contactId: p.uuid(),
    /** The contact's n-th run of this automation (1 unless re-entry is allowed). */
    n: p.integer(),
    /** The graph version the run carries. */
    version: p.integer(),
    workflowId: p.string().length(200),
    status: p.enum([...EXECUTION_STATUSES]),
    /** The step under way (or being waited in). */
    currentStepId: p.uuid().nullable(),
    /** WAIT_FOR_EVENT: the event name the run waits for (the outbox consumer signals it), and since when. */
    waitingEvent: p.string().length(200).nullable(),
    waitSince: p.datetime().nullable(),
    /** DELAY or WAIT_FOR_EVENT: when the run wakes up at the latest. */
    nextWakeAt: p.datetime().nullable(),
    context: p.json<Record<string, unknown>>().nullable(),
    /** The event that started it (null: started by the API). */
    triggerEventId: p.uuid().nullable(),
    statusReason: p.text().nullable(),
    startedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    finishedAt: p.datetime().nullable(),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type AutomationExecution = InferEntity<typeof AutomationExecution>;

/** The steps an execution took, in order. */
export const AutomationExecutionStep = defineEntity({
  name: 'AutomationExecutionStep',
  tableName: 'automation_execution_steps',
  indexes: [{ properties: ['projectId', 'finishedAt'] }, { properties: ['automationId', 'finishedAt'] }],
  properties: {
    execution: () => p.manyToOne(AutomationExecution).deleteRule('cascade').updateRule('no action').primary(),
    seq: p.integer().primary(),
    /** The execution's project and automation, for the activity feed's steps by project and by automation. */
    projectId: p.uuid(),
    automationId: p.uuid(),
    stepId: p.uuid(),
    type: p.enum([...STEP_TYPES]),
    startedAt: p.datetime(),
    finishedAt: p.datetime(),
    /** What the step did: `{ branch?, emailId?, status?, ... }`. */
    outcome: p.json<Record<string, unknown>>(),
  },
});

/** An `automations` row as raw queries read it. */
export type AutomationRow = { [K in Exclude<keyof Automation, 'project' | 'triggerType'>]-?: Exclude<Automation[K], undefined> } & {
  projectId: string;
  triggerType: TriggerType;
};

const AUTOMATION_COLUMNS = [
  'id', 'projectId', 'name', 'description', 'triggerType', 'triggerEvent', 'triggerFilter', 'enabled', 'allowReentry', 'entryStepId',
  'graphVersion', 'publishedVersion', 'webhookSecret', 'createdAt', 'updatedAt',
] as const satisfies readonly (keyof AutomationRow)[];
export const AUTOMATION_SELECT = selectList<AutomationRow>(AUTOMATION_COLUMNS);

/** An `automation_executions` row as raw queries read it. */
export type ExecutionRow = { [K in Exclude<keyof AutomationExecution, 'automation' | 'status'>]-?: Exclude<AutomationExecution[K], undefined> } & {
  automationId: string;
  status: ExecutionStatus;
};

const EXECUTION_COLUMNS = [
  'id', 'projectId', 'automationId', 'contactId', 'n', 'version', 'workflowId', 'status', 'currentStepId', 'waitingEvent', 'waitSince',
  'nextWakeAt', 'context', 'triggerEventId', 'statusReason', 'startedAt', 'finishedAt', 'updatedAt',
] as const satisfies readonly (keyof ExecutionRow)[];
export const EXECUTION_SELECT = selectList<ExecutionRow>(EXECUTION_COLUMNS);
