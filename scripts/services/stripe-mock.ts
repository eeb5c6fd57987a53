import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { freePort, startProcess, waitForPort, type ManagedProcess } from './process';
import { onPath, temporalCacheDir } from './temporal-server';

/** stripe-mock, Stripe's own API stand-in, built from the Go module proxy (the billing tests talk to it). */
const STRIPE_MOCK_VERSION = 'v0.203.0';

/**
 * Finds `stripe-mock`: $STRIPE_MOCK_PATH, then PATH, then the cache (~/.cache/mailwright/bin), then builds it there
 * with `go install` (once; seconds). Throws when none works: the billing tests cannot run without it.
 */
export function resolveStripeMockBinary(log: (msg: string) => void = console.log): string {
  const explicit = process.env.STRIPE_MOCK_PATH;
  if (explicit) {
    if (!fs.existsSync(explicit)) throw new Error(`STRIPE_MOCK_PATH=${explicit} does not exist`);
    return explicit;
  }
  const found = onPath('stripe-mock') ?? [path.join(temporalCacheDir(), 'stripe-mock')].find((p) => fs.existsSync(p));
  if (found) return found;
  const go = onPath('go');
  if (!go) throw new Error(`No stripe-mock found: install Go (Mailwright builds github.com/stripe/stripe-mock@${STRIPE_MOCK_VERSION} once) or set STRIPE_MOCK_PATH`);
  log(`Building stripe-mock ${STRIPE_MOCK_VERSION} with Go into ${temporalCacheDir()} (once)...`);
  fs.mkdirSync(temporalCacheDir(), { recursive: true });
  execFileSync(go, ['install', `github.com/stripe/stripe-mock@${STRIPE_MOCK_VERSION}`], {
    stdio: 'inherit',
    env: { ...process.env, GOBIN: temporalCacheDir(), GOFLAGS: '-mod=mod' },
  });
  return path.join(temporalCacheDir(), 'stripe-mock');
}

/** Starts stripe-mock over HTTP on loopback; `url` is what STRIPE_API_URL takes. */
export async function startStripeMock(opts: { logFile?: string; log?: (msg: string) => void } = {}): Promise<{ url: string; process: ManagedProcess }> {
  const binary = resolveStripeMockBinary(opts.log);
  const port = await freePort();
  const proc = startProcess('stripe-mock', binary, ['-http-addr', `127.0.0.1:${port}`], { logFile: opts.logFile });
  const failed = proc.exited.then((code) => {
    throw new Error(`stripe-mock exited early (code ${code}); see ${opts.logFile ?? 'its output'}`);
  });
  await Promise.race([waitForPort('127.0.0.1', port, 30_000, 'stripe-mock'), failed]);
  failed.catch(() => undefined);
  return { url: `http://127.0.0.1:${port}`, process: proc };
}
