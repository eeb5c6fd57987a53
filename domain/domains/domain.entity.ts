import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';

export const DOMAIN_STATUSES = ['PENDING', 'VERIFIED'] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];

/** A sender domain. Mail may only be sent from an address on a VERIFIED domain of the project. */
export const Domain = defineEntity({
  name: 'Domain',
  tableName: 'domains',
  uniques: [{ properties: ['project', 'name'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').index(),
    /** Lowercased, without a trailing dot. */
    name: p.string().length(253).index(),
    status: p.enum([...DOMAIN_STATUSES]).default('PENDING'),
    verifiedAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Domain = InferEntity<typeof Domain>;
