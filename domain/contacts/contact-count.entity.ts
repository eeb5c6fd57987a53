import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * Per-project contact counts, written only by database triggers (migration 20261121234500) and read by
 * contact-counts.ts. Declared here so the schema snapshot knows the tables.
 */
export const ContactCount = defineEntity({
  name: 'ContactCount',
  tableName: 'contact_counts',
  properties: {
    project: () => p.manyToOne(Project).primary().deleteRule('cascade').updateRule('no action'),
    total: p.bigint('number').default(0),
    subscribed: p.bigint('number').default(0),
  },
});

export const ContactCountDelta = defineEntity({
  name: 'ContactCountDelta',
  tableName: 'contact_count_deltas',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    projectId: p.uuid().index(),
    total: p.bigint('number'),
    subscribed: p.bigint('number'),
  },
});
