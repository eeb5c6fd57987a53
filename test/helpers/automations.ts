import type { ApiResponse } from './api';
import { addVerifiedDomain, createTestProject, uniqueDomain, type TestProject } from './fixtures';
import { stackEnv } from '../stack-env';
import { TemporalGateway } from '../../temporal/client';

/** A fresh project with a verified sender domain (automation tests send from `<x>@<domain>`). */
export async function projectWithDomain(name: string): Promise<{ project: TestProject; domain: string }> {
  const project = await createTestProject(name);
  const domain = uniqueDomain();
  await addVerifiedDomain(project.projectId, domain);
  return { project, domain };
}

/** The test stack's Temporal, through the gateway the API uses (for cancelling or terminating runs as an operator). */
export const connectGateway = () => TemporalGateway.connect({ address: stackEnv().temporalAddress, namespace: 'default', taskQueue: 'mailwright' });

/** The response's body, or a thrown error with the status and text when the status is not `status`. */
export function expectStatus(res: ApiResponse, status: number): any {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
  return res.body;
}
