import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { Contact } from '../contacts/contact.entity';
import { uuidv7 } from '../ids';

export const EMAIL_STATUSES = ['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'FAILED', 'CANCELLED'] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

export interface Address {
  email: string;
  name?: string;
}

/** One row per message: what was accepted, and what happened to it. */
export const Email = defineEntity({
  name: 'Email',
  tableName: 'emails',
  indexes: [{ properties: ['project', 'createdAt'] }, { properties: ['contact', 'createdAt'] }, { properties: ['status'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade'),
    contact: () => p.manyToOne(Contact).nullable().deleteRule('set null'),
    /** TRANSACTIONAL mail reaches unsubscribed contacts; MARKETING mail never does. */
    kind: p.enum(['TRANSACTIONAL', 'MARKETING'] as const),
    toEmail: p.string().length(320),
    toName: p.string().nullable(),
    fromEmail: p.string().length(320),
    fromName: p.string().nullable(),
    replyTo: p.string().length(320).nullable(),
    subject: p.text(),
    html: p.text(),
    text: p.text().nullable(),
    headers: p.json<Record<string, string>>().default('{}'),
    status: p.enum([...EMAIL_STATUSES]).default('QUEUED'),
    /** Temporal workflow that delivers this message. */
    workflowId: p.string().nullable(),
    messageId: p.string().nullable(),
    smtpResponse: p.text().nullable(),
    error: p.text().nullable(),
    attempts: p.integer().default(0),
    sentAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Email = InferEntity<typeof Email>;
