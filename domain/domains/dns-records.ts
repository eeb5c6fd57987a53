import { randomBytes } from 'node:crypto';
import { dkimRecordMatches } from './dkim';
import type { DomainStatus } from './domain.entity';

/**
 * OWNERSHIP, DKIM, SPF, DMARC: the sender domain itself. RETURN_PATH_MX, RETURN_PATH_SPF: its bounce host
 * (`<RETURN_PATH_LABEL>.<domain>`), which carries the envelope sender of every message once its MX reaches the inbound
 * server (see returnPathRecords).
 */
export const RECORD_PURPOSES = ['OWNERSHIP', 'DKIM', 'SPF', 'DMARC', 'RETURN_PATH_MX', 'RETURN_PATH_SPF'] as const;
export type RecordPurpose = (typeof RECORD_PURPOSES)[number];

export const RECORD_TYPES = ['TXT', 'MX'] as const;
export type RecordType = (typeof RECORD_TYPES)[number];

/**
 * PENDING: not checked yet. VERIFIED: published as expected. NOT_FOUND: no such name, or no record of the type there.
 * MISMATCH: records of the type exist but none is the expected one. LOOKUP_FAILED: the DNS lookup itself failed
 * (timeout, SERVFAIL): inconclusive, it never changes the domain's status (nor its return path's).
 */
export const RECORD_STATUSES = ['PENDING', 'VERIFIED', 'NOT_FOUND', 'MISMATCH', 'LOOKUP_FAILED'] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

/** One DNS record the domain owner creates, with what the last check found. Stored in `domains.records` (jsonb). */
export interface DomainRecord {
  type: RecordType;
  /** Fully qualified, without a trailing dot. */
  name: string;
  /**
   * TXT: the exact text. MX: `<preference> <exchange>` as a zone file writes it (`10 mx.example.net`, no trailing dot);
   * DNS hosts that ask for the two separately take `10` as the priority and the host as the value.
   */
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
  returnPath: ReturnPathSettings;
}

/** Where the bounce hosts point (INBOUND_MX_HOST, RETURN_PATH_LABEL) and the relay's SPF include (SPF_INCLUDE). */
export interface ReturnPathSettings {
  label: string;
  mxHost: string;
  spfInclude: string;
}

/** The bounce host of a sender domain: the domain of every envelope sender (return path) of its mail. */
const bounceHostOf = (domain: string, settings: Pick<ReturnPathSettings, 'label'>): string => `${settings.label}.${domain}`;

/** The MX preference we ask for: any value works (one MX), 10 is what DNS hosts suggest. */
const RETURN_PATH_MX_PREFERENCE = 10;

/**
 * The two recommended records of the bounce host: an MX naming the inbound server, so bounces, complaints and
 * unsubscribe mail sent to the return path reach it, and an SPF record allowing the relay, so SPF passes for the
 * envelope domain and (relaxed alignment: it is a subdomain of the From domain) aligns for DMARC.
 */
function returnPathRecords(domain: string, settings: ReturnPathSettings): DomainRecord[] {
  const host = bounceHostOf(domain, settings);
  const base = { name: host, required: false, status: 'PENDING' as const, lastCheckedAt: null };
  return [
    { ...base, type: 'MX', purpose: 'RETURN_PATH_MX', value: `${RETURN_PATH_MX_PREFERENCE} ${settings.mxHost}` },
    { ...base, type: 'TXT', purpose: 'RETURN_PATH_SPF', value: `v=spf1 include:${settings.spfInclude} ~all` },
  ];
}

/**
 * A domain's records with the bounce host's two as the configuration asks for them now: added to a domain stored
 * before they existed, and replaced (PENDING again) when INBOUND_MX_HOST, RETURN_PATH_LABEL or SPF_INCLUDE changed
 * since, so the check verifies what the server needs today rather than what it needed when the domain was added. A
 * record that is still right keeps its status. A domain without records (added without a key, like the dev seed)
 * has nothing to check and gets none.
 */
export function withReturnPathRecords(records: DomainRecord[], domain: string, settings: ReturnPathSettings): DomainRecord[] {
  if (records.length === 0) return records;
  const own = records.filter((r) => r.purpose !== 'RETURN_PATH_MX' && r.purpose !== 'RETURN_PATH_SPF');
  const wanted = returnPathRecords(domain, settings).map((want) => {
    const stored = records.find((r) => r.purpose === want.purpose);
    return stored && stored.type === want.type && stored.name === want.name && stored.value === want.value ? stored : want;
  });
  return [...own, ...wanted];
}

/**
 * The records to create for a new domain, in the order a person creates them: ownership token and DKIM key
 * (required), SPF and DMARC (recommended), then the bounce host's MX and SPF (recommended).
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
    ...returnPathRecords(input.domain, input.returnPath),
  ];
}

/**
 * What one lookup gave: the records, no record at all, or a failure. A TXT record's value is its strings joined; an
 * MX record's is `<preference> <exchange>` like DomainRecord's (a null MX, RFC 7505, is `0 .`).
 */
