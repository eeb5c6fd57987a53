import { randomBytes } from 'node:crypto';
import { dkimRecordMatches } from './dkim';
import type { DomainStatus } from './domain.entity';

export const RECORD_PURPOSES = ['OWNERSHIP', 'DKIM', 'SPF', 'DMARC'] as const;
export type RecordPurpose = (typeof RECORD_PURPOSES)[number];

/**
 * PENDING: not checked yet. VERIFIED: published as expected. NOT_FOUND: no such name, or no TXT record there.
 * MISMATCH: TXT records exist but none is the expected one. LOOKUP_FAILED: the DNS lookup itself failed (timeout,
 * SERVFAIL): inconclusive, it never changes the domain's status.
 */
export const RECORD_STATUSES = ['PENDING', 'VERIFIED', 'NOT_FOUND', 'MISMATCH', 'LOOKUP_FAILED'] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

/** One DNS record the domain owner creates, with what the last check found. Stored in `domains.records` (jsonb). */
export interface DomainRecord {
  type: 'TXT';
  /** Fully qualified, without a trailing dot. */
  name: string;
  value: string;
  purpose: RecordPurpose;
  /** Required records decide verification; the others are recommendations whose status is reported. */
  required: boolean;
  status: RecordStatus;
  lastCheckedAt: string | null;
  /** On MISMATCH: what was published instead (at most 5 values of 512 characters). */
  found?: string[];
  /** On LOOKUP_FAILED: the resolver's error code (e.g. ETIMEOUT, ESERVFAIL). */
  error?: string;
}

/** The TXT name that carries the ownership token. */
const OWNERSHIP_LABEL = '_mailwright';

export function newVerificationToken(): string {
  return `mailwright-verification=${randomBytes(18).toString('base64url')}`;
}

export interface RecordInput {
  domain: string;
  dkimSelector: string;
  dkimPublicKeyBase64: string;
  verificationToken: string;
  spfInclude: string;
}

/**
 * The records to create for a new domain, in the order a person creates them: ownership token and DKIM key
 * (required), SPF and DMARC (recommended).
 */
export function buildDnsRecords(input: RecordInput): DomainRecord[] {
  const base = { type: 'TXT' as const, status: 'PENDING' as const, lastCheckedAt: null };
  return [
    { ...base, purpose: 'OWNERSHIP', required: true, name: `${OWNERSHIP_LABEL}.${input.domain}`, value: input.verificationToken },
    {
      ...base,
      purpose: 'DKIM',
      required: true,
      name: `${input.dkimSelector}._domainkey.${input.domain}`,
      value: `v=DKIM1; k=rsa; p=${input.dkimPublicKeyBase64}`,
    },
    { ...base, purpose: 'SPF', required: false, name: input.domain, value: `v=spf1 include:${input.spfInclude} ~all` },
    { ...base, purpose: 'DMARC', required: false, name: `_dmarc.${input.domain}`, value: 'v=DMARC1; p=none;' },
  ];
}

/** What one TXT lookup gave: the records (each one's strings joined), no record at all, or a failure. */
export type TxtLookup = { kind: 'found'; values: string[] } | { kind: 'none' } | { kind: 'error'; code: string };

const sample = (values: string[]) => values.slice(0, 5).map((v) => (v.length > 512 ? `${v.slice(0, 509)}...` : v));

function spfIncludes(record: string, include: string): boolean {
  return record
    .trim()
    .split(/\s+/)
    .slice(1)
    .some((term) => term.toLowerCase().replace(/^\+/, '') === `include:${include.toLowerCase()}`);
}

