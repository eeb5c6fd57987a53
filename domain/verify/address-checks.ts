import { z } from 'zod';
import { run as spellCheck, POPULAR_DOMAINS } from '@zootools/email-spell-checker';
import { blacklist } from 'mailchecker';
import roleLocalParts from 'role-based-email-addresses';
import providerDomains from 'email-providers/all.json';
import { checkDomainName } from '../domains/hostname';

/** The same syntax `emailString` accepts elsewhere in the API (zod's email pattern), so "valid format" means one thing. */
const EMAIL_SYNTAX = z.email();

/** RFC 5321 § 4.5.3.1: local part at most 64 octets, a forward-path at most 256 (254 without the angle brackets). */
const MAX_LOCAL = 64;
const MAX_ADDRESS = 254;

export interface ParsedAddress {
  /** As given (local parts are case-sensitive in principle). */
  local: string;
  /** Lowercased. */
  domain: string;
}

/**
 * The format check: zod's email syntax (ASCII, dot-atom local part, no quoted strings or IP literals), the RFC 5321
 * length limits, and a host name whose labels are 1-63 letters, digits or hyphens not at either end.
 */
export function parseAddress(input: string): ParsedAddress | undefined {
  const email = input.trim();
  if (email.length > MAX_ADDRESS || !EMAIL_SYNTAX.safeParse(email).success) return undefined;
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const domain = email.slice(at + 1).toLowerCase();
  if (local.length > MAX_LOCAL) return undefined;
  const host = checkDomainName(domain);
  if (!host.ok || host.name !== domain) return undefined;
  return { local, domain };
}

const disposableDomains = blacklist();

/** mailchecker's rule: a domain is disposable when it or any parent domain is on its list (sub.mailinator.com too). */
export function isDisposableDomain(domain: string): boolean {
  const labels = domain.split('.');
  for (let i = 0; i < labels.length - 1; i++) if (disposableDomains.has(labels.slice(i).join('.'))) return true;
  return false;
}

/**
 * Personal (consumer) mailbox providers: email-providers' `all.json` (~8,800 domains) rather than `common.json` (~350),
 * because the short list misses regional and secondary domains of the big providers (googlemail.com, hotmail.fr,
 * outlook.de, ymail.com, pm.me, rediffmail.com). `all.json` also lists throwaway and typo domains (mailinator.com,
 * gmial.com); those are taken out, so an address is never both personal and disposable.
 */
const personalProviders = new Set(providerDomains.filter((d) => !isDisposableDomain(d)));

export const isPersonalDomain = (domain: string): boolean => personalProviders.has(domain);

const roles = new Set(roleLocalParts.map((r) => r.toLowerCase()));

/** Sub-addressing with "+": `jane+news@` has the tag "news" and the mailbox "jane". A leading "+" is not a separator. */
export function plusTag(local: string): { base: string; tag: string } | undefined {
  const plus = local.indexOf('+');
  return plus > 0 ? { base: local.slice(0, plus), tag: local.slice(plus + 1) } : undefined;
}

/** A role (shared) mailbox such as admin@, info@, no-reply@; the +tag is ignored (`support+billing@` is a role address). */
export function isRoleLocalPart(local: string): boolean {
  return roles.has((plusTag(local)?.base ?? local).toLowerCase());
}

const knownProviders = new Set([...personalProviders, ...POPULAR_DOMAINS]);

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions cost 1. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** Below this many characters a first label is too short for one edit to mean a typo (ge.com vs me.com, ey.com vs hey.com). */
const MIN_NEAR_MISS_LABEL = 4;

export interface TypoSuggestion {
  /** The corrected domain. */
  domain: string;
  /**
   * A one-keystroke slip in the name of a well-known provider, same TLD (gmial.com, gmai.com, yhoo.com -> gmail.com,
   * yahoo.com): a typo whatever DNS says, since such domains are often registered by typo-squatters and accept mail.
   * Other suggestions (acme.cmo -> acme.co, ibm.com -> aim.com) are guesses, to be trusted only when the domain takes
   * no mail.
   */
  nearMiss: boolean;
}

/**
 * The spell checker's did-you-mean for a domain, except for domains that are themselves known providers
 * (protonmail.ch, aol.co.uk and bol.com.br are real, though close to protonmail.com, aol.com and bol.com).
 */
export function typoSuggestion(domain: string): TypoSuggestion | undefined {
  if (knownProviders.has(domain)) return undefined;
  // The local part is irrelevant to the domain suggestion; a fixed one keeps the checker's URI encoding out of it.
  const suggestion = spellCheck({ email: `x@${domain}` });
  if (!suggestion || suggestion.domain === domain) return undefined;
  const tld = (d: string) => d.slice(d.lastIndexOf('.') + 1);
  const nearMiss =
    knownProviders.has(suggestion.domain) &&
    tld(suggestion.domain) === tld(domain) &&
    domain.indexOf('.') >= MIN_NEAR_MISS_LABEL &&
    editDistance(domain, suggestion.domain) === 1;
  return { domain: suggestion.domain, nearMiss };
}

/** Everything about an address that needs no network. */
export interface AddressFacts extends ParsedAddress {
  /** Lowercased, without the +tag. */
  normalizedEmail: string;
  isPlusAddressed: boolean;
  isAlias: boolean;
  isDisposable: boolean;
  isPersonalEmail: boolean;
  typo?: TypoSuggestion;
}

/** Classifies a well-formed address; undefined when the format is invalid. */
export function classifyAddress(email: string): AddressFacts | undefined {
  const parsed = parseAddress(email);
  if (!parsed) return undefined;
  const { local, domain } = parsed;
  const tag = plusTag(local);
  const isDisposable = isDisposableDomain(domain);
  return {
    local,
    domain,
    normalizedEmail: `${(tag?.base ?? local).toLowerCase()}@${domain}`,
    isPlusAddressed: tag !== undefined,
    isAlias: isRoleLocalPart(local),
    isDisposable,
    isPersonalEmail: !isDisposable && isPersonalDomain(domain),
    typo: typoSuggestion(domain),
  };
}
