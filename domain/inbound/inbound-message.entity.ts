import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * A message the inbound SMTP server accepted (migration 20261127070000): stored before the 250, processed by the
 * `inbound-mail/<first id of its batch>` workflow (inbound.repository.ts, inbound-apply.ts). Declared here so the schema snapshot and
 * the row-type test know the table.
 */
export const InboundMessage = defineEntity({
  name: 'InboundMessage',
  tableName: 'inbound_messages',
  uniques: [
    { name: 'inbound_messages_digest_unique', properties: ['digest'] },
    { name: 'inbound_messages_source_ref_unique', properties: ['sourceRef'] },
  ],
  indexes: [
    { name: 'inbound_messages_pending_index', expression: `create index "inbound_messages_pending_index" on "inbound_messages" ("received_at") where status = 'RECEIVED'` },
    {
      name: 'inbound_messages_project_index',
      expression: 'create index "inbound_messages_project_index" on "inbound_messages" ("project_id", "received_at") where project_id is not null',
    },
  ],
  properties: {
    id: p.uuid().primary(),
    receivedAt: p.datetime().defaultRaw('now()'),
    /** SHA-256 of the bytes: the same message delivered twice is one row. */
    digest: p.blob(),
    mailFrom: p.string().length(998),
    rcptTo: p.array<string>().columnType('text[]'),
    remoteAddress: p.string().length(64).nullable(),
    helo: p.string().length(255).nullable(),
    size: p.integer(),
    /** Dropped INBOUND_RETENTION after processing. */
    raw: p.blob().nullable(),
    /** `smtp`: the inbound server took it; `imap`: read from the bounce mailbox (migration 20261127150000). */
    source: p.string().length(10).default('smtp'),
    /** A mailbox message's place on the server, `<user>@<host>:<port>/<folder>/<UIDVALIDITY>/<UID>`: read twice, stored once. */
    sourceRef: p.string().length(1100).nullable(),
    status: p.enum(['RECEIVED', 'PROCESSED', 'FAILED']).default('RECEIVED'),
    startedAt: p.datetime().nullable(),
    /** The `inbound-mail/<first id of its batch>` run that processes it (migration 20261127130000). */
    workflowId: p.string().length(255).nullable(),
    processedAt: p.datetime().nullable(),
    kind: p.string().length(20).nullable(),
    outcome: p.json<Record<string, unknown>>().nullable(),
    project: () => p.manyToOne(Project).nullable().deleteRule('cascade').updateRule('no action'),
    emailId: p.uuid().nullable(),
    contactId: p.uuid().nullable(),
  },
});
