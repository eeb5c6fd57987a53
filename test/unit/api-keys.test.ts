import { generateKeyPair, hashSecretKey, keyKind, secretKeyHint } from '../../domain/projects/api-keys';
import { uuidv7 } from '../../domain/ids';

describe('API keys', () => {
  test('a pair has the pk_/sk_ prefixes and 32 URL-safe characters each, and pairs differ', () => {
    const a = generateKeyPair();
    const b = generateKeyPair();
    expect(a.publicKey).toMatch(/^pk_[A-Za-z0-9_-]{32}$/);
    expect(a.secretKey).toMatch(/^sk_[A-Za-z0-9_-]{32}$/);
    expect(a.secretKey).not.toBe(b.secretKey);
  });

  test('the stored hash is deterministic, hex, and not the key', () => {
    const { secretKey } = generateKeyPair();
    expect(hashSecretKey(secretKey)).toBe(hashSecretKey(secretKey));
    expect(hashSecretKey(secretKey)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashSecretKey(secretKey)).not.toContain(secretKey.slice(3));
    expect(secretKeyHint(secretKey)).toBe(secretKey.slice(0, 10));
  });

  test.each([
    ['sk_abc', 'secret'],
    ['pk_abc', 'public'],
    ['abc', undefined],
    ['SK_abc', undefined],
  ])('keyKind(%s) = %s', (key, kind) => expect(keyKind(key)).toBe(kind));
});

describe('uuidv7', () => {
  test('ids are valid v7 UUIDs and sort in creation order, even within one millisecond', () => {
    const ids = Array.from({ length: 2000 }, () => uuidv7());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
