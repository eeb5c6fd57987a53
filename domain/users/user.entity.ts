import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { uuidv7 } from '../ids';

export const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    email: p.string().length(320).unique(),
    name: p.string().nullable(),
    passwordHash: p.string().hidden(),
    emailVerifiedAt: p.datetime().nullable(),
    /** Carried by every session cookie; a password reset increments it, which ends the sessions issued before. */
    sessionVersion: p.integer().default(0),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type User = InferEntity<typeof User>;
