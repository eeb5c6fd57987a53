import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';

/**
 * A project's billing state (migration 20261125160000): its plan, the caps it set itself (null: none) and its Stripe
 * customer and subscription. No row: the default plan, no caps of its own, no customer.
 */
export const ProjectBilling = defineEntity({
  name: 'ProjectBilling',
  tableName: 'project_billing',
  properties: {
    project: () => p.manyToOne(Project).primary().deleteRule('cascade').updateRule('no action'),
    plan: p.string().length(64).default('free'),
    emailsPerMonth: p.bigint('number').nullable(),
    contacts: p.bigint('number').nullable(),
    eventsPerMonth: p.bigint('number').nullable(),
    stripeCustomerId: p.string().nullable().unique(),
    stripeSubscriptionId: p.string().nullable(),
    subscriptionStatus: p.string().length(40).nullable(),
    /** When the Stripe event last applied was created: an older event delivered late does not undo a newer one. */
    stripeEventAt: p.datetime().nullable(),
    updatedAt: p.datetime().defaultRaw('now()').onUpdate(() => new Date()),
  },
});
export type ProjectBilling = InferEntity<typeof ProjectBilling>;
