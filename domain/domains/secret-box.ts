import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/**
 * Encrypts secrets at rest (DKIM private keys) with AES-256-GCM. The key is derived from APP_SECRET with HKDF-SHA256
 * and a purpose label, so the same APP_SECRET can feed other purposes without key reuse. Each value is bound to a
 * context string (e.g. `dkim:<domain id>`) as additional authenticated data: a ciphertext copied to another row does
 * not decrypt there.
 *
 * Format: `v1.<iv>.<tag>.<ciphertext>`, each part base64url. Changing APP_SECRET makes stored values unreadable.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(appSecret: string, purpose = 'mailwright/secret-box/v1') {
    if (!appSecret) throw new Error('SecretBox needs a secret');
    this.key = Buffer.from(hkdfSync('sha256', Buffer.from(appSecret, 'utf8'), Buffer.alloc(0), purpose, 32));
  }

  encrypt(plaintext: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  /** Throws when the value was not made by this key for this context, or was altered. */
  decrypt(sealed: string, context: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new Error('Not a sealed value (unknown format)');
    const [, iv, tag, ciphertext] = parts.map((p) => Buffer.from(p, 'base64url'));
    if (iv!.length !== 12 || tag!.length !== 16) throw new Error('Not a sealed value (bad iv or tag)');
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv!);
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tag!);
    try {
      return Buffer.concat([decipher.update(ciphertext!), decipher.final()]).toString('utf8');
    } catch {
      throw new Error('Sealed value cannot be decrypted: wrong APP_SECRET, wrong context, or altered data');
    }
  }
}

/** The context that binds a domain's encrypted DKIM key to its row. */
export const dkimKeyContext = (domainId: string) => `dkim:${domainId}`;
