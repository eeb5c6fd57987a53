import fs from 'node:fs';
import type { TLSConfig } from '@temporalio/client';
import type { Config } from '../domain/config';

/**
 * How every process of the service reaches the Temporal frontend (README › Production › Temporal Cloud): the address,
 * and for a frontend behind TLS the API key or the client certificate pair (mTLS) and the server's root CA. The worker's
 * native connection and the clients take the same options.
 */
export function temporalConnectionOptions(cfg: Config['temporal']): { address: string; tls?: TLSConfig; apiKey?: string } {
  if (!cfg.tls) return { address: cfg.address };
  const { certFile, keyFile, caFile, serverName } = cfg.tls;
  const tls: TLSConfig = {
    ...(certFile && keyFile ? { clientCertPair: { crt: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) } } : {}),
    ...(caFile ? { serverRootCACertificate: fs.readFileSync(caFile) } : {}),
    ...(serverName ? { serverNameOverride: serverName } : {}),
  };
  return { address: cfg.address, tls, ...(cfg.apiKey ? { apiKey: cfg.apiKey } : {}) };
}
