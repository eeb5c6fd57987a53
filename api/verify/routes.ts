import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { VerifyBody, VerifyResponse } from './schema';
import { errorResponses } from '../common.schema';
import { EmailVerifier } from '../../domain/verify/email-verifier';

export function verifyRoutes(routes: Routes, deps: ApiDeps): void {
  // One per process: its DNS answer cache is shared by every request.
  const verifier = new EmailVerifier({ servers: deps.config.domains.dnsServers, timeoutMs: deps.config.domains.dnsTimeoutMs });
  routes.add({
    method: 'post',
    path: '/v1/verify',
    summary: 'Check an email address (secret key)',
    description:
      'Checks the format, the domain in DNS, disposable domains, typos, role and plus addresses and personal providers. Nothing is sent to the address ' +
      'and no HTTP request is made.\n\n' +
      '- A malformed address is an answer, not an error: 200 with `valid: false` and `invalid_format`. A missing or non-string `email` is 422.\n' +
      '- DNS (the `DNS_SERVERS` resolvers): MX, A, AAAA and NS of the domain and A/AAAA of www.<domain>, in parallel, each bounded by `DNS_TIMEOUT`. ' +
      'Without MX records the domain\'s A/AAAA is its implicit MX (RFC 5321 § 5.1); a null MX (`0 .`, RFC 7505) means no mail. ' +
      'Complete answers are cached per domain for 60 s in each API process; failed lookups are not cached.\n' +
      '- A DNS failure or timeout never fails the call: `reasons` gets `dns_lookup_failed`, flags that needed the lookup are false, ' +
      'and `valid` is false when the mail verdict depended on it (inconclusive: retry later).\n' +
      '- `hasWebsite` is a DNS check (an A/AAAA record at the domain or www.<domain>), not an HTTP request.\n' +
      '- Typos: did-you-mean from `@zootools/email-spell-checker`, reported when the correction is a well-known provider (also when the mistyped ' +
      'domain accepts mail: such domains are often typo-squatted), or when the domain takes no mail; domains that are themselves known providers ' +
      'are never corrected. Typos and role addresses are warnings and leave `valid` unchanged.',
    tags: ['Public API'],
    auth: 'secret',
    body: VerifyBody,
    responses: { 200: { description: 'The verdict', schema: VerifyResponse }, ...errorResponses(400, 401, 403, 413, 422) },
    handler: async ({ body }) => ({ body: { success: true, data: await verifier.verify(body.email) } }),
  });
}
