import { z } from 'zod';
import { checkDomainName } from '../../domain/domains/hostname';

/** `{ domain }`: a host name, checked strictly and normalised (lowercase, punycode, no trailing dot). */
export const CreateDomainBody = z
  .object({
    domain: z
      .string({ error: 'Required: the domain name, e.g. "example.com"' })
      .max(300)
      .transform((value, ctx) => {
        const checked = checkDomainName(value);
        if (checked.ok) return checked.name;
        ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 80)}" ${checked.reason}`, params: { code: 'invalid_domain' } });
        return z.NEVER;
      })
      .meta({ description: 'The domain to send from, e.g. "example.com" (a subdomain such as "mail.example.com" works too).', example: 'example.com' }),
  })
  .meta({ id: 'CreateDomainRequest' });

export const ProjectIdParams = z.object({ projectId: z.uuid({ error: 'Must be a UUID' }) });
