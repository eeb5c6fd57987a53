import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Membership, type Role } from './membership.entity';
import { Invitation } from './invitation.entity';
import { assertMayManage } from './policy';
import { User } from '../users/user.entity';
import { hashPassword } from '../users/user.service';
import { hashToken } from '../auth/account-tokens';
import { normalizeEmail } from '../contacts/email-address';
import { AppError, conflict, notFound } from '../errors';
import { sql } from '../db/sql';

/** Who is acting: the caller and their role in the project (from the policy check). */
export interface Actor {
  userId: string;
  role: Role;
}

export interface MemberView {
  userId: string;
  email: string;
  name: string | null;
  role: Role;
  joinedAt: Date;
}

export interface InvitationView {
  id: string;
  email: string;
  role: Role;
  invitedBy: string | null;
  /** When the emailed link stops working; null until the email went out. */
  expiresAt: Date | null;
  createdAt: Date;
}

/**
 * Runs `fn` in a transaction that holds the project's row (FOR NO KEY UPDATE: child rows can still be inserted), so
 * membership changes of one project happen one at a time and "the last OWNER" is decided on what is committed.
 */
async function underProjectLock<T>(em: EntityManager, projectId: string, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    await sql(tx).run('select id from projects where id = $1 for no key update', [projectId]);
    return fn(tx);
  });
}

const lastOwner = (what: string) =>
  conflict('LAST_OWNER', `${what}: the project would have no OWNER left`, 'Make another member an OWNER first (PATCH /projects/:id/members/:userId), or delete the project.');

async function ownerCount(tx: EntityManager, projectId: string): Promise<number> {
  return tx.count(Membership, { project: projectId, role: 'OWNER' });
}

async function memberOf(tx: EntityManager, projectId: string, userId: string): Promise<Membership> {
  const membership = await tx.findOne(Membership, { project: projectId, user: userId });
  if (!membership) throw notFound('Member');
  return membership;
}

const toMemberView = (m: Membership, user: User): MemberView => ({ userId: user.id, email: user.email, name: user.name ?? null, role: m.role, joinedAt: m.createdAt });

const toInvitationView = (i: Invitation): InvitationView => ({
  id: i.id,
  email: i.email,
  role: i.role,
  invitedBy: i.invitedBy ? (i.invitedBy as unknown as { id: string }).id : null,
  expiresAt: i.expiresAt ?? null,
  createdAt: i.createdAt,
});

/** The project's members (oldest first) and its pending invitations (newest first). */
export async function listTeam(em: EntityManager, projectId: string): Promise<{ members: MemberView[]; invitations: InvitationView[] }> {
  const memberships = await em.find(Membership, { project: projectId }, { populate: ['user'], orderBy: { createdAt: 'asc' } });
  const invitations = await em.find(Invitation, { project: projectId }, { orderBy: { createdAt: 'desc' } });
  return {
    members: memberships.map((m) => toMemberView(m, m.user as unknown as User)),
    invitations: invitations.map(toInvitationView),
  };
}

export type InviteResult = { status: 'ADDED'; member: MemberView } | { status: 'INVITED'; invitation: InvitationView };

/**
 * Invites an address: a user with an account becomes a member at once; another address gets a pending invitation
 * (replacing an earlier one of the same address, whose link stops working), which the caller then mails.
 */
export async function inviteMember(em: EntityManager, projectId: string, actor: Actor, input: { email: string; role: Role }): Promise<InviteResult> {
  assertMayManage(actor.role, { next: input.role });
  const email = normalizeEmail(input.email);
  return underProjectLock(em, projectId, async (tx) => {
    const user = await tx.findOne(User, { email });
    if (user) {
      if (await tx.findOne(Membership, { project: projectId, user: user.id })) {
        throw conflict('ALREADY_MEMBER', `${email} is a member of the project already`, 'Change the role with PATCH /projects/:id/members/:userId.');
      }
      const membership = tx.create(Membership, { project: projectId, user: user.id, role: input.role });
      await tx.nativeDelete(Invitation, { project: projectId, email });
      await tx.flush();
      return { status: 'ADDED', member: toMemberView(membership, user) };
    }
    let invitation = await tx.findOne(Invitation, { project: projectId, email });
    if (invitation) Object.assign(invitation, { role: input.role, invitedBy: actor.userId, tokenHash: null, expiresAt: null, createdAt: new Date() });
    else invitation = tx.create(Invitation, { project: projectId, email, role: input.role, invitedBy: actor.userId });
    await tx.flush();
    return { status: 'INVITED', invitation: toInvitationView(invitation) };
  });
}

