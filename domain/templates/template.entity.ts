import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';

export const TEMPLATE_TYPES = ['TRANSACTIONAL', 'MARKETING'] as const;
export type TemplateType = (typeof TEMPLATE_TYPES)[number];

/**
 * A reusable email (migration 20261122010000): Liquid subject and HTML/MJML body, plus optional sender settings.
 * `from` is stored as `from_email` so raw SQL never has to quote the keyword.
 */
export const Template = defineEntity({
  name: 'Template',
  tableName: 'templates',
  // Lists are one project's templates, newest first (UUIDv7 ids); the index also serves the project's cascade delete.
  indexes: [{ properties: ['project', 'id'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    name: p.string().length(200),
    subject: p.string().length(998),
    body: p.text(),
    type: p.enum([...TEMPLATE_TYPES]),
    from: p.string().length(320).nullable().fieldName('from_email'),
    fromName: p.string().length(200).nullable(),
    replyTo: p.string().length(320).nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Template = InferEntity<typeof Template>;