export type DnsLookup = { kind: 'found'; values: string[] } | { kind: 'none' } | { kind: 'error'; code: string };

const sample = (values: string[]) => values.slice(0, 5).map((v) => (v.length > 512 ? `${v.slice(0, 509)}...` : v));

function spfIncludes(record: string, include: string): boolean {
  return record
    .trim()
    .split(/\s+/)
    .slice(1)
    .some((term) => term.toLowerCase().replace(/^\+/, '') === `include:${include.toLowerCase()}`);
}

/** A host name as DNS answers compare: case-insensitive, the root's trailing dot ignored. */
const hostKey = (host: string) => host.trim().toLowerCase().replace(/\.$/, '');

/** The exchange of an MX value (`<preference> <exchange>`). */
const mxExchange = (value: string) => hostKey(value.trim().split(/\s+/)[1] ?? '');

/** Compares a lookup (of the record's type at its name) with what the record asks for. */
export function evaluateRecord(record: DomainRecord, lookup: DnsLookup, checkedAt: Date): DomainRecord {
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
    case 'RETURN_PATH_MX': {
      // One of the host's exchanges must be ours; others (a backup MX) are the owner's business, and the preference is
      // not compared: with several exchanges a sender tries them all.
      const exchange = mxExchange(record.value);
      return values.some((v) => mxExchange(v) === exchange) ? result('VERIFIED') : result('MISMATCH', { found: sample(values) });
    }
    case 'SPF':
    case 'RETURN_PATH_SPF': {
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

/** ACTIVE: mail from the domain has a return path on its bounce host; NOT_CONFIGURED: its From address is the envelope sender. */
export const RETURN_PATH_STATUSES = ['ACTIVE', 'NOT_CONFIGURED'] as const;
type ReturnPathStatus = (typeof RETURN_PATH_STATUSES)[number];

/**
 * The bounce host that a domain's mail takes its envelope sender from after a check (`domains.return_path_host`), or
 * null for NOT_CONFIGURED. It is set while the domain is VERIFIED (the inbound server takes mail only for verified
 * domains' bounce hosts) and the bounce host's MX names the inbound server. SPF is not a condition: a bounce host
 * without it gets SPF "none", not "fail", and aligned DKIM passes DMARC alone. A failed lookup is inconclusive, as it
 * is for the domain's status: the previous state stays, so one DNS timeout does not switch envelope senders for hours.
 */
export function decideReturnPath(previousHost: string | null, domainStatus: DomainStatus, records: DomainRecord[]): string | null {
  const mx = records.find((r) => r.purpose === 'RETURN_PATH_MX');
  if (domainStatus !== 'VERIFIED' || !mx) return null;
  if (mx.status === 'VERIFIED') return mx.name;
  return mx.status === 'LOOKUP_FAILED' && previousHost === mx.name ? previousHost : null;
}

/** The return path as the domain's API representation shows it (api/presenters/domain.presenter.ts). */
export interface ReturnPathState {
  host: string;
  status: ReturnPathStatus;
  /** The envelope sender of the domain's mail, as a pattern: `b-<token>@<host>` (one signed address per email), or `<From address>`. */
  mailFrom: string;
  /** Why it is NOT_CONFIGURED; null when ACTIVE. */
  reason: string | null;
}

/** What the domain's stored state (after withReturnPathRecords) says about its return path. */
export function returnPathState(
  domain: { name: string; status: DomainStatus; returnPathHost: string | null; records: DomainRecord[] },
  settings: ReturnPathSettings,
): ReturnPathState {
  if (domain.returnPathHost) return { host: domain.returnPathHost, status: 'ACTIVE', mailFrom: `b-<token>@${domain.returnPathHost}`, reason: null };
  const host = bounceHostOf(domain.name, settings);
  const off = (reason: string): ReturnPathState => ({ host, status: 'NOT_CONFIGURED', mailFrom: '<From address>', reason });
  const mx = domain.records.find((r) => r.purpose === 'RETURN_PATH_MX');
  if (!mx) return off('The domain has no DNS records to check (it was added without a DKIM key).');
  if (domain.status !== 'VERIFIED') return off('The domain is not verified yet.');
  const publish = `publish MX ${mx.value} at ${mx.name}`;
  switch (mx.status) {
    case 'NOT_FOUND':
      return off(`No MX record at ${mx.name}: ${publish}.`);
    case 'MISMATCH':
      return off(`The MX records of ${mx.name} do not name ${mxExchange(mx.value)}: ${publish}.`);
    case 'LOOKUP_FAILED':
      return off(`The MX lookup of ${mx.name} failed (${mx.error ?? 'error'}); the next check tries again.`);
    default:
      // PENDING, or VERIFIED by a check that has not stored its result yet.
      return off(`The MX record at ${mx.name} has not been checked yet.`);
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
  return records.map((r) => `${r.purpose} ${r.type} at ${r.name} ${label[r.status]}`).join('; ');
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
