import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from './project.entity';
import { User } from '../users/user.entity';
import { ROLES } from './membership.entity';
import { uuidv7 } from '../ids';

/**
 * A pending invitation of an address that has no account yet (README › Teams and permissions): one per project and
 * address, replaced by a new invitation of the same address, deleted when it is accepted. The worker's
 * `invitationEmail` activity issues its token when it mails the link; only the token's SHA-256 is stored, with its
 * expiry (INVITATION_TTL). Until the email went out, both are null.
 */
export const Invitation = defineEntity({
  name: 'Invitation',
  tableName: 'invitations',
  uniques: [{ properties: ['project', 'email'] }],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade'),
    email: p.string().length(320),
    role: p.enum([...ROLES]),
    invitedBy: () => p.manyToOne(User).deleteRule('set null').nullable(),
    tokenHash: p.string().length(64).unique().nullable(),
    expiresAt: p.datetime().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Invitation = InferEntity<typeof Invitation>;