/** Compares a lookup with what the record asks for. */
export function evaluateRecord(record: DomainRecord, lookup: TxtLookup, checkedAt: Date): DomainRecord {
  const { found: _found, error: _error, ...rest } = record;
  const result = (status: RecordStatus, extra: Partial<DomainRecord> = {}): DomainRecord => ({ ...rest, status, lastCheckedAt: checkedAt.toISOString(), ...extra });
  if (lookup.kind === 'error') return result('LOOKUP_FAILED', { error: lookup.code });
  if (lookup.kind === 'none') return result('NOT_FOUND');
  const values = lookup.values;
  switch (record.purpose) {
    case 'OWNERSHIP':
      return values.some((v) => v.trim() === record.value) ? result('VERIFIED') : result('MISMATCH', { found: sample(values) });
    case 'DKIM': {
      const p = /p=([^;]*)/.exec(record.value)?.[1] ?? '';
      return values.some((v) => dkimRecordMatches(v, p)) ? result('VERIFIED') : result('MISMATCH', { found: sample(values) });
    }
    case 'SPF': {
      // RFC 7208 § 4.5: more than one SPF record is a permanent error, so that counts as a mismatch too.
      const spf = values.filter((v) => /^v=spf1(\s|$)/i.test(v.trim()));
      if (spf.length === 0) return result('NOT_FOUND');
      const include = /include:(\S+)/.exec(record.value)?.[1] ?? '';
      return spf.length === 1 && spfIncludes(spf[0]!, include) ? result('VERIFIED') : result('MISMATCH', { found: sample(spf) });
    }
    case 'DMARC': {
      // Any single valid DMARC record will do: the policy is the owner's choice.
      const dmarc = values.filter((v) => /^v=DMARC1\s*(;|$)/i.test(v.trim()));
      if (dmarc.length === 0) return result('NOT_FOUND');
      return dmarc.length === 1 ? result('VERIFIED') : result('MISMATCH', { found: sample(dmarc) });
    }
  }
}

export interface DomainState {
  status: DomainStatus;
  verifiedAt: Date | null;
  /** Since when a required record of a VERIFIED domain has been missing or wrong. */
  failingSince: Date | null;
  /** Why the domain is PENDING, or what is wrong with a VERIFIED one; null when all is well. */
  statusReason: string | null;
}

function describe(records: DomainRecord[]): string {
  const label: Record<RecordStatus, string> = {
    PENDING: 'not checked yet',
    VERIFIED: 'ok',
    NOT_FOUND: 'not found',
    MISMATCH: 'has a different value',
    LOOKUP_FAILED: 'could not be looked up',
  };
  return records.map((r) => `${r.purpose} TXT at ${r.name} ${label[r.status]}`).join('; ');
}

/**
 * The domain's state after a check (pure). Required records are OWNERSHIP and DKIM.
 * - PENDING becomes VERIFIED when every required record is VERIFIED.
 * - A VERIFIED domain whose required record is NOT_FOUND or MISMATCH stays VERIFIED for `demoteAfterMs` (a DNS edit
 *   gone wrong should not stop mail at once) with `failingSince` and a reason saying when it will be demoted; after
 *   that it goes back to PENDING. A later check that finds the records again clears the warning.
 * - LOOKUP_FAILED is inconclusive: it changes neither status nor `failingSince`.
 */
export function decideDomainState(previous: DomainState, records: DomainRecord[], now: Date, demoteAfterMs: number): DomainState {
  const required = records.filter((r) => r.required);
  const failing = required.filter((r) => r.status === 'NOT_FOUND' || r.status === 'MISMATCH' || r.status === 'PENDING');
  const inconclusive = required.filter((r) => r.status === 'LOOKUP_FAILED');
  if (required.length > 0 && failing.length === 0 && inconclusive.length === 0) {
    return { status: 'VERIFIED', verifiedAt: previous.status === 'VERIFIED' ? (previous.verifiedAt ?? now) : now, failingSince: null, statusReason: null };
  }
  if (previous.status === 'PENDING') {
    return { status: 'PENDING', verifiedAt: null, failingSince: null, statusReason: `Waiting for DNS: ${describe([...failing, ...inconclusive])}.` };
  }
  if (failing.length === 0) {
    // Verified, and only lookups failed: keep everything as it was, say why the check was inconclusive.
    return { ...previous, statusReason: `Last check inconclusive: ${describe(inconclusive)}.` };
  }
  const failingSince = previous.failingSince ?? now;
  const demoteAt = new Date(failingSince.getTime() + demoteAfterMs);
  if (now.getTime() >= demoteAt.getTime()) {
    return {
      status: 'PENDING',
      verifiedAt: null,
      failingSince: null,
      statusReason: `No longer verified (since ${now.toISOString()}): ${describe(failing)}. Restore the record; the domain is verified again on the next check that finds it.`,
    };
  }
  return {
    status: 'VERIFIED',
    verifiedAt: previous.verifiedAt,
    failingSince,
    statusReason: `${describe(failing)} (since ${failingSince.toISOString()}). Restore it before ${demoteAt.toISOString()} or the domain goes back to PENDING and cannot send.`,
  };
}
