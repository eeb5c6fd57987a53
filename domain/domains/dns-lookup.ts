import { promises as dns } from 'node:dns';
import type { DnsLookup, RecordType } from './dns-records';

export interface DnsSettings {
  /** `ip[:port]` entries; empty for the system resolver. */
  servers: string[];
  /** Upper bound of one lookup, retries included. */
  timeoutMs: number;
}

/** Codes meaning "the name has no record of that type" (NXDOMAIN, NODATA); every other error is a failed lookup. */
const ABSENT = new Set([dns.NOTFOUND, dns.NODATA, 'ENOTFOUND', 'ENODATA']);

/** An MX record as DomainRecord and DnsLookup write it; a null MX (RFC 7505) has the exchange "" and shows as `.`. */
const mxValue = (r: { priority: number; exchange: string }) => `${r.priority} ${r.exchange || '.'}`;

/**
 * A resolver for one round of checks: its own c-ares channel on the configured servers, and a hard deadline per
 * lookup, TXT or MX alike (c-ares' own timeout doubles per try, so it is not a bound by itself). `close()` cancels
 * what is left.
 */
export function createDnsResolver(settings: DnsSettings): { lookup(type: RecordType, name: string): Promise<DnsLookup>; close(): void } {
  const tries = 2;
  const resolver = new dns.Resolver({ timeout: Math.max(50, Math.floor(settings.timeoutMs / (tries + 1))), tries });
  if (settings.servers.length) resolver.setServers(settings.servers);
  const query = (type: RecordType, name: string): Promise<string[]> =>
    type === 'MX'
      ? resolver.resolveMx(name).then((records) => records.map(mxValue))
      : resolver.resolveTxt(name).then((records) => records.map((chunks) => chunks.join('')));
  const lookup = async (type: RecordType, name: string): Promise<DnsLookup> => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<DnsLookup>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'error', code: 'ETIMEOUT' }), settings.timeoutMs);
    });
    const answer = query(type, name).then(
      (values): DnsLookup => (values.length ? { kind: 'found', values } : { kind: 'none' }),
      (err: NodeJS.ErrnoException): DnsLookup => (ABSENT.has(err.code ?? '') ? { kind: 'none' } : { kind: 'error', code: err.code ?? 'EUNKNOWN' }),
    );
    try {
      return await Promise.race([answer, deadline]);
    } finally {
      clearTimeout(timer);
    }
  };
  return { lookup, close: () => resolver.cancel() };
}
