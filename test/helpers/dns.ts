import { promises as dns } from 'node:dns';
import { stackEnv } from '../stack-env';
import type { ZoneRecords } from '../support/dns-server';

async function control(method: string, name: string, body?: unknown): Promise<void> {
  const res = await fetch(`${stackEnv().dnsControlUrl}/zone/${encodeURIComponent(name)}`, {
    method,
    headers: body === undefined ? undefined : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status !== 204) throw new Error(`DNS control ${method} ${name}: ${res.status} ${await res.text()}`);
}

/** Publishes TXT records at `name` on the test stack's DNS server (replacing what was there). */
export const setTxt = (name: string, values: string[]) => control('PUT', name, { txt: values });

/**
 * Publishes records of several types at `name` (replacing what was there): e.g. `{ mx: [{ exchange, priority }], a: [...] }`.
 * A type left out answers NODATA; `mx: [{ exchange: '.', priority: 0 }]` is a null MX (RFC 7505).
 */
export const setRecords = (name: string, records: ZoneRecords) => control('PUT', name, records);

/** Removes `name` from the zone: lookups answer NXDOMAIN. */
export const removeName = (name: string) => control('DELETE', name);

/** Makes lookups of `name` fail: SERVFAIL, or no answer at all (a timeout). */
export const breakName = (name: string, mode: 'servfail' | 'drop') => control('PUT', name, { mode });

/**
 * Publishes every record of a domain as returned by the API: TXT values as they are, MX values (`<preference>
 * <exchange>`) as MX records. The records of one name go in one change, since a change replaces the name's records.
 */
export async function publishRecords(records: { type?: string; name: string; value: string }[]): Promise<void> {
  const byName = new Map<string, ZoneRecords>();
  for (const r of records) {
    const zone = byName.get(r.name) ?? {};
    if (r.type === 'MX') {
      const [priority, exchange] = r.value.split(/\s+/);
      zone.mx = [...(zone.mx ?? []), { priority: Number(priority), exchange: exchange! }];
    } else {
      zone.txt = [...(zone.txt ?? []), r.value];
    }
    byName.set(r.name, zone);
  }
  for (const [name, zone] of byName) await setRecords(name, zone);
}

/** A resolver for the `mailauth` package that asks the test stack's DNS server. */
export function mailauthResolver(): (name: string, rrtype: string) => Promise<string[][]> {
  const resolver = new dns.Resolver({ timeout: 1_000, tries: 2 });
  resolver.setServers([stackEnv().dnsServer]);
  return async (name, rrtype) => {
    if (rrtype !== 'TXT') throw Object.assign(new Error(`no ${rrtype} records in the test zone`), { code: 'ENOTFOUND' });
    return resolver.resolveTxt(name);
  };
}
