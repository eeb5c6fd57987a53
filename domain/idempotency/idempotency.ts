import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict } from '../errors';

/** How long a key's first response is kept and replayed. */
const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/** JSON with object keys sorted, so the same body hashes the same whatever order its client wrote the keys in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function requestHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

type IdempotencyClaim = { kind: 'claimed' } | { kind: 'replay'; statusCode: number; response: unknown };

/**
 * Takes `key` for this request, or finds the response it already produced. A key is claimed by inserting its row
 * (or taking over a row older than the TTL); a concurrent request with the same key waits on nothing and gets 409
 * `IDEMPOTENCY_KEY_IN_USE` while the first is in flight; a different body under a used key gets 409
 * `IDEMPOTENCY_KEY_MISMATCH`.
 */
async function claimIdempotencyKey(em: EntityManager, projectId: string, key: string, hash: string): Promise<IdempotencyClaim> {
  const claimed = await em.execute<{ key: string }[]>(
    `insert into idempotency_keys (project_id, key, request_hash) values (?, ?, ?)
     on conflict (project_id, key) do update set request_hash = excluded.request_hash, status_code = null, response = null, created_at = now()
       where idempotency_keys.created_at < now() - make_interval(secs => ?)
     returning key`,
    [projectId, key, hash, IDEMPOTENCY_TTL_MS / 1000],
  );
  if (claimed.length) return { kind: 'claimed' };
  const [row] = await em.execute<{ requestHash: string; statusCode: number | null; response: unknown }[]>(
    `select request_hash as "requestHash", status_code as "statusCode", response from idempotency_keys where project_id = ? and key = ?`,
    [projectId, key],
  );
  // Released between our insert and this read (the first request failed): the client may simply retry.
  if (!row) throw conflict('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key was just being processed', 'Retry the request.');
  if (row.requestHash !== hash) {
    throw conflict(
      'IDEMPOTENCY_KEY_MISMATCH',
      'This Idempotency-Key was already used with a different request body',
      'Use a new key for a new request; a retry must send exactly the same body.',
    );
  }
  if (row.statusCode === null) {
    throw conflict('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still being processed', 'Retry in a moment to get its response.');
  }
  return { kind: 'replay', statusCode: row.statusCode, response: row.response };
}

async function storeIdempotentResponse(em: EntityManager, projectId: string, key: string, statusCode: number, response: unknown): Promise<void> {
  await em.execute(`update idempotency_keys set status_code = ?, response = ? where project_id = ? and key = ?`, [statusCode, JSON.stringify(response), projectId, key]);
}

/** The request failed without producing a response worth replaying: free the key so a retry runs again. */
async function releaseIdempotencyKey(em: EntityManager, projectId: string, key: string): Promise<void> {
  await em.execute(`delete from idempotency_keys where project_id = ? and key = ? and status_code is null`, [projectId, key]);
}

export async function purgeExpiredIdempotencyKeys(em: EntityManager): Promise<number> {
  const rows = await em.execute<{ n: number }[]>(
    `with gone as (delete from idempotency_keys where created_at < now() - make_interval(secs => ?) returning 1) select count(*)::int as n from gone`,
    [IDEMPOTENCY_TTL_MS / 1000],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Runs `handler` at most once per key within the TTL: the first response is stored and returned again for a retry
 * with the same body. A failure (an AppError or anything else) releases the key, since nothing was accepted.
 */
export async function withIdempotency<T>(
  em: EntityManager,
  scope: { projectId: string; key: string | undefined; body: unknown },
  handler: () => Promise<{ status: number; body: T }>,
): Promise<{ status: number; body: T; replayed: boolean }> {
  const { projectId, key } = scope;
  if (!key) return { ...(await handler()), replayed: false };
  const claim = await claimIdempotencyKey(em, projectId, key, requestHash(scope.body));
  if (claim.kind === 'replay') return { status: claim.statusCode, body: claim.response as T, replayed: true };
  let result: { status: number; body: T };
  try {
    result = await handler();
  } catch (err) {
    await releaseIdempotencyKey(em, projectId, key).catch(() => undefined);
    throw err;
  }
  await storeIdempotentResponse(em, projectId, key, result.status, result.body);
  return { ...result, replayed: false };
}
