import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../errors';
import { emailDomain } from '../contacts/email-address';

/**
 * Refuses a sender address unless its domain is verified for the project. The message names the domain and says
 * what to do next.
 */
export async function assertSenderDomain(em: EntityManager, projectId: string, fromEmail: string, field = 'from'): Promise<void> {
  const domain = emailDomain(fromEmail);
  const [row] = await em.execute<{ status: string }[]>(
    'select status from domains where project_id = ? and name = ? limit 1',
    [projectId, domain],
  );
  if (row?.status === 'VERIFIED') return;
  const pending = row?.status === 'PENDING';
  throw new AppError(
    403,
    'DOMAIN_NOT_VERIFIED',
    pending
      ? `The sender domain "${domain}" is not verified yet`
      : `The sender domain "${domain}" has not been added to this project`,
    {
      errors: [{ field, message: `${domain} is not a verified sender domain`, code: 'unverified_domain' }],
      suggestion: pending
        ? `Create the DNS records returned when the domain was added, then run GET /domains/<id>/verify.`
        : `Add it with POST /domains { "domain": "${domain}" }, create the DNS records it returns, then verify it.`,
    },
  );
}
