import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { SPACE } from '../text';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
/** A top-level label: letters only, or an IDN (punycode) label. Numeric TLDs do not exist, which also rules out IPv4. */
const TLD = /^(?:[a-z]{2,63}|xn--[a-z0-9-]{1,59}(?<!-))$/;

const LABEL_TEXT = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
/**
 * `checkDomainName`'s rule for ASCII names as one portable pattern for the OpenAPI document: optional surrounding
 * whitespace, 2+ labels of 1-63 letters, digits or hyphens (not at either end), a letters-only or `xn--` top-level
 * label, at most 253 characters, one optional trailing dot. (Internationalised names in Unicode are accepted too and
 * converted to punycode; a pattern cannot state IDNA's rules.)
 */
export const DOMAIN_NAME_PATTERN =
  `^[${SPACE}]*(?=[A-Za-z0-9.-]{1,253}\\.?[${SPACE}]*$)(?:${LABEL_TEXT}\\.)+(?:[A-Za-z]{2,63}|[xX][nN]--[A-Za-z0-9-]{0,58}[A-Za-z0-9])\\.?[${SPACE}]*$`;

/** Longest input taken: a 253-character name, a trailing dot, and some surrounding whitespace. */
export const MAX_DOMAIN_INPUT = 260;

export type HostnameCheck = { ok: true; name: string } | { ok: false; reason: string };

/**
 * Strict check of a sender domain name, as a person would type it. Accepts letters, digits and hyphens in 2+ labels
 * (an internationalised name is converted to its punycode form, a single trailing dot is dropped) and returns the
 * lowercased name. Refuses IP addresses, single labels, wildcards, underscores, ports, paths, spaces and anything
 * else that is not a plain host name.
 */
export function checkDomainName(input: string): HostnameCheck {
  const raw = input.trim();
  if (!raw) return { ok: false, reason: 'is empty' };
  if (isIP(raw.replace(/^\[(.*)\]$/, '$1'))) return { ok: false, reason: 'must be a domain name, not an IP address' };
  if (raw.length > MAX_DOMAIN_INPUT) return { ok: false, reason: 'is longer than 253 characters' };
  if (/[\s/:@?#[\]\\*_,;'"<>]/.test(raw)) return { ok: false, reason: 'must be a bare domain name (no scheme, port, path, wildcard, underscore or spaces)' };
  const withoutDot = raw.endsWith('.') ? raw.slice(0, -1) : raw;
  if (/^[0-9.]+$/.test(withoutDot)) return { ok: false, reason: 'must be a domain name, not an IP address' };
  // eslint-disable-next-line no-control-regex
  const ascii = /^[\x00-\x7f]*$/.test(withoutDot) ? withoutDot.toLowerCase() : domainToASCII(withoutDot);
  if (!ascii) return { ok: false, reason: 'is not a valid internationalised domain name' };
  if (ascii.length > 253) return { ok: false, reason: 'is longer than 253 characters' };
  const labels = ascii.split('.');
  if (labels.length < 2) return { ok: false, reason: 'must have at least two labels (e.g. example.com)' };
  for (const label of labels) {
    if (!label) return { ok: false, reason: 'has an empty label (two dots in a row, or a leading dot)' };
    if (!LABEL.test(label)) return { ok: false, reason: `has an invalid label "${label}" (1-63 letters, digits or hyphens, not starting or ending with a hyphen)` };
  }
  if (!TLD.test(labels[labels.length - 1]!)) return { ok: false, reason: 'must end in a valid top-level domain' };
  return { ok: true, name: ascii };
}
