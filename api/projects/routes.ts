import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { IdParams, errorResponses } from '../common.schema';
import {
  AcceptInvitationBody,
  ChangeRoleBody,
  InvitationAcceptedSchema,
  InvitationParams,
  InviteBody,
  InviteResultSchema,
  MemberParams,
  MemberSchema,
  SetupStateSchema,
  TeamSchema,
} from './schema';
import { presentUser } from '../presenters/user.presenter';
import { setSessionCookie } from '../middleware/auth';
import {
  acceptInvitation,
  changeMemberRole,
  inviteMember,
  listTeam,
  removeMember,
  revokeInvitation,
  type InvitationView,
  type MemberView,
} from '../../domain/projects/members.service';
import { setupState } from '../../domain/projects/setup-state';
import { serviceUnavailable } from '../../domain/errors';

const TAGS = ['Team'];

const presentMember = (m: MemberView) => ({ ...m, joinedAt: m.joinedAt.toISOString() });

function presentInvitation(i: InvitationView) {
  const status = !i.expiresAt ? 'SENDING' : i.expiresAt.getTime() > Date.now() ? 'PENDING' : 'EXPIRED';
  return { ...i, status: status as 'SENDING' | 'PENDING' | 'EXPIRED', expiresAt: i.expiresAt?.toISOString() ?? null, createdAt: i.createdAt.toISOString() };
}

