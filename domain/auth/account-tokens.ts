import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { AccountToken, type AccountTokenPurpose } from './account.entities';
import { User } from '../users/user.entity';
import { AppError } from '../errors';
import { hashPassword } from '../users/user.service';
import { sql } from '../db/sql';

/** The stored form of a token: its SHA-256 in hex. */
export const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

/** A token for a link in mail: 256 random bits, base64url. */
const newToken = (): string => randomBytes(32).toString('base64url');

const invalidToken = (purpose: AccountTokenPurpose) =>
  new AppError(403, 'INVALID_TOKEN', 'This link is invalid, has already been used, or has expired', {
    suggestion: purpose === 'VERIFY_EMAIL' ? 'Ask for a new one: POST /auth/request-verification.' : 'Ask for a new one: POST /auth/request-password-reset.',
  });

/**
 * Issues a token of `purpose` for the user and returns it (256 random bits, base64url) for the email; only its hash is
 * stored. It replaces the user's earlier tokens of that purpose: only the newest link works.
 */
export async function issueAccountToken(em: EntityManager, user: Pick<User, 'id' | 'email'>, purpose: AccountTokenPurpose, ttlMs: number): Promise<string> {
  const token = newToken();
  await em.transactional(async (tx) => {
    await tx.nativeDelete(AccountToken, { user: user.id, purpose });
    tx.create(AccountToken, { user: user.id, purpose, tokenHash: hashToken(token), email: user.email, expiresAt: new Date(Date.now() + ttlMs) });
  });
  return token;
}

/**
 * Marks the token used and runs `apply` with its user, in one transaction: the token is spent only if `apply`
 * succeeds, and of two concurrent uses one finds it spent (the conditional update takes the row lock).
 */
async function consumeToken<T>(em: EntityManager, token: string, purpose: AccountTokenPurpose, apply: (tx: EntityManager, userId: string, email: string) => Promise<T | undefined>): Promise<T> {
  return em.transactional(async (tx) => {
    const row = await sql(tx).one<{ user_id: string; email: string }>(
      `update account_tokens set used_at = now() where token_hash = $1 and purpose = $2 and used_at is null and expires_at > now() returning user_id, email`,
      [hashToken(token), purpose],
    );
    const result = row ? await apply(tx, row.user_id, row.email) : undefined;
    if (result === undefined) throw invalidToken(purpose);
    return result;
  });
}

/** Marks the account's email verified, if the token was sent to the address the account still has. */
export async function verifyEmail(em: EntityManager, token: string): Promise<User> {
  const userId = await consumeToken(em, token, 'VERIFY_EMAIL', async (tx, id, email) => {
    const row = await sql(tx).one<{ id: string }>(`update users set email_verified_at = coalesce(email_verified_at, now()), updated_at = now() where id = $1 and email = $2 returning id`, [id, email]);
    return row?.id;
  });
  return em.findOneOrFail(User, { id: userId }, { refresh: true });
}

/**
 * Sets a new password and increments the session version (every session issued before stops working); the
 * address is verified by the same token, which proves the user reads its mail.
 */
export async function resetPassword(em: EntityManager, token: string, password: string): Promise<User> {
  const passwordHash = await hashPassword(password);
  const userId = await consumeToken(em, token, 'RESET_PASSWORD', async (tx, id, email) => {
    const row = await sql(tx).one<{ id: string }>(
      `update users set password_hash = $1, session_version = session_version + 1, email_verified_at = coalesce(email_verified_at, now()), updated_at = now()
       where id = $2 and email = $3 returning id`,
      [passwordHash, id, email],
    );
    return row?.id;
  });
  return em.findOneOrFail(User, { id: userId }, { refresh: true });
}

/** What an invitation email says, read when its token is issued. */
interface IssuedInvitation {
  email: string;
  role: string;
  projectName: string;
  inviterName: string | null;
  inviterEmail: string | null;
}

/**
 * Issues the token of a pending invitation (it replaces the invitation's earlier one, and its expiry starts now) and
 * returns it with what the email says; undefined when the invitation is gone (accepted or revoked).
 */
export async function issueInvitationToken(em: EntityManager, invitationId: string, ttlMs: number): Promise<{ token: string; invitation: IssuedInvitation } | undefined> {
  const token = newToken();
  const row = await sql(em).one<{ email: string; role: string; project_name: string; inviter_name: string | null; inviter_email: string | null }>(
    `with issued as (
       update invitations set token_hash = $1, expires_at = now() + $2::double precision * interval '1 millisecond', updated_at = now() where id = $3
       returning email, role, project_id, invited_by_id)
     select i.email, i.role, p.name as project_name, u.name as inviter_name, u.email as inviter_email
       from issued i join projects p on p.id = i.project_id left join users u on u.id = i.invited_by_id`,
    [hashToken(token), ttlMs, invitationId],
  );
  if (!row) return undefined;
  return { token, invitation: { email: row.email, role: row.role, projectName: row.project_name, inviterName: row.inviter_name, inviterEmail: row.inviter_email } };
}
