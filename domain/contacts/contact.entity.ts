import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';

export type ContactData = Record<string, unknown>;

export const Contact = defineEntity({
  name: 'Contact',
  tableName: 'contacts',
  uniques: [{ properties: ['project', 'email'] }],
  indexes: [
    { properties: ['project', 'id'] },
    { name: 'contacts_email_trgm_index', expression: 'create index "contacts_email_trgm_index" on "contacts" using gin ("email" gin_trgm_ops)' },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade'),
    /** Stored normalized: trimmed and lowercased. */
    email: p.string().length(320),
    subscribed: p.boolean(),
    data: p.json<ContactData>().default('{}'),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Contact = InferEntity<typeof Contact>;
