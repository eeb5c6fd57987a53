import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { uuidv7 } from '../ids';

export interface ProjectSettings {
  /** Open and click tracking for this project's mail (a send can override it). */
  trackOpens: boolean;
  trackClicks: boolean;
  /** The response variant of this project's secret-key requests without the variant header (SPEC.md › Versioning). */
  responseVariant: 'current' | 'earlier';
  /** Campaign emails per second for this project; null = the deployment's CAMPAIGN_SEND_RATE (0 there = unthrottled). */
  campaignSendRate: number | null;
  /** Minutes between scheduled recomputes of the tracked segments; null = DEFAULT_SEGMENT_RECOMPUTE_MINUTES (hourly). */
  segmentRecomputeMinutes: number | null;
}

/** How often tracked segments are recomputed unless the project sets `segmentRecomputeMinutes`. */
export const DEFAULT_SEGMENT_RECOMPUTE_MINUTES = 60;

export const DEFAULT_PROJECT_SETTINGS: ProjectSettings = {
  trackOpens: true,
  trackClicks: true,
  responseVariant: 'current',
  campaignSendRate: null,
  segmentRecomputeMinutes: null,
};

/**
 * The column's default, as migrated. Settings added later are not in it: every read merges DEFAULT_PROJECT_SETTINGS
 * under the stored ones, so a key missing from a row reads as its default.
 */
const COLUMN_DEFAULT_SETTINGS = { trackOpens: true, trackClicks: true };

export const Project = defineEntity({
  name: 'Project',
  tableName: 'projects',
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    name: p.string().length(200),
    /** Public key (pk_...): safe in browsers, so it is stored as is and looked up directly. */
    publicKey: p.string().length(80).unique(),
    /** SHA-256 of the secret key (sk_...); the key itself is only shown at creation and rotation. */
    secretKeyHash: p.string().length(64).unique().hidden(),
    /** The first characters of the secret key, so a person can tell which key is in use. */
    secretKeyHint: p.string().length(16),
    keysRotatedAt: p.datetime(),
    disabled: p.boolean().default(false),
    disabledReason: p.string().nullable(),
    settings: p.json<ProjectSettings>().default(JSON.stringify(COLUMN_DEFAULT_SETTINGS)),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Project = InferEntity<typeof Project>;

/** A project reset (migration 20261125130200, domain/projects/project-reset.ts): at most one RUNNING per project. */
export const ProjectReset = defineEntity({
  name: 'ProjectReset',
  tableName: 'project_resets',
  indexes: [{ properties: ['project', 'id'] }],
  uniques: [{ name: 'project_resets_one_running', expression: 'create unique index "project_resets_one_running" on "project_resets" ("project_id") where status = \'RUNNING\'' }],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    status: p.enum(['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED'] as const),
    workflowId: p.string(),
    requestedBy: p.uuid().nullable(),
    deleted: p.json<Record<string, number>>().default('{}'),
    error: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    finishedAt: p.datetime().nullable(),
  },
});
