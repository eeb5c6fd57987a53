import { promises as dns } from 'node:dns';
import type { DnsSettings } from '../domains/dns-lookup';

/** One DNS query's outcome: records, NOERROR without records (NODATA), NXDOMAIN, or a failure (SERVFAIL, timeout...). */
export type Lookup<T> = { kind: 'found'; records: T[] } | { kind: 'nodata' } | { kind: 'nxdomain' } | { kind: 'error'; code: string };

export interface MxRecord {
  exchange: string;
  priority: number;
}

/** The answers the verdict is made of: the domain's MX, A, AAAA and NS, and A/AAAA of www.<domain>. */
export interface DomainDns {
  mx: Lookup<MxRecord>;
  a: Lookup<string>;
  aaaa: Lookup<string>;
  ns: Lookup<string>;
  wwwA: Lookup<string>;
  wwwAaaa: Lookup<string>;
}

type TriState = 'yes' | 'no' | 'unknown';

export interface DnsVerdict {
  /** Some query answered NOERROR (records or NODATA): the name exists. All NXDOMAIN: it does not. */
  domainExists: TriState;
  /** MX hosts, or the implicit MX (RFC 5321 § 5.1: no MX records, but A/AAAA), and not a null MX (RFC 7505). */
  acceptsMail: TriState;
  /** At least one MX record naming a host (a null MX names none). */
  hasMxRecords: boolean;
  nullMx: boolean;
  /** Mail goes to the domain's own A/AAAA, since it publishes no MX. */
  implicitMx: boolean;
  /** The domain or www.<domain> has an A or AAAA record. */
  hasWebsite: boolean;
  /** At least one query failed or timed out: flags that depend on it are false for lack of evidence. */
  lookupFailed: boolean;
}

const found = <T>(l: Lookup<T>): l is { kind: 'found'; records: T[] } => l.kind === 'found' && l.records.length > 0;
/** A NOERROR answer, with or without records: the name exists. */
const answered = (l: Lookup<unknown>) => l.kind === 'found' || l.kind === 'nodata';
/** RFC 7505 null MX: the root as exchange ("" as Node reports it, "." as written in zone files). */
const isNullMx = (r: MxRecord) => r.exchange === '' || r.exchange === '.';

/** The verdict of a domain's answers (pure, so the rules are unit-tested without DNS). */
export function evaluateDns(d: DomainDns): DnsVerdict {
  const apex = [d.mx, d.a, d.aaaa, d.ns];
  const domainExists: TriState = apex.some(answered) ? 'yes' : apex.some((l) => l.kind === 'nxdomain') ? 'no' : 'unknown';
  const mxHosts = found(d.mx) ? d.mx.records.filter((r) => !isNullMx(r)) : [];
  // A null MX among real ones is a misconfiguration (RFC 7505 § 3): the real hosts win.
  const nullMx = found(d.mx) && mxHosts.length === 0;
  const hasAddress = found(d.a) || found(d.aaaa);

  let acceptsMail: TriState;
  let implicitMx = false;
  if (domainExists === 'no') acceptsMail = 'no';
  else if (mxHosts.length) acceptsMail = 'yes';
  else if (nullMx) acceptsMail = 'no';
  else if (d.mx.kind === 'nodata' || d.mx.kind === 'nxdomain') {
    // No MX: RFC 5321 § 5.1 falls back to the domain's own addresses (only when MX answered, never on a failed lookup).
    if (hasAddress) {
      acceptsMail = 'yes';
      implicitMx = true;
    } else acceptsMail = d.a.kind === 'error' || d.aaaa.kind === 'error' ? 'unknown' : 'no';
  } else acceptsMail = 'unknown';

  return {
    domainExists,
    acceptsMail,
    hasMxRecords: mxHosts.length > 0,
    nullMx,
    implicitMx,
    hasWebsite: hasAddress || found(d.wwwA) || found(d.wwwAaaa),
    lookupFailed: Object.values(d).some((l: Lookup<unknown>) => l.kind === 'error'),
  };
}

/** "The name has no such record" (NODATA) vs "the name does not exist" (NXDOMAIN), as c-ares reports them. */
const NODATA = new Set([dns.NODATA, 'ENODATA']);
const NXDOMAIN = new Set([dns.NOTFOUND, 'ENOTFOUND']);
/** Longest name a www. prefix still fits in (RFC 1035: 253 characters in text form). */
const MAX_WWW_BASE = 253 - 'www.'.length;

/**
 * Resolves the records the verifier needs through the configured servers, every query in parallel and each bounded by
 * `timeoutMs` (c-ares' own timeout doubles per try, so it is not a bound by itself). One resolver serves the whole
 * process: a query that outlives its deadline is left to c-ares' own timeout instead of cancelling everyone's queries.
 */
export function createDomainResolver(settings: DnsSettings): { lookup(domain: string): Promise<DomainDns> } {
  const tries = 2;
  const resolver = new dns.Resolver({ timeout: Math.max(50, Math.floor(settings.timeoutMs / (tries + 1))), tries });
  if (settings.servers.length) resolver.setServers(settings.servers);

  const bounded = async <T>(query: () => Promise<T[]>): Promise<Lookup<T>> => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<Lookup<T>>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'error', code: 'ETIMEOUT' }), settings.timeoutMs);
    });
    const answer = query().then(
      (records): Lookup<T> => (records.length ? { kind: 'found', records } : { kind: 'nodata' }),
      (err: NodeJS.ErrnoException): Lookup<T> => {
        const code = err.code ?? 'EUNKNOWN';
        return NODATA.has(code) ? { kind: 'nodata' } : NXDOMAIN.has(code) ? { kind: 'nxdomain' } : { kind: 'error', code };
      },
    );
    try {
      return await Promise.race([answer, deadline]);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    lookup: async (domain) => {
      const www = `www.${domain}`;
      const tooLong = domain.length > MAX_WWW_BASE;
      const [mx, a, aaaa, ns, wwwA, wwwAaaa] = await Promise.all([
        bounded(() => resolver.resolveMx(domain)),
        bounded(() => resolver.resolve4(domain)),
        bounded(() => resolver.resolve6(domain)),
        bounded(() => resolver.resolveNs(domain)),
        tooLong ? ({ kind: 'nxdomain' } as const) : bounded(() => resolver.resolve4(www)),
        tooLong ? ({ kind: 'nxdomain' } as const) : bounded(() => resolver.resolve6(www)),
      ]);
      return { mx, a, aaaa, ns, wwwA, wwwAaaa };
    },
  };
}
