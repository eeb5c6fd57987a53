import { z } from 'zod';
import { checkDomainName, DOMAIN_NAME_PATTERN, MAX_DOMAIN_INPUT } from '../../domain/domains/hostname';

/** `{ domain }`: a host name, checked strictly and normalised (lowercase, punycode, no trailing dot). */
export const CreateDomainBody = z
  .object({
    domain: z
      .string({ error: 'Required: the domain name, e.g. "example.com"' })
      .max(MAX_DOMAIN_INPUT)
      .transform((value, ctx) => {
        const checked = checkDomainName(value);
        if (checked.ok) return checked.name;
        ctx.addIssue({ code: 'custom', message: `"${value.slice(0, 80)}" ${checked.reason}`, params: { code: 'invalid_domain' } });
        return z.NEVER;
      })
      .meta({
        description:
          'The domain to send from, e.g. "example.com" (a subdomain such as "mail.example.com" works too). The pattern is the rule for ASCII ' +
          'names; an internationalised name may also be given in Unicode (it is stored as punycode).',
        example: 'example.com',
        pattern: DOMAIN_NAME_PATTERN,
      }),
  })
  .meta({ id: 'CreateDomainRequest' });

export const ProjectIdParams = z.object({ projectId: z.uuid({ error: 'Must be a UUID' }) });
