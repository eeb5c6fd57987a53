import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { Contact } from '../contacts/contact.entity';

/**
 * Segments and their memberships (migration 20261122001000). The segment service works in SQL; these definitions
 * keep the schema snapshot complete.
 */
export const Segment = defineEntity({
  name: 'Segment',
  tableName: 'segments',
  uniques: [{ name: 'segments_project_id_slug_unique', properties: ['project', 'slug'] }],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    name: p.string().length(200),
    slug: p.string().length(64),
    description: p.text().nullable(),
    type: p.enum(['DYNAMIC', 'STATIC'] as const),
    condition: p.json<Record<string, unknown>>().nullable(),
    trackMembership: p.boolean().default(false),
    memberCount: p.bigint('number').default(0),
    countedAt: p.datetime().nullable(),
    computedAt: p.datetime().nullable(),
    // The last compute (migration 20261125100000; domain/segments/segment-compute.ts).
    computeRunId: p.string().length(64).nullable(),
    computeStatus: p.enum(['RUNNING', 'COMPLETED', 'FAILED'] as const).nullable(),
    computeStartedAt: p.datetime().nullable(),
    computeFinishedAt: p.datetime().nullable(),
    computeResult: p.json<Record<string, unknown>>().nullable(),
    computeError: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});

export const SegmentMembership = defineEntity({
  name: 'SegmentMembership',
  tableName: 'segment_memberships',
  properties: {
    segment: () => p.manyToOne(Segment).primary().deleteRule('cascade').updateRule('no action'),
    contact: () => p.manyToOne(Contact).primary().deleteRule('cascade').updateRule('no action').index('segment_memberships_contact_id_index'),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
