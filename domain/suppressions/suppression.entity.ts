import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * Why an address is suppressed. An unsubscribe is not among them: it is the contact's subscription, which stops
 * marketing mail only, while a suppression stops every send (receipts and password resets too), because the address
 * itself cannot or must not receive mail from this project.
 * - `hard_bounce`: a permanent failure for the address (a 5xx from the relay about the recipient, a permanent bounce report);
 * - `complaint`: the recipient reported the project's mail as spam;
 * - `soft_bounce_limit`: SUPPRESS_SOFT_BOUNCES transient bounces of different emails within the window;
 * - `manual`: added through the API.
 */
export const SUPPRESSION_REASONS = ['hard_bounce', 'complaint', 'soft_bounce_limit', 'manual'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

/**
 * Who reported it: the relay's reply while sending (`smtp`), a delivery status notification or a feedback report that
 * came back by mail (`dsn`, `arf`), Amazon SES (`ses`), or the API (`api`). An open set (a lowercase word), so a new
 * provider's reports need no migration.
 */
export type SuppressionSource = 'smtp' | 'dsn' | 'arf' | 'ses' | 'api' | (string & {});

/**
 * The per-project suppression list (migration 20261127100000): one row per address that no send path mails. Keyed by
 * the project and the address, normalized as contacts' emails are; `id` (UUIDv7) orders the list newest first.
 */
export const Suppression = defineEntity({
  name: 'Suppression',
  tableName: 'suppressions',
  uniques: [{ name: 'suppressions_project_id_email_unique', properties: ['project', 'email'] }],
  indexes: [
    { name: 'suppressions_project_id_id_index', properties: ['project', 'id'] },
    { name: 'suppressions_project_id_reason_id_index', properties: ['project', 'reason', 'id'] },
  ],
  properties: {
    id: p.uuid().primary(),
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action'),
    email: p.string().length(320),
    reason: p.enum([...SUPPRESSION_REASONS]),
    source: p.string().length(32),
    /** What the reporter said: the SMTP reply, a bounce's diagnostic code, a complaint's feedback type, a note. */
    detail: p.text().nullable(),
    /** The email whose bounce or complaint suppressed the address (no foreign key: the entry outlives the email). */
    emailId: p.uuid().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
    /** Changes when a softer reason is replaced by a harder one (a soft-bounce limit by a hard bounce or complaint). */
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type Suppression = InferEntity<typeof Suppression>;

/** A `suppressions` row as raw queries read it (domain/db/rows.ts): every column, the project as its id. */
export type SuppressionRow = { [K in Exclude<keyof Suppression, 'project' | 'reason' | 'source'>]-?: Exclude<Suppression[K], undefined> } & {
  projectId: string;
  reason: SuppressionReason;
  source: SuppressionSource;
};

/**
 * One transient bounce of one email to an address, counted towards SUPPRESS_SOFT_BOUNCES within
 * SUPPRESS_SOFT_BOUNCE_WINDOW_DAYS. Keyed by the email too, so a second report about the same email counts once. Rows
 * past the window are deleted as the project's next soft bounce is recorded, and an address's rows go when it is
 * reactivated (so it starts counting afresh).
 */
export const SuppressionSoftBounce = defineEntity({
  name: 'SuppressionSoftBounce',
  tableName: 'suppression_soft_bounces',
  properties: {
    project: () => p.manyToOne(Project).primary().deleteRule('cascade').updateRule('no action'),
    email: p.string().length(320).primary(),
    emailId: p.uuid().primary(),
    source: p.string().length(32),
    detail: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
