import type { EntityManager } from '@mikro-orm/postgresql';
import { Membership, type Role } from './membership.entity';
import type { Project } from './project.entity';
import { AppError, notFound } from '../errors';

/**
 * Who may do what in a project: the one permission table (README › Teams and permissions, checked against this list
 * by test/unit/policy.test.ts). A dashboard route that takes a project names its action (`permission` in
 * api/route.ts); the route's `member(projectId)` loads the caller's membership and refuses a role below the action's.
 * A user who is not a member gets 404 (the project's existence is not revealed), a member whose role is too low 403.
 */
export const PERMISSIONS = {
  'project.read': ['MEMBER', 'See the project: its members and pending invitations, its onboarding state (setup-state) and its other dashboard pages'],
  'events.track': ['MEMBER', 'Track an event from the dashboard (POST /events/track)'],
  'members.leave': ['MEMBER', 'Leave the project (DELETE of your own member entry), unless you are its last OWNER'],
  'project.update': ['ADMIN', 'Change the project name and settings'],
  'project.rotateKeys': ['ADMIN', 'Rotate both API keys'],
  'members.invite': ['ADMIN', 'Invite members and revoke invitations (an ADMIN invites MEMBERs and ADMINs; only an OWNER invites an OWNER)'],
  'members.update': ['ADMIN', "Change a member's role (an ADMIN changes MEMBERs and ADMINs; only an OWNER makes or changes an OWNER)"],
  'members.remove': ['ADMIN', 'Remove a member (an ADMIN removes MEMBERs and ADMINs; only an OWNER removes an OWNER)'],
  'project.delete': ['OWNER', 'Delete the project and all its data'],
  'project.reset': ['OWNER', "Reset the project's data and list its resets"],
  'reputation.read': ['MEMBER', 'See the sending reputation: bounce and complaint rates, thresholds, suspensions'],
  'reputation.lift': ['OWNER', "Lift a suspension of the project's marketing sends"],
} as const satisfies Record<string, readonly [Role, string]>;

export type ProjectAction = keyof typeof PERMISSIONS;

const ROLE_RANK: Record<Role, number> = { MEMBER: 1, ADMIN: 2, OWNER: 3 };

/** The least role an action needs. */
export const minimumRole = (action: ProjectAction): Role => PERMISSIONS[action][0];

/** Whether `role` may perform `action`. */
export const roleAllows = (role: Role, action: ProjectAction): boolean => ROLE_RANK[role] >= ROLE_RANK[minimumRole(action)];

const forbidden = (message: string) => new AppError(403, 'FORBIDDEN', message, { suggestion: 'Ask an OWNER or ADMIN of the project; see the permission table in the API documentation.' });

export interface ProjectMember {
  project: Project;
  role: Role;
}

/** The caller's membership of the project, if it allows `action`: 404 when not a member, 403 when the role is too low. */
export async function authorize(em: EntityManager, userId: string, projectId: string, action: ProjectAction): Promise<ProjectMember> {
  const membership = await em.findOne(Membership, { user: userId, project: projectId }, { populate: ['project'] });
  if (!membership) throw notFound('Project');
  if (!roleAllows(membership.role, action)) throw forbidden(`This action needs the ${minimumRole(action)} role; you are ${membership.role}`);
  return { project: membership.project as unknown as Project, role: membership.role };
}

/**
 * The rule on top of the table for managing members: an OWNER is made, changed or removed by an OWNER only (an ADMIN
 * manages MEMBERs and ADMINs). `target` is the member's current role (none for an invitation), `next` the role given.
 */
export function assertMayManage(actor: Role, target: { current?: Role; next?: Role }): void {
  if (actor === 'OWNER') return;
  if (target.current === 'OWNER') throw forbidden('Only an OWNER may change or remove an OWNER');
  if (target.next === 'OWNER') throw forbidden('Only an OWNER may make someone an OWNER');
}
