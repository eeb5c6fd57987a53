import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';
import { selectList } from '../db/rows';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
export const AUDIENCE_TYPES = ['ALL', 'SEGMENT', 'FILTERED'] as const;
export type AudienceType = (typeof AUDIENCE_TYPES)[number];

/**
 * A bulk marketing send (migration 20261124100000). Content is inline (`subject`, `body`) or a stored template
 * (`templateId`; no foreign key: the template delete guard refuses while the campaign is active). The audience is
 * every subscribed contact, a segment's members or a filter; it is snapshotted into `emails` rows (one per contact,
 * `campaign_id` set, no body stored) when the send starts. The sender is `fromEmail` (`from` in the API).
 */
export const Campaign = defineEntity({
  name: 'Campaign',
  tableName: 'campaigns',
  // Lists are one project's campaigns, newest first (UUIDv7 ids); the index also serves the project's cascade delete.
  // The activity feed reads starts and ends by time, and what is scheduled, soonest first.
  indexes: [
    { properties: ['project', 'id'] },
    {
      name: 'campaigns_project_id_scheduled_at_index',
      expression: 'create index "campaigns_project_id_scheduled_at_index" on "campaigns" ("project_id", "scheduled_at") where status = \'SCHEDULED\'',
    },
    {
      name: 'campaigns_project_id_started_at_index',
      expression: 'create index "campaigns_project_id_started_at_index" on "campaigns" ("project_id", "started_at") where started_at is not null',
    },
    {
      name: 'campaigns_project_id_finished_at_index',
      expression: 'create index "campaigns_project_id_finished_at_index" on "campaigns" ("project_id", "finished_at") where finished_at is not null',
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    name: p.string().length(200),
    description: p.text().nullable(),
    subject: p.string().length(998).nullable(),
    body: p.text().nullable(),
    templateId: p.uuid().nullable(),
    fromEmail: p.string().length(320),
    fromName: p.string().length(200).nullable(),
    replyTo: p.string().length(320).nullable(),
    audienceType: p.enum([...AUDIENCE_TYPES]),
    segmentId: p.uuid().nullable(),
    audienceFilter: p.json<Record<string, unknown>>().nullable(),
    status: p.enum([...CAMPAIGN_STATUSES]).default('DRAFT'),
    /** When a SCHEDULED campaign starts sending (the workflow's durable timer). */
    scheduledAt: p.datetime().nullable(),
    /** Per-campaign tracking; null means the project's setting. */
    trackOpens: p.boolean().nullable(),
    trackClicks: p.boolean().nullable(),
    /** `campaign-send/<id>` once sent or scheduled. */
    workflowId: p.string().nullable(),
    /** Recipients in the snapshot (set when sending starts). */
    audienceSize: p.integer().nullable(),
    /**
     * What is sent, fixed when sending starts (template resolved, tracking settled), so an edit of the template while
     * the campaign sends cannot give recipients different messages.
     */
    sendContent: p.json<Record<string, unknown>>().nullable(),
    startedAt: p.datetime().nullable(),
    /** When it reached SENT, CANCELLED or FAILED. */
    finishedAt: p.datetime().nullable(),
    /** Why a campaign is FAILED (or how it was cancelled). */
    statusReason: p.text().nullable(),
    /** The A/B test (domain/campaigns/ab-test.ts `AbTest`); null: a campaign without variants (migration 20261127200000). */
    abTest: p.json<Record<string, unknown>>().nullable(),
    /** A person's pick of the winning variant (POST /campaigns/:id/winner), read by the waiting run. */
    abPick: p.smallint().nullable(),
    /** The decision with its numbers (`AbDecision`), recorded by the run before it sends the remainder. */
    abDecision: p.json<Record<string, unknown>>().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Campaign = InferEntity<typeof Campaign>;

/** A `campaigns` row as raw queries read it (domain/db/rows.ts): every column, the project as its id. */
export type CampaignRow = { [K in Exclude<keyof Campaign, 'project' | 'status' | 'audienceType'>]-?: Exclude<Campaign[K], undefined> } & {
  projectId: string;
  status: CampaignStatus;
  audienceType: AudienceType;
};

const CAMPAIGN_COLUMNS = [
  'id', 'projectId', 'name', 'description', 'subject', 'body', 'templateId', 'fromEmail', 'fromName', 'replyTo', 'audienceType', 'segmentId',
  'audienceFilter', 'status', 'scheduledAt', 'trackOpens', 'trackClicks', 'workflowId', 'audienceSize', 'sendContent', 'startedAt', 'finishedAt',
  'statusReason', 'abTest', 'abPick', 'abDecision', 'createdAt', 'updatedAt',
] as const satisfies readonly (keyof CampaignRow)[];

/** Every campaign column, named as `CampaignRow` (raw selects and `returning` lists). */
export const CAMPAIGN_SELECT = selectList<CampaignRow>(CAMPAIGN_COLUMNS);

/** Statuses in which a campaign has a live `campaign-send/<id>` workflow: it cannot be deleted, only cancelled. */
export const ACTIVE_CAMPAIGN_STATUSES = ['SCHEDULED', 'SENDING', 'PAUSED'] as const satisfies readonly CampaignStatus[];
/** Statuses in which a campaign can still be edited. */
export const EDITABLE_CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED'] as const satisfies readonly CampaignStatus[];

/**
 * A campaign's counters, kept incrementally: `sent`, `failed` and `skipped` by the send activity in the statement
 * that records the outcomes, `audience` by the snapshot, `suppressed` right after it, and the engagement counters by the `campaign-stats` outbox
 * consumer. `GET /campaigns/:id/stats` reads this one row; nothing scans the recipients.
 */
export const CampaignStats = defineEntity({
  name: 'CampaignStats',
  tableName: 'campaign_stats',
  properties: {
    campaign: () => p.manyToOne(Campaign).primary().deleteRule('cascade').updateRule('no action'),
    audience: p.integer().default(0),
    sent: p.integer().default(0),
    delivered: p.integer().default(0),
    openedUnique: p.integer().default(0),
    openedTotal: p.integer().default(0),
    clickedUnique: p.integer().default(0),
    clickedTotal: p.integer().default(0),
    bounced: p.integer().default(0),
    complained: p.integer().default(0),
    unsubscribed: p.integer().default(0),
    failed: p.integer().default(0),
    skipped: p.integer().default(0),
    /** Recipients of the snapshot whose address is on the suppression list: their emails are SUPPRESSED, never sent. */
    suppressed: p.integer().default(0),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type CampaignStats = InferEntity<typeof CampaignStats>;
