import { defineEntity, p } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { Contact } from '../contacts/contact.entity';

/*
 * Analytics rollups (migration 20261125120000): counts per project and hour, kept incrementally so that analytics
 * answer from a few hundred rows at any size instead of scanning emails and events. The `analytics` outbox consumer
 * writes them in the dispatcher's transaction (exactly once); campaign sends add their `sent` in the statement that
 * records the sends (campaign messages emit no `email.sent` events).
 */

/** Email metrics per hour: sent, delivered, opened, clicked, bounced, complained, unsubscribed, failed. */
export const AnalyticsHourly = defineEntity({
  name: 'AnalyticsHourly',
  tableName: 'analytics_hourly',
  properties: {
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action').primary(),
    metric: p.string().length(40).primary(),
    hour: p.datetime().primary(),
    count: p.bigint('number').default(0),
  },
});

/** Events per name and hour, service events (`system`) too: top events, event stats, activity stats. */
export const EventNameHourly = defineEntity({
  name: 'EventNameHourly',
  tableName: 'event_name_hourly',
  properties: {
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action').primary(),
    name: p.string().length(200).primary(),
    hour: p.datetime().primary(),
    count: p.bigint('number').default(0),
    /** A service event (email.*, contact.*, segment.*): not a tracked name. */
    system: p.boolean().default(false),
  },
});

/**
 * When each contact's latest event happened (migration 20261125130000), kept by the `analytics` consumer: the contacts
 * active in a window that ends now are those whose latest event falls in it, counted from an index.
 */
export const ContactLastEvent = defineEntity({
  name: 'ContactLastEvent',
  tableName: 'contact_last_event',
  indexes: [{ properties: ['projectId', 'at'] }],
  properties: {
    contact: () => p.manyToOne(Contact).deleteRule('cascade').updateRule('no action').primary(),
    projectId: p.uuid(),
    at: p.datetime(),
  },
});

/** Per project and UTC hour: how many contacts have their latest event in it (triggers on contact_last_event). */
export const ContactLastEventHourly = defineEntity({
  name: 'ContactLastEventHourly',
  tableName: 'contact_last_event_hourly',
  properties: {
    project: () => p.manyToOne(Project).deleteRule('cascade').updateRule('no action').primary(),
    hour: p.datetime().primary(),
    contacts: p.bigint('number').default(0),
  },
});
