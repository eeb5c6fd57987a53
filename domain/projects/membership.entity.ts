import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from './project.entity';
import { User } from '../users/user.entity';

export const ROLES = ['OWNER', 'ADMIN', 'MEMBER'] as const;
export type Role = (typeof ROLES)[number];

export const Membership = defineEntity({
  name: 'Membership',
  tableName: 'memberships',
  properties: {
    project: () => p.manyToOne(Project).primary().deleteRule('cascade'),
    user: () => p.manyToOne(User).primary().deleteRule('cascade'),
    role: p.enum([...ROLES]),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
  },
});
export type Membership = InferEntity<typeof Membership>;
