import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * The event outbox (migration 20261123100000): written by a trigger on `events`, drained by event-dispatcher.ts,
 * inspected and replayed by outbox-admin.ts. Declared here so the schema snapshot knows the tables.
 */
export const OutboxConsumer = defineEntity({
  name: 'OutboxConsumer',
  tableName: 'event_consumers',
  properties: {
    name: p.string().length(100).primary(),
    registeredAt: p.datetime().defaultRaw('now()'),
    /** The event names the consumer handles (migration 20261124120000); null: every event. */
    eventNames: p.array<string>().columnType('text[]').nullable(),
    /** Only events of the projects listed for it in `event_consumer_projects` are queued for it (migration 20261127190000). */
    projectScoped: p.boolean().default(false),
  },
});

/**
 * The projects a `project_scoped` consumer wants events of (migration 20261127190000): for `webhooks-out`, those with
 * an enabled webhook endpoint, kept by a trigger on `webhook_endpoints`.
 */
export const OutboxConsumerProject = defineEntity({
  name: 'OutboxConsumerProject',
  tableName: 'event_consumer_projects',
  properties: {
    consumer: p.string().length(100).primary(),
    project: () => p.manyToOne(Project).primary().deleteRule('cascade').updateRule('no action'),
  },
});

export const OutboxEntry = defineEntity({
  name: 'OutboxEntry',
  tableName: 'event_outbox',
  indexes: [
    {
      name: 'event_outbox_retrying_index',
      expression: 'create index "event_outbox_retrying_index" on "event_outbox" ("consumer", "contact_id", "seq") where attempts > 0',
    },
  ],
  properties: {
    /** The consumer's name (no foreign key: see the migration). */
    consumer: p.string().length(100).primary(),
    shard: p.smallint().primary(),
    /** Outbox order: a contact's events are handed over in this order. */
    seq: p.bigint('number').primary().autoincrement(),
    eventId: p.uuid(),
    contactId: p.uuid(),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime().nullable(),
    lastError: p.text().nullable(),
    parkedAt: p.datetime().nullable(),
  },
});

/** What the probe consumer (EVENTS_PROBE) received: each event id once, when it first arrived, how many times. */
export const ProbeReceipt = defineEntity({
  name: 'ProbeReceipt',
  tableName: 'event_probe_receipts',
  properties: {
    eventId: p.uuid().primary(),
    receivedAt: p.datetime().defaultRaw('clock_timestamp()'),
    deliveries: p.integer().default(1),
  },
});

/**
 * Tallies (migration 20261127060000): counts the outbox carries without an event each (a campaign's sends, what
 * DELETE /events/:name takes back), taken by the analytics consumer. `key` is the metric (analytics_hourly) or the
 * event name (event_name_hourly).
 */
export const EventTally = defineEntity({
  name: 'EventTally',
  tableName: 'event_tallies',
  properties: {
    seq: p.bigint('number').primary().autoincrement(),
    projectId: p.uuid(),
    rollup: p.enum(['analytics_hourly', 'event_name_hourly']).columnType('varchar(40)'),
    key: p.string().length(200),
    hour: p.datetime(),
    count: p.bigint('number'),
    createdAt: p.datetime().defaultRaw('now()'),
  },
});
