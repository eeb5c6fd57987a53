import { generateKeyPair as generateKeyPairCb, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPair = promisify(generateKeyPairCb);

export interface DkimKeyPair {
  selector: string;
  /** PKCS#8 PEM; store it only encrypted (SecretBox). */
  privateKeyPem: string;
  /** Base64 of the DER SubjectPublicKeyInfo: the `p=` tag of the DNS record. */
  publicKeyBase64: string;
}

/** A selector of its own per domain (`mw-` + 8 hex), so a re-added domain never collides with a cached old record. */
function newDkimSelector(): string {
  return `mw-${randomBytes(4).toString('hex')}`;
}

/** The RSA key sizes a new domain's DKIM key may have (DKIM_KEY_BITS). */
export type DkimKeyBits = 1024 | 2048;

/**
 * An RSA key pair (generated off the event loop), 2048 bits unless asked otherwise. 1024 bits is what some DNS hosts
 * need: their TXT records take one 255-character string, and a 2048-bit key's record is about 400.
 */
export async function generateDkimKeyPair(bits: DkimKeyBits = 2048): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPair('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { selector: newDkimSelector(), privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
}

/**
 * The tags of a DKIM key record (`v=DKIM1; k=rsa; p=...`), RFC 6376 § 3.6.1: tag names lowercased, whitespace
 * (folding included) removed from values. Returns undefined for text that is not a tag list.
 */
export function parseDkimTags(text: string): Map<string, string> | undefined {
  const tags = new Map<string, string>();
  for (const part of text.split(';')) {
    if (!part.trim()) continue;
    const eq = part.indexOf('=');
    if (eq < 0) return undefined;
    const name = part.slice(0, eq).trim().toLowerCase();
    if (!/^[a-z][a-z0-9_]*$/.test(name) || tags.has(name)) return undefined;
    tags.set(name, part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

/** Does a published TXT value carry this public key as an RSA DKIM key? Tag order, spacing and extra tags do not matter. */
export function dkimRecordMatches(published: string, publicKeyBase64: string): boolean {
  const tags = parseDkimTags(published);
  if (!tags) return false;
  const v = tags.get('v');
  if (v !== undefined && v !== 'DKIM1') return false;
  const k = tags.get('k');
  if (k !== undefined && k.toLowerCase() !== 'rsa') return false;
  return tags.get('p') === publicKeyBase64.replace(/\s+/g, '');
}
