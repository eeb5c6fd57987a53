import { z } from 'zod';
import type { User } from '../../domain/users/user.entity';
import { iso } from './time';

export const UserSchema = z
  .object({ id: z.string(), email: z.string(), name: z.string().nullable(), emailVerified: z.boolean(), createdAt: z.iso.datetime() })
  .meta({ id: 'User' });

export function presentUser(user: User): z.infer<typeof UserSchema> {
  return {
    id: user.id,
    email: user.email,
    name: user.name ?? null,
    emailVerified: Boolean(user.emailVerifiedAt),
    createdAt: iso(user.createdAt),
  };
}
