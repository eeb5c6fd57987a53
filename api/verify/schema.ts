import { z } from 'zod';
import { VERIFY_REASONS } from '../../domain/verify/email-verifier';

/**
 * Only the type is checked here: a malformed address is an answer (200, `valid: false`, `invalid_format`), not a
 * request error. Missing, non-string, empty or absurdly long values are 422.
 */
export const VerifyBody = z
  .object({
    email: z
      .string({ error: 'Required: the email address to check' })
      .max(1024, 'At most 1024 characters')
      .trim()
      .min(1, 'Required: the email address to check')
      .meta({ description: 'The address to check; surrounding whitespace is ignored.', example: 'jane+news@example.com' }),
  })
  .meta({ id: 'VerifyRequest' });

const Reason = z.enum(VERIFY_REASONS).meta({
  description:
    '`invalid_format`: not a valid address (nothing else was checked). `domain_not_found`: the domain does not exist (NXDOMAIN). ' +
    '`null_mx`: the domain declares it accepts no mail (RFC 7505). `no_mx_records`: the domain exists but has neither MX nor A/AAAA records. ' +
    '`implicit_mx`: no MX records; mail goes to the domain\'s own A/AAAA address (RFC 5321 § 5.1), still valid. ' +
    '`dns_lookup_failed`: a DNS lookup failed or timed out, so DNS-based flags are false for lack of evidence. ' +
    '`disposable`: a throwaway-inbox domain. `possible_typo`: see `suggestion`. `role_address`: a shared role mailbox (admin@, info@...).',
});

const VerifyResult = z
  .object({
    email: z.string().meta({ description: 'The address as given, trimmed.' }),
    normalizedEmail: z.string().nullable().meta({ description: 'Lowercased and without the +tag; null when the format is invalid.' }),
    valid: z.boolean().meta({
      description:
        'Deliverable-looking: valid format, the domain accepts mail (MX hosts, or A/AAAA without MX, and no null MX) and is not disposable. ' +
        'False when a lookup it depends on failed (then `reasons` has `dns_lookup_failed`: retry later). Typos and role addresses do not make it false.',
    }),
    isDisposable: z.boolean().meta({ description: 'The domain, or a parent domain, is on the disposable list of the `mailchecker` package.' }),
    isAlias: z.boolean().meta({ description: 'A role mailbox (`role-based-email-addresses` list: admin, info, support, no-reply...), +tag ignored.' }),
    isTypo: z.boolean().meta({ description: 'The domain looks like a misspelling: of a well-known provider (gmial.com), or of a TLD when the domain takes no mail (acme.cmo).' }),
    isPlusAddressed: z.boolean().meta({ description: 'The local part has a "+" sub-address tag (jane+news@).' }),
    isPersonalEmail: z.boolean().meta({ description: 'A consumer mailbox provider (email-providers `all.json`, disposable domains excluded).' }),
    domainExists: z.boolean().meta({ description: 'The domain answered any of MX, A, AAAA, NS without NXDOMAIN.' }),
    hasWebsite: z.boolean().meta({ description: 'The domain or www.<domain> has an A or AAAA record (a DNS check; no HTTP request is made).' }),
    hasMxRecords: z.boolean().meta({ description: 'The domain publishes at least one MX record naming a mail host (a null MX does not count).' }),
    suggestion: z.string().nullable().meta({ description: 'The did-you-mean address when `isTypo`, else null.', example: 'jane@gmail.com' }),
    reasons: z.array(Reason).meta({ description: 'Machine-readable findings, in a fixed order; empty for a clean address.' }),
  })
  .meta({ id: 'VerifyResult' });

export const VerifyResponse = z.object({ success: z.literal(true), data: VerifyResult }).meta({ id: 'VerifyResponse' });
