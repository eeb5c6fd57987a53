import { createHash, randomFillSync } from 'node:crypto';

/** Random bytes drawn in blocks: one call per 256 ids instead of two per id (ids are made on every hot path). */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
function random(n: number): Buffer {
  if (poolOffset + n > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  poolOffset += n;
  return pool.subarray(poolOffset - n, poolOffset);
}

/**
 * UUIDv7 (RFC 9562): 48-bit millisecond timestamp + random bits. Ids sort by creation time, which keeps
 * B-tree inserts local and gives cursor pagination a stable, monotonic key.
 */
let lastMs = 0;
let seq = 0;
export function uuidv7(now = Date.now()): string {
  if (now <= lastMs) {
    now = lastMs;
    seq = (seq + 1) & 0xfff;
    if (seq === 0) now = ++lastMs;
  } else {
    seq = random(2).readUInt16BE(0) & 0x7ff;
  }
  lastMs = now;
  const b = Buffer.from(random(16));
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (seq >> 8);
  b[7] = seq & 0xff;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** `n` ids in creation order. */
export function uuidv7s(n: number): string[] {
  return Array.from({ length: n }, () => uuidv7());
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID's 16 bytes (signed tokens carry ids this way); throws on anything that is not a UUID. */
export function uuidBytes(id: string): Buffer {
  const out = Buffer.allocUnsafe(16);
  writeUuid(id, out, 0);
  return out;
}

/** A hex digit's value by character code (-1: not one). */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX_VALUE['0123456789abcdef'.charCodeAt(i)] = i;
  HEX_VALUE['0123456789ABCDEF'.charCodeAt(i)] = i;
}

/**
 * Writes a UUID's 16 bytes into `out` at `at` (one pass over its characters: a signed link costs no Buffer for its
 * ids); throws as uuidBytes does on anything UUID_RE refuses, having written part of it.
 */
export function writeUuid(id: string, out: Buffer, at: number): void {
  if (typeof id !== 'string' || id.length !== 36) throw new Error(`Not a UUID: ${id}`);
  for (let i = 0, o = at; i < 36; ) {
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (id.charCodeAt(i) !== 0x2d) throw new Error(`Not a UUID: ${id}`);
      i++;
      continue;
    }
    const hi = id.charCodeAt(i);
    const lo = id.charCodeAt(i + 1);
    const h = hi < 128 ? HEX_VALUE[hi]! : -1;
    const l = lo < 128 ? HEX_VALUE[lo]! : -1;
    if (h < 0 || l < 0) throw new Error(`Not a UUID: ${id}`);
    out[o++] = (h << 4) | l;
    i += 2;
  }
}

/** 16 bytes as a UUID string (lowercase, hyphenated). */
export function uuidString(bytes: Buffer): string {
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** `bytes` random bytes as hex (MIME boundaries and other non-secret unique strings). */
export function randomHex(bytes: number): string {
  return random(bytes).toString('hex');
}

/** A UUIDv7 computed in SQL (Postgres 17 has no uuidv7()): the v4 random bits with the millisecond clock in front. */
export const SQL_UUIDV7 = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send((extract(epoch from clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`;

/**
 * A UUID derived from a name (UUIDv8, RFC 9562: the first 16 bytes of SHA-256 with the version and variant bits set):
 * the same name always gives the same id, so a retried step writes the same row instead of a second one.
 */
export function uuidFromName(name: string): string {
  const b = createHash('sha256').update(name).digest().subarray(0, 16);
  b[6] = 0x80 | (b[6]! & 0x0f);
  b[8] = 0x80 | (b[8]! & 0x3f);
  return uuidString(b);
}