/** Revokes a pending invitation: its link stops working. */
export async function revokeInvitation(em: EntityManager, projectId: string, actor: Actor, invitationId: string): Promise<void> {
  const invitation = await em.findOne(Invitation, { id: invitationId, project: projectId });
  if (!invitation) throw notFound('Invitation');
  assertMayManage(actor.role, { next: invitation.role });
  await em.remove(invitation).flush();
}

/** Changes a member's role; the last OWNER cannot be demoted (409 LAST_OWNER). */
export async function changeMemberRole(em: EntityManager, projectId: string, actor: Actor, userId: string, role: Role): Promise<MemberView> {
  return underProjectLock(em, projectId, async (tx) => {
    const membership = await memberOf(tx, projectId, userId);
    assertMayManage(actor.role, { current: membership.role, next: role });
    if (membership.role === 'OWNER' && role !== 'OWNER' && (await ownerCount(tx, projectId)) <= 1) throw lastOwner('The last OWNER cannot be demoted');
    membership.role = role;
    await tx.flush();
    return toMemberView(membership, await tx.findOneOrFail(User, { id: userId }));
  });
}

/**
 * Removes a member, or lets the caller leave (`userId` is the actor's own). The last OWNER can do neither (409
 * LAST_OWNER). Access ends with the commit: every dashboard request checks the membership anew.
 */
export async function removeMember(em: EntityManager, projectId: string, actor: Actor, userId: string): Promise<void> {
  await underProjectLock(em, projectId, async (tx) => {
    const membership = await memberOf(tx, projectId, userId);
    if (userId !== actor.userId) assertMayManage(actor.role, { current: membership.role });
    if (membership.role === 'OWNER' && (await ownerCount(tx, projectId)) <= 1) throw lastOwner('The last OWNER cannot be removed or leave');
    await tx.remove(membership).flush();
  });
}

export interface AcceptedInvitation {
  user: User;
  projectId: string;
  role: Role;
  /** Whether the account was created now (and may be logged in); false: the address had an account already. */
  created: boolean;
}

const invalidInvitation = () =>
  new AppError(403, 'INVALID_TOKEN', 'This invitation link is invalid, has already been used, or has expired', {
    suggestion: "Ask the project's OWNER or an ADMIN to invite you again.",
  });

/**
 * Accepts an invitation by its token (once, before it expires): creates the account of the invited address with this
 * password (verified: the link proves the mailbox) and makes it a member with the invited role. An address that has
 * an account by now joins with it (the password is not used).
 */
export async function acceptInvitation(em: EntityManager, input: { token: string; password: string; name?: string }): Promise<AcceptedInvitation> {
  const passwordHash = await hashPassword(input.password);
  try {
    return await em.transactional(async (tx) => {
      const row = await sql(tx).one<{ project_id: string; email: string; role: Role }>(
        'delete from invitations where token_hash = $1 and expires_at > now() returning project_id, email, role',
        [hashToken(input.token)],
      );
      if (!row) throw invalidInvitation();
      let user = await tx.findOne(User, { email: row.email });
      const created = !user;
      user ??= tx.create(User, { email: row.email, name: input.name ?? null, passwordHash, emailVerifiedAt: new Date() });
      await tx.flush();
      // A member already (added meanwhile): the role they have stays.
      await sql(tx).run('insert into memberships (project_id, user_id, role) values ($1, $2, $3) on conflict do nothing', [row.project_id, user.id, row.role]);
      const membership = await sql(tx).one<{ role: Role }>('select role from memberships where project_id = $1 and user_id = $2', [row.project_id, user.id]);
      return { user, projectId: row.project_id, role: membership!.role, created };
    });
  } catch (err) {
    // A signup of the same address at the same moment: the invitation is kept (rolled back); accepting again joins.
    if (err instanceof UniqueConstraintViolationException) throw conflict('CONFLICT', 'An account with this address was created at the same moment; try again');
    throw err;
  }
}
