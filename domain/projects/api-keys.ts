import { createHash, randomBytes } from 'node:crypto';

const PUBLIC_KEY_PREFIX = 'pk_';
const SECRET_KEY_PREFIX = 'sk_';

export interface KeyPair {
  publicKey: string;
  secretKey: string;
}

/** A fresh pair: 192 random bits each, URL-safe. */
export function generateKeyPair(): KeyPair {
  return {
    publicKey: PUBLIC_KEY_PREFIX + randomBytes(24).toString('base64url'),
    secretKey: SECRET_KEY_PREFIX + randomBytes(24).toString('base64url'),
  };
}

/**
 * Secret keys are random 192-bit strings, so a plain SHA-256 is a safe and fast lookup hash (a slow KDF such as
 * argon2 guards low-entropy passwords; here it would only cost every API request a few milliseconds).
 */
export function hashSecretKey(secretKey: string): string {
  return createHash('sha256').update(secretKey).digest('hex');
}

export function secretKeyHint(secretKey: string): string {
  return secretKey.slice(0, 10);
}

export type KeyKind = 'public' | 'secret';

export function keyKind(key: string): KeyKind | undefined {
  if (key.startsWith(SECRET_KEY_PREFIX)) return 'secret';
  if (key.startsWith(PUBLIC_KEY_PREFIX)) return 'public';
  return undefined;
}
