import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { Contact } from '../contacts/contact.entity';
import { uuidv7 } from '../ids';

/** A tracked or service-emitted event. Tracking the same name again creates a new row. */
export const Event = defineEntity({
  name: 'Event',
  tableName: 'events',
  indexes: [
    { properties: ['project', 'name', 'contact', 'createdAt'] },
    { properties: ['contact', 'id'] },
    { properties: ['project', 'id'] },
    {
      name: 'events_project_id_created_at_id_index',
      expression: 'create index "events_project_id_created_at_id_index" on "events" ("project_id", "created_at", "id") include ("name", "source")',
    },
    {
      name: 'events_project_id_campaign_id_created_at_index',
      expression:
        'create index "events_project_id_campaign_id_created_at_index" on "events" ("project_id", "campaign_id", "created_at", "id") where campaign_id is not null',
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade'),
    contact: () => p.manyToOne(Contact).deleteRule('cascade'),
    name: p.string().length(200),
    data: p.json<Record<string, unknown>>().default('{}'),
    /** TRACKED for client events, SYSTEM for events the service emits (email.*, contact.*, segment.*). */
    source: p.enum(['TRACKED', 'SYSTEM'] as const),
    emailId: p.uuid().nullable(),
    /** The campaign of the email the event reports on: set by the `events_campaign` trigger from `emails`. */
    campaignId: p.uuid().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type Event = InferEntity<typeof Event>;

/** An `events` row as raw queries read and write it (domain/db/rows.ts): every column, relations as ids. */
export type EventColumns = { [K in Exclude<keyof Event, 'project' | 'contact' | 'source'>]-?: Exclude<Event[K], undefined> } & {
  projectId: string;
  contactId: string;
  source: 'TRACKED' | 'SYSTEM';
};
