import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../domain/config';
import { temporalConnectionOptions } from '../../temporal/connection';

// How the API, the worker and the inbound server reach Temporal (README › Production › Temporal Cloud).
const base = { DATABASE_URL: 'postgres://localhost/x', NODE_ENV: 'test', TEMPORAL_ADDRESS: 'ns.acct.tmprl.cloud:7233' };
const options = (env: Record<string, string>) => temporalConnectionOptions(loadConfig({ ...base, ...env }).temporal);

test('without TLS settings: plain TCP to the address (the dev server, a cluster inside the network)', () => {
  expect(options({})).toEqual({ address: 'ns.acct.tmprl.cloud:7233' });
  expect(options({ TEMPORAL_TLS: 'false', TEMPORAL_API_KEY: '' })).toEqual({ address: 'ns.acct.tmprl.cloud:7233' });
});

test('an API key turns TLS on (system roots) and is sent with every call', () => {
  expect(options({ TEMPORAL_API_KEY: 'key-123' })).toEqual({ address: 'ns.acct.tmprl.cloud:7233', tls: {}, apiKey: 'key-123' });
  expect(options({ TEMPORAL_TLS: 'true' })).toEqual({ address: 'ns.acct.tmprl.cloud:7233', tls: {} });
});

test('a client certificate pair (mTLS), a root CA and a server name are read from their files', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-tls-'));
  try {
    for (const f of ['client.pem', 'client.key', 'ca.pem']) fs.writeFileSync(path.join(dir, f), `contents of ${f}`);
    const o = options({
      TEMPORAL_TLS_CERT: path.join(dir, 'client.pem'),
      TEMPORAL_TLS_KEY: path.join(dir, 'client.key'),
      TEMPORAL_TLS_CA: path.join(dir, 'ca.pem'),
      TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    });
    expect(o.tls?.clientCertPair?.crt.toString()).toBe('contents of client.pem');
    expect(o.tls?.clientCertPair?.key.toString()).toBe('contents of client.key');
    expect(Buffer.from(o.tls!.serverRootCACertificate!).toString()).toBe('contents of ca.pem');
    expect(o.tls?.serverNameOverride).toBe('temporal.internal');
    expect(o.apiKey).toBeUndefined();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a certificate without its key (or the other way round) is refused at start, naming the missing variable', () => {
  expect(() => loadConfig({ ...base, TEMPORAL_TLS_CERT: '/x.pem' })).toThrow(/TEMPORAL_TLS_KEY/);
  expect(() => loadConfig({ ...base, TEMPORAL_TLS_KEY: '/x.key' })).toThrow(/TEMPORAL_TLS_CERT/);
});
