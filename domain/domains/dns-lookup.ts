import { promises as dns } from 'node:dns';
import type { TxtLookup } from './dns-records';

export interface DnsSettings {
  /** `ip[:port]` entries; empty for the system resolver. */
  servers: string[];
  /** Upper bound of one lookup, retries included. */
  timeoutMs: number;
}

/** Codes meaning "the name has no TXT record" (NXDOMAIN, NODATA); every other error is a failed lookup. */
const ABSENT = new Set([dns.NOTFOUND, dns.NODATA, 'ENOTFOUND', 'ENODATA']);

/**
 * A TXT resolver for one round of checks: its own c-ares channel on the configured servers, and a hard deadline per
 * lookup (c-ares' own timeout doubles per try, so it is not a bound by itself). `close()` cancels what is left.
 */
export function createTxtResolver(settings: DnsSettings): { lookup(name: string): Promise<TxtLookup>; close(): void } {
  const tries = 2;
  const resolver = new dns.Resolver({ timeout: Math.max(50, Math.floor(settings.timeoutMs / (tries + 1))), tries });
  if (settings.servers.length) resolver.setServers(settings.servers);
  const lookup = async (name: string): Promise<TxtLookup> => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<TxtLookup>((resolve) => {
      timer = setTimeout(() => resolve({ kind: 'error', code: 'ETIMEOUT' }), settings.timeoutMs);
    });
    const query = resolver.resolveTxt(name).then(
      (records): TxtLookup => (records.length ? { kind: 'found', values: records.map((chunks) => chunks.join('')) } : { kind: 'none' }),
      (err: NodeJS.ErrnoException): TxtLookup => (ABSENT.has(err.code ?? '') ? { kind: 'none' } : { kind: 'error', code: err.code ?? 'EUNKNOWN' }),
    );
    try {
      return await Promise.race([query, deadline]);
    } finally {
      clearTimeout(timer);
    }
  };
  return { lookup, close: () => resolver.cancel() };
}
