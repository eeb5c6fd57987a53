import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { Contact } from '../contacts/contact.entity';
import { uuidv7 } from '../ids';

/** SUPPRESSED: never sent, because the address is on the project's suppression list (domain/suppressions); final. */
export const EMAIL_STATUSES = ['QUEUED', 'SENDING', 'SENT', 'DELIVERED', 'BOUNCED', 'FAILED', 'CANCELLED', 'SUPPRESSED'] as const;
type EmailStatus = (typeof EMAIL_STATUSES)[number];
/** TRANSACTIONAL mail reaches unsubscribed contacts; MARKETING mail never does. */
export type EmailKind = 'TRANSACTIONAL' | 'MARKETING';

export interface Address {
  email: string;
  name?: string;
}

/** One row per message: what was accepted, and what happened to it. */
export const Email = defineEntity({
  name: 'Email',
  tableName: 'emails',
  indexes: [
    { properties: ['project', 'createdAt'] },
    { properties: ['contact', 'createdAt'] },
    // The stranded-mail sweeper's (domain/emails/delivery.ts `findStrandedEmails`): only the non-campaign emails no
    // delivery attempt has claimed yet. `status` itself is indexed nowhere, so a status change alone (every campaign
    // send's outcome, a transactional email's SENT) is a HOT update: no new entry in any index (BENCHMARKS.md ›
    // Issue 28, twelfth stop).
    {
      name: 'emails_queued_at_index',
      expression: 'create index "emails_queued_at_index" on "emails" ("queued_at") where "queued_at" is not null',
    },
    // A campaign's recipients: one row per (campaign, contact) (the snapshot's dedupe), scanned in contact order by
    // the send activity. Partial, so transactional mail pays nothing for it.
    {
      name: 'emails_campaign_id_contact_id_unique',
      expression: 'create unique index "emails_campaign_id_contact_id_unique" on "emails" ("campaign_id", "contact_id") where "campaign_id" is not null',
    },
    // Reports that name a message by the relay's id (domain/webhooks/provider-reports.ts); partial: most relays name none.
    {
      name: 'emails_provider_message_id_index',
      expression: 'create index "emails_provider_message_id_index" on "emails" ("provider_message_id") where "provider_message_id" is not null',
    },
  ],
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
    /**
     * When a transactional email was accepted, while no delivery attempt has claimed it yet; null once one has, and
     * always for campaign and automation emails (their sends walk their own rows). The sweeper finds stranded mail by it.
     */
    queuedAt: p.datetime().nullable(),
    /** Temporal workflow that delivers this message. */
    workflowId: p.string().nullable(),
    messageId: p.string().nullable(),
    smtpResponse: p.text().nullable(),
    /** The relay's id of the message, from its acceptance (`250 Ok: queued as <id>`); provider reports may name only it. */
    providerMessageId: p.string().nullable(),
    error: p.text().nullable(),
    attempts: p.integer().default(0),
    sentAt: p.datetime().nullable(),
    /** The relay reported delivery (a DSN or provider webhook); SMTP acceptance alone is SENT. */
    deliveredAt: p.datetime().nullable(),
    /** The template it was rendered from; no foreign key, so deleting a template keeps its sent mail's history. */
    templateId: p.uuid().nullable(),
    /** The campaign this message belongs to; its body is rendered at send time and not stored (`html` is empty). */
    campaignId: p.uuid().nullable(),
    /** An A/B-tested campaign's test share (0-based variant); null for its remainder and for every other email. */
    variant: p.smallint().nullable(),
    firstOpenedAt: p.datetime().nullable(),
    firstClickedAt: p.datetime().nullable(),
    openCount: p.integer().default(0),
    clickCount: p.integer().default(0),
    attachmentIds: p.array<string>().columnType('uuid[]').default('{}'),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Email = InferEntity<typeof Email>;

/** An `emails` row as raw queries read and write it (domain/db/rows.ts): every column, relations as ids. */
export type EmailRow = { [K in Exclude<keyof Email, 'project' | 'contact' | 'kind' | 'status'>]-?: Exclude<Email[K], undefined> } & {
  projectId: string;
  contactId: string | null;
  kind: EmailKind;
  status: EmailStatus;
};

/**
 * An attachment's bytes (never in a Temporal payload), loaded when an email carrying it is sent. One /v1/send call
 * stores each attachment once, however many recipients it has; the emails list the ids (`attachmentIds`) in order.
 */
export const EmailAttachment = defineEntity({
  name: 'EmailAttachment',
  tableName: 'email_attachments',
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').index(),
    filename: p.string(),
    contentType: p.string(),
    disposition: p.string().length(16).default('attachment'),
    contentId: p.string().nullable(),
    size: p.integer(),
    content: p.blob(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type EmailAttachment = InferEntity<typeof EmailAttachment>;

/** The first response to an `Idempotency-Key` of a project, replayed for 24 hours to a retry with the same body. */
export const IdempotencyKey = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_keys',
  indexes: [{ properties: ['createdAt'] }],
  properties: {
    project: () => p.manyToOne(Project).primary().deleteRule('cascade'),
    key: p.string().primary(),
    requestHash: p.string().length(64),
    statusCode: p.integer().nullable(),
    response: p.json<unknown>().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type IdempotencyKey = InferEntity<typeof IdempotencyKey>;