/** Team management, invitations and the onboarding state (README › Teams and permissions). */
export function projectRoutes(routes: Routes, deps: ApiDeps): void {
  routes.add({
    method: 'get',
    path: '/projects/:id/members',
    summary: "The project's members and pending invitations",
    tags: TAGS,
    auth: 'session',
    permission: 'project.read',
    params: IdParams,
    responses: { 200: { description: 'Members (oldest first) and pending invitations (newest first)', schema: TeamSchema } },
    handler: async ({ ctx, params, member }) => {
      const { project } = await member(params.id);
      const team = await listTeam(ctx.state.em, project.id);
      return { body: { data: team.members.map(presentMember), invitations: team.invitations.map(presentInvitation) } };
    },
  });

  routes.add({
    method: 'post',
    path: '/projects/:id/members',
    summary: 'Invite a member by email',
    description:
      'A user with an account becomes a member at once (201 `ADDED`). Another address gets an invitation email from SYSTEM_EMAIL_FROM whose link ' +
      '(`<PUBLIC_URL>/accept-invitation?token=…`, single-use, valid INVITATION_TTL, 7 days by default) creates the account in the project through ' +
      '`POST /auth/accept-invitation` (202 `INVITED`); inviting the address again replaces the invitation and its link. Only an OWNER invites an OWNER. ' +
      '409 ALREADY_MEMBER for a member.',
    tags: TAGS,
    auth: 'session',
    permission: 'members.invite',
    params: IdParams,
    body: InviteBody,
    responses: {
      201: { description: 'The user had an account and is a member now', schema: InviteResultSchema },
      202: { description: 'An invitation email is on its way', schema: InviteResultSchema },
      ...errorResponses(409, 503),
    },
    handler: async ({ ctx, params, body, userId, member, afterCommit }) => {
      const { project, role } = await member(params.id);
      const result = await inviteMember(ctx.state.em, project.id, { userId, role }, body);
      if (result.status === 'ADDED') return { status: 201, body: { status: result.status, member: presentMember(result.member) } };
      // Once the invitation is committed: the email's activity reads it.
      const { invitation } = result;
      afterCommit(async () => {
        try {
          await deps.temporal.startInvitationEmail({ projectId: project.id, invitationId: invitation.id, requestId: ctx.state.requestId });
        } catch (err) {
          ctx.state.log.error({ err }, 'invitation email not started');
          throw serviceUnavailable('The invitation is saved, but its email could not be queued; invite the address again to send it');
        }
      });
      return { status: 202, body: { status: result.status, invitation: presentInvitation(result.invitation) } };
    },
  });

  routes.add({
    method: 'patch',
    path: '/projects/:id/members/:userId',
    summary: "Change a member's role",
    description: 'An ADMIN changes MEMBERs and ADMINs; only an OWNER makes or changes an OWNER. The last OWNER cannot be demoted (409 LAST_OWNER).',
    tags: TAGS,
    auth: 'session',
    permission: 'members.update',
    params: MemberParams,
    body: ChangeRoleBody,
    responses: { 200: { description: 'The member with the new role', schema: MemberSchema }, ...errorResponses(409) },
    handler: async ({ ctx, params, body, userId, member }) => {
      const { project, role } = await member(params.id);
      return { body: presentMember(await changeMemberRole(ctx.state.em, project.id, { userId, role }, params.userId, body.role)) };
    },
  });

  routes.add({
    method: 'delete',
    path: '/projects/:id/members/:userId',
    summary: 'Remove a member, or leave the project (your own userId)',
    description:
      'An ADMIN removes MEMBERs and ADMINs; only an OWNER removes an OWNER; any member may leave (your own userId). ' +
      'The last OWNER can do neither (409 LAST_OWNER). The removed user loses access at once: their next request for the project is 404.',
    tags: TAGS,
    auth: 'session',
    permission: 'members.remove',
    permissionSelf: 'members.leave',
    params: MemberParams,
    responses: { 204: { description: 'Removed' }, ...errorResponses(409) },
    handler: async ({ ctx, params, userId, member }) => {
      const { project, role } = await member(params.id);
      await removeMember(ctx.state.em, project.id, { userId, role }, params.userId);
      return {};
    },
  });

  routes.add({
    method: 'delete',
    path: '/projects/:id/invitations/:invitationId',
    summary: 'Revoke a pending invitation',
    description: 'Its link stops working. Only an OWNER revokes an invitation to the OWNER role.',
    tags: TAGS,
    auth: 'session',
    permission: 'members.invite',
    params: InvitationParams,
    responses: { 204: { description: 'Revoked' } },
    handler: async ({ ctx, params, userId, member }) => {
      const { project, role } = await member(params.id);
      await revokeInvitation(ctx.state.em, project.id, { userId, role }, params.invitationId);
      return {};
    },
  });

  routes.add({
    method: 'get',
    path: '/projects/:id/setup-state',
    summary: "The project's onboarding state",
    description: 'Each step as a boolean: a sender domain added and verified, the first email sent, the first event tracked, the first campaign sent, the team invited.',
    tags: TAGS,
    auth: 'session',
    permission: 'project.read',
    params: IdParams,
    responses: { 200: { description: 'The onboarding checklist', schema: SetupStateSchema } },
    handler: async ({ ctx, params, member }) => {
      const { project } = await member(params.id);
      return { body: await setupState(ctx.state.em, project.id) };
    },
  });

  routes.add({
    method: 'post',
    path: '/auth/accept-invitation',
    summary: 'Join a project with the token of an invitation email',
    description:
      'Creates the account of the invited address with this password (its email verified: the link proves the mailbox), makes it a member with the ' +
      'invited role and logs in (201, session cookie). An address that has an account by now joins with it instead, without logging in (200). Works ' +
      'when signup is disabled. The token works once, before it expires (INVITATION_TTL); 403 INVALID_TOKEN otherwise.',
    tags: ['Dashboard auth'],
    auth: 'none',
    body: AcceptInvitationBody,
    responses: {
      201: { description: 'Account created, member, logged in', schema: InvitationAcceptedSchema },
      200: { description: 'The existing account is a member now (not logged in)', schema: InvitationAcceptedSchema },
      ...errorResponses(403, 409),
    },
    handler: async ({ ctx, body }) => {
      const accepted = await acceptInvitation(ctx.state.em, body);
      if (accepted.created) setSessionCookie(ctx, deps, accepted.user);
      return {
        status: accepted.created ? 201 : 200,
        body: { user: presentUser(accepted.user), projectId: accepted.projectId, role: accepted.role, loggedIn: accepted.created },
      };
    },
  });
}
