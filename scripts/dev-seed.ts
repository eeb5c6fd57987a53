import { randomBytes } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { User } from '../domain/users/user.entity';
import { Project } from '../domain/projects/project.entity';
import { Domain } from '../domain/domains/domain.entity';
import { Membership } from '../domain/projects/membership.entity';
import { hashPassword } from '../domain/users/user.service';
import { createProject, rotateKeys } from '../domain/projects/project.service';
import type { KeyPair } from '../domain/projects/api-keys';

export const DEV_USER_EMAIL = 'dev@mailwright.test';
export const DEV_DOMAIN = 'mailwright.test';

export interface DevSeed {
  created: boolean;
  email: string;
  /** Only when created or reset: neither is stored anywhere in plain text. */
  password?: string;
  keys?: KeyPair;
  projectId: string;
}

/**
 * First start: a dev user, a "Development" project and a verified local sender domain, so the quick start can
 * send at once. Later starts change nothing unless `reset` asks for a new password and new keys.
 */
export async function seedDevData(orm: MikroORM, reset: boolean): Promise<DevSeed> {
  const em = orm.em.fork();
  let user = await em.findOne(User, { email: DEV_USER_EMAIL });
  const password = randomBytes(9).toString('base64url');
  if (!user) {
    user = em.create(User, { email: DEV_USER_EMAIL, name: 'Developer', passwordHash: await hashPassword(password), emailVerifiedAt: new Date() });
    await em.flush();
    const { project, keys } = await createProject(em, { name: 'Development', ownerId: user.id });
    em.create(Domain, { project, name: DEV_DOMAIN, status: 'VERIFIED', verifiedAt: new Date() });
    await em.flush();
    return { created: true, email: DEV_USER_EMAIL, password, keys, projectId: project.id };
  }
  const membership = await em.findOne(Membership, { user }, { orderBy: { createdAt: 'asc' } });
  const project = membership ? await em.findOneOrFail(Project, membership.project) : undefined;
  if (!project) throw new Error(`The dev user ${DEV_USER_EMAIL} has no project; remove .data/ to start over`);
  if (!reset) return { created: false, email: DEV_USER_EMAIL, projectId: project.id };
  user.passwordHash = await hashPassword(password);
  await em.flush();
  return { created: false, email: DEV_USER_EMAIL, password, keys: await rotateKeys(em, project), projectId: project.id };
}
