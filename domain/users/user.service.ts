import argon2 from 'argon2';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { User } from './user.entity';
import { AppError, conflict, unauthorized } from '../errors';
import { normalizeEmail } from '../contacts/email-address';

export async function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, { type: argon2.argon2id });
}

export async function signup(em: EntityManager, input: { email: string; password: string; name?: string }): Promise<User> {
  const email = normalizeEmail(input.email);
  const taken = () => conflict('EMAIL_TAKEN', 'An account with this email already exists', 'Log in instead, or reset the password.');
  if (await em.findOne(User, { email })) throw taken();
  const user = em.create(User, { email, name: input.name ?? null, passwordHash: await hashPassword(input.password) });
  try {
    await em.flush();
  } catch (err) {
    // Two signups with one email at once: both passed the check above (the hash takes a while); the unique index decides.
    if (err instanceof UniqueConstraintViolationException) throw taken();
    throw err;
  }
  return user;
}

// Verifying against a fixed hash when the user is unknown keeps the response time the same either way.
let dummyHash: Promise<string> | undefined;

export async function login(em: EntityManager, input: { email: string; password: string }): Promise<User> {
  const user = await em.findOne(User, { email: normalizeEmail(input.email) });
  dummyHash ??= hashPassword('mailwright-timing-equalizer');
  const ok = await argon2.verify(user?.passwordHash ?? (await dummyHash), input.password).catch(() => false);
  if (!user || !ok) throw unauthorized('INVALID_CREDENTIALS', 'Email or password is incorrect');
  return user;
}

export async function getUser(em: EntityManager, id: string): Promise<User> {
  const user = await em.findOne(User, { id });
  if (!user) throw new AppError(401, 'UNAUTHORIZED', 'Your session is no longer valid; log in again');
  return user;
}
