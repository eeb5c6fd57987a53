import { LruCache } from '../cache/lru';
import type { DnsSettings } from '../domains/dns-lookup';
import { classifyAddress, type AddressFacts } from './address-checks';
import { createDomainResolver, evaluateDns, type DomainDns, type DnsVerdict } from './dns-checks';

/** Machine-readable findings, in the order they are reported. */
export const VERIFY_REASONS = [
  'invalid_format',
  'domain_not_found',
  'null_mx',
  'no_mx_records',
  'implicit_mx',
  'dns_lookup_failed',
  'disposable',
  'possible_typo',
  'role_address',
] as const;
type VerifyReason = (typeof VERIFY_REASONS)[number];

export interface VerifyResult {
  email: string;
  /** Lowercased, without the +tag; null when the format is invalid. */
  normalizedEmail: string | null;
  valid: boolean;
  isDisposable: boolean;
  isAlias: boolean;
  isTypo: boolean;
  isPlusAddressed: boolean;
  isPersonalEmail: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  /** The did-you-mean address when `isTypo`, else null. */
  suggestion: string | null;
  reasons: VerifyReason[];
}

/** The answer for an address that fails the format check: nothing else is looked at. */
export function invalidFormatResult(email: string): VerifyResult {
  return {
    email,
    normalizedEmail: null,
    valid: false,
    isDisposable: false,
    isAlias: false,
    isTypo: false,
    isPlusAddressed: false,
    isPersonalEmail: false,
    domainExists: false,
    hasWebsite: false,
    hasMxRecords: false,
    suggestion: null,
    reasons: ['invalid_format'],
  };
}

/**
 * The verdict from the address facts and the domain's DNS verdict (pure). `valid` needs positive evidence: good
 * format, a domain that accepts mail (MX or implicit MX, no null MX), not disposable. When a lookup the mail verdict
 * depends on failed, `valid` is false and `dns_lookup_failed` says the answer is inconclusive rather than negative.
 * Typos and role addresses are warnings: they do not make an address invalid.
 */
export function buildVerifyResult(email: string, facts: AddressFacts, dnsVerdict: DnsVerdict): VerifyResult {
  // A near miss of a big provider is a typo even if it takes mail; other guesses need the domain to look wrong too
  // (no mail, or a throwaway domain, which is what many provider typo domains are).
  const typo = facts.typo && (facts.typo.nearMiss || facts.isDisposable || dnsVerdict.acceptsMail === 'no') ? facts.typo : undefined;
  const found = new Set<VerifyReason>();
  if (dnsVerdict.domainExists === 'no') found.add('domain_not_found');
  else {
    if (dnsVerdict.nullMx) found.add('null_mx');
    else if (dnsVerdict.acceptsMail === 'no') found.add('no_mx_records');
    if (dnsVerdict.implicitMx) found.add('implicit_mx');
  }
  if (dnsVerdict.lookupFailed) found.add('dns_lookup_failed');
  if (facts.isDisposable) found.add('disposable');
  if (typo) found.add('possible_typo');
  if (facts.isAlias) found.add('role_address');
  return {
    email,
    normalizedEmail: facts.normalizedEmail,
    valid: dnsVerdict.acceptsMail === 'yes' && !facts.isDisposable,
    isDisposable: facts.isDisposable,
    isAlias: facts.isAlias,
    isTypo: typo !== undefined,
    isPlusAddressed: facts.isPlusAddressed,
    isPersonalEmail: facts.isPersonalEmail,
    domainExists: dnsVerdict.domainExists === 'yes',
    hasWebsite: dnsVerdict.hasWebsite,
    hasMxRecords: dnsVerdict.hasMxRecords,
    suggestion: typo ? `${facts.local}@${typo.domain}` : null,
    reasons: VERIFY_REASONS.filter((r) => found.has(r)),
  };
}

export interface EmailVerifierOptions {
  /** How long a domain's complete DNS answers are reused. */
  cacheTtlMs?: number;
  /** Domains kept at most; the oldest entry makes room. */
  cacheMaxEntries?: number;
  /** Replaces the DNS resolver (tests). */
  lookup?: (domain: string) => Promise<DomainDns>;
}

/**
 * `POST /v1/verify`: the address checks plus the domain's DNS, with a small per-process cache of DNS answers per domain
 * (concurrent checks of one domain share their queries; answers with a failed lookup are not kept, so a DNS hiccup is
 * not remembered).
 */
export class EmailVerifier {
  private readonly cache: LruCache<{ at: number; answers: Promise<DomainDns> }>;
  private readonly ttlMs: number;
  private readonly lookup: (domain: string) => Promise<DomainDns>;

  constructor(dnsSettings: DnsSettings, options: EmailVerifierOptions = {}) {
    this.ttlMs = options.cacheTtlMs ?? 60_000;
    const maxEntries = options.cacheMaxEntries ?? 10_000;
    this.cache = new LruCache({ maxEntries, maxWeight: maxEntries });
    this.lookup = options.lookup ?? createDomainResolver(dnsSettings).lookup;
  }

  async verify(input: string): Promise<VerifyResult> {
    const email = input.trim();
    const facts = classifyAddress(email);
    if (!facts) return invalidFormatResult(email);
    return buildVerifyResult(email, facts, evaluateDns(await this.domainDns(facts.domain)));
  }

  private domainDns(domain: string): Promise<DomainDns> {
    const now = Date.now();
    const hit = this.cache.get(domain);
    if (hit && now - hit.at < this.ttlMs) return hit.answers;
    const answers = this.lookup(domain);
    const entry = { at: now, answers };
    this.cache.set(domain, entry, 1);
    answers.then(
      (a) => {
        if (Object.values(a).some((l: DomainDns[keyof DomainDns]) => l.kind === 'error')) this.cache.delete(domain, entry);
      },
      () => this.cache.delete(domain, entry),
    );
    return answers;
  }
}
