import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../errors';
import { emailDomain } from '../contacts/email-address';
import { ProjectScopedCache } from '../cache/lookup-cache';
import type { ChangeFeed } from '../cache/change-feed';

/** Domain statuses cached per process, invalidated by the `domains:<projectId>` change feed. */
export type DomainStatusCache = ProjectScopedCache<{ status: string | null }>;
export const createDomainStatusCache = (feed: ChangeFeed | undefined): DomainStatusCache =>
  new ProjectScopedCache<{ status: string | null }>(feed, 'domains', 60_000);

/**
 * Refuses a sender address unless its domain is verified for the project. The message names the domain and says
 * what to do next.
 */
export async function assertSenderDomain(
  em: EntityManager,
  projectId: string,
  fromEmail: string,
  opts: { field?: string; cache?: DomainStatusCache } = {},
): Promise<void> {
  const field = opts.field ?? 'from';
  const domain = emailDomain(fromEmail);
  const load = async () => {
    const [row] = await em.execute<{ status: string }[]>('select status from domains where project_id = ? and name = ? limit 1', [projectId, domain]);
    return { value: { status: row?.status ?? null }, projectId };
  };
  const { status } = (opts.cache ? await opts.cache.get(`${projectId}:${domain}`, load) : (await load()).value)!;
  if (status === 'VERIFIED') return;
  const pending = status === 'PENDING';
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
