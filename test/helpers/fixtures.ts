import { randomUUID } from 'node:crypto';
import { api, sessionCookie } from './api';
import { db } from './db';

export interface TestProject {
  projectId: string;
  secretKey: string;
  publicKey: string;
  cookie: string;
  userEmail: string;
  password: string;
}

/** A fresh user and project through the real dashboard endpoints. */
export async function createTestProject(name = 'Test project'): Promise<TestProject> {
  const userEmail = `user-${randomUUID()}@example.com`;
  const password = 'correct horse battery staple';
  const signup = await api('POST', '/auth/signup', { body: { email: userEmail, password } });
  if (signup.status !== 201) throw new Error(`signup failed: ${signup.status} ${signup.text}`);
  const cookie = sessionCookie(signup);
  const created = await api('POST', '/users/@me/projects', { cookie, body: { name } });
  if (created.status !== 201) throw new Error(`project creation failed: ${created.status} ${created.text}`);
  return {
    projectId: created.body.id,
    secretKey: created.body.keys.secretKey,
    publicKey: created.body.keys.publicKey,
    cookie,
    userEmail,
    password,
  };
}

/**
 * Marks a sender domain verified for a project. The domain-verification workflow has its own tests; here the
 * state is set directly so send tests do not depend on DNS.
 */
export async function addVerifiedDomain(projectId: string, name: string): Promise<void> {
  await db().query(
    `insert into domains (id, project_id, name, status, verified_at) values ($1, $2, $3, 'VERIFIED', now())`,
    [randomUUID(), projectId, name],
  );
}

export function uniqueDomain(): string {
  return `${randomUUID().slice(0, 8)}.example.test`;
}

/** A new project with a verified sender domain of its own. */
export async function projectWithVerifiedDomain(): Promise<{ project: TestProject; domain: string }> {
  const project = await createTestProject();
  const domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
  return { project, domain };
}
