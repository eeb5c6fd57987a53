import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/** A suspension of a project's marketing sends (migration 20261125130300, domain/reputation/reputation.ts). */
export const ProjectSuspension = defineEntity({
  name: 'ProjectSuspension',
  tableName: 'project_suspensions',
  indexes: [{ properties: ['project', 'id'] }],
  uniques: [{ name: 'project_suspensions_one_active', expression: 'create unique index "project_suspensions_one_active" on "project_suspensions" ("project_id") where lifted_at is null' }],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    reason: p.enum(['BOUNCE_RATE', 'COMPLAINT_RATE'] as const),
    sent: p.bigint('number'),
    bounced: p.bigint('number'),
    complained: p.bigint('number'),
    bounceRate: p.double(),
    complaintRate: p.double(),
    /** The start of the window the rates were measured over. */
    windowFrom: p.datetime(),
    createdAt: p.datetime().defaultRaw('now()'),
    /** When the owners were emailed. */
    notifiedAt: p.datetime().nullable(),
    liftedAt: p.datetime().nullable(),
    liftedBy: p.uuid().nullable(),
  },
});
