import { z } from 'zod';
import { emailString } from '../validation';
import { ROLES } from '../../domain/projects/membership.entity';
import { UserSchema } from '../presenters/user.presenter';

const uuid = () => z.uuid({ error: 'Must be a UUID' });
const RoleSchema = z.enum(ROLES).meta({ id: 'Role', description: 'OWNER, ADMIN or MEMBER (see the permission table in the README).' });

export const MemberParams = z.object({ id: uuid(), userId: uuid() });
export const InvitationParams = z.object({ id: uuid(), invitationId: uuid() });

export const InviteBody = z
  .object({
    email: emailString,
    role: RoleSchema.default('MEMBER').meta({ description: 'The role given (default MEMBER). Only an OWNER may invite an OWNER.' }),
  })
  .meta({ id: 'InviteMemberRequest' });

export const ChangeRoleBody = z.object({ role: RoleSchema }).meta({ id: 'ChangeMemberRoleRequest' });

export const MemberSchema = z
  .object({ userId: z.string(), email: z.string(), name: z.string().nullable(), role: RoleSchema, joinedAt: z.iso.datetime() })
  .meta({ id: 'ProjectMember' });

const InvitationSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    role: RoleSchema,
    invitedBy: z.string().nullable().meta({ description: 'The user id of who invited; null when that account is gone.' }),
    status: z.enum(['SENDING', 'PENDING', 'EXPIRED']).meta({ description: 'SENDING: the email is not out yet; PENDING: its link works until expiresAt; EXPIRED: invite again.' }),
    expiresAt: z.iso.datetime().nullable(),
    createdAt: z.iso.datetime(),
  })
  .meta({ id: 'ProjectInvitation' });

export const TeamSchema = z
  .object({ data: z.array(MemberSchema).meta({ description: 'Members, oldest first.' }), invitations: z.array(InvitationSchema).meta({ description: 'Pending invitations, newest first.' }) })
  .meta({ id: 'ProjectTeam' });

export const InviteResultSchema = z
  .discriminatedUnion('status', [
    z.object({ status: z.literal('ADDED'), member: MemberSchema }),
    z.object({ status: z.literal('INVITED'), invitation: InvitationSchema }),
  ])
  .meta({ id: 'InviteMemberResult' });

export const SetupStateSchema = z
  .object({
    domainAdded: z.boolean().meta({ description: 'A sender domain was added.' }),
    domainVerified: z.boolean().meta({ description: 'A sender domain is verified.' }),
    firstEmailSent: z.boolean().meta({ description: 'The relay accepted an email of the project (transactional or campaign; from the hourly rollups, seconds behind).' }),
    firstEventTracked: z.boolean().meta({ description: 'An event was tracked (/v1/track or the dashboard).' }),
    firstCampaignSent: z.boolean().meta({ description: 'A campaign started sending.' }),
    teamInvited: z.boolean().meta({ description: 'The project has a second member or a pending invitation.' }),
  })
  .meta({ id: 'ProjectSetupState' });

export const AcceptInvitationBody = z
  .object({
    token: z.string().min(1).max(200).meta({ description: 'The `token` parameter of the link in the invitation email' }),
    password: z.string().min(8, 'At least 8 characters').max(256).meta({ description: "The new account's password (not used when the address has an account by now)." }),
    name: z.string().min(1).max(200).optional(),
  })
  .meta({ id: 'AcceptInvitationRequest' });

export const InvitationAcceptedSchema = z
  .object({
    user: UserSchema,
    projectId: z.string(),
    role: RoleSchema,
    loggedIn: z.boolean().meta({ description: 'true: the account was created and this response set the session cookie; false: the address had an account, which now is a member (log in with it).' }),
  })
  .meta({ id: 'InvitationAccepted' });
