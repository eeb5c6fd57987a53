import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict } from '../errors';
import { sql } from '../db/sql';

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

/**
 * How long a claim may go without its response before its request is presumed dead (the API process was killed): a
 * /v1/send answers within seconds. A retry after that finds out what the dead request did (see `claimIdempotencyKey`).
 */
const CLAIM_LEASE_MS = 60_000;

/** A claim is the row's `created_at` (as text, microseconds): every later write of the request is conditional on it. */
type IdempotencyClaim = { kind: 'claimed'; token: string } | { kind: 'replay'; statusCode: number; response: unknown };

const inUse = () => conflict('IDEMPOTENCY_KEY_IN_USE', 'A request with this Idempotency-Key is still being processed', 'Retry in a moment to get its response.');

/**
 * Takes `key` for this request, or finds the response it already produced. A key is claimed by inserting its row
 * (or taking over a row older than the TTL); a concurrent request with the same key waits on nothing and gets 409
 * `IDEMPOTENCY_KEY_IN_USE` while the first is in flight; a different body under a used key gets 409
 * `IDEMPOTENCY_KEY_MISMATCH`. A claim older than the lease whose request never answered is the claim of a dead
 * process: if its reserved response (written just before the work is stored) says work that `stored` finds, that
 * response (as `stored` completes it with what only the store decided) is the key's, and is replayed; otherwise
 * nothing was stored and the key is taken over.
 */
async function claimIdempotencyKey(
  em: EntityManager,
  projectId: string,
  key: string,
  hash: string,
  stored: ((reserved: unknown) => Promise<unknown>) | undefined,
): Promise<IdempotencyClaim> {
  const claimed = await sql(em).query<{ token: string }>(
    `insert into idempotency_keys (project_id, key, request_hash) values ($1, $2, $3)
     on conflict (project_id, key) do update set request_hash = excluded.request_hash, status_code = null, response = null, created_at = now()
       where idempotency_keys.created_at < now() - make_interval(secs => $4)
     returning created_at::text as token`,
    [projectId, key, hash, IDEMPOTENCY_TTL_MS / 1000],
  );
  if (claimed.length) return { kind: 'claimed', token: claimed[0]!.token };
  const row = await sql(em).one<{ requestHash: string; statusCode: number | null; response: unknown; token: string; stale: boolean }>(
    `select request_hash as "requestHash", status_code as "statusCode", response, created_at::text as token,
       created_at < now() - make_interval(secs => $1) as stale
     from idempotency_keys where project_id = $2 and key = $3`,
    [CLAIM_LEASE_MS / 1000, projectId, key],
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
  if (row.statusCode !== null) return { kind: 'replay', statusCode: row.statusCode, response: row.response };
  if (!row.stale) throw inUse();
  // The claimant is presumed dead. What it reserved and stored is the key's answer; if it stored nothing, run again.
  const response = row.response !== null && stored ? await stored(row.response) : undefined;
  if (response !== undefined) {
    await sql(em).run(
      `update idempotency_keys set status_code = 200, response = $4 where project_id = $1 and key = $2 and created_at = $3::timestamptz and status_code is null`,
      [projectId, key, row.token, JSON.stringify(response)],
    );
    return { kind: 'replay', statusCode: 200, response };
  }
  const taken = await sql(em).one<{ token: string }>(
    `update idempotency_keys set created_at = now(), response = null where project_id = $1 and key = $2 and created_at = $3::timestamptz and status_code is null
     returning created_at::text as token`,
    [projectId, key, row.token],
  );
  if (!taken) throw inUse(); // another retry took it over first
  return { kind: 'claimed', token: taken.token };
}

/** Records the response the request is about to produce, just before its work is stored; refused if the claim was lost. */
async function reserveIdempotentResponse(em: EntityManager, projectId: string, key: string, token: string, response: unknown): Promise<void> {
  const rows = await sql(em).query<{ key: string }>(
    `update idempotency_keys set response = $1 where project_id = $2 and key = $3 and created_at = $4::timestamptz and status_code is null returning key`,
    [JSON.stringify(response), projectId, key, token],
  );
  if (!rows.length) throw inUse();
}

async function storeIdempotentResponse(em: EntityManager, projectId: string, key: string, token: string, statusCode: number, response: unknown): Promise<void> {
  await sql(em).run(`update idempotency_keys set status_code = $1, response = $2 where project_id = $3 and key = $4 and created_at = $5::timestamptz`, [
    statusCode,
    JSON.stringify(response),
    projectId,
    key,
    token,
  ]);
}

/** The request failed without producing a response worth replaying: free the key so a retry runs again. */
async function releaseIdempotencyKey(em: EntityManager, projectId: string, key: string, token: string): Promise<void> {
  await sql(em).run(`delete from idempotency_keys where project_id = $1 and key = $2 and created_at = $3::timestamptz and status_code is null`, [projectId, key, token]);
}

export async function purgeExpiredIdempotencyKeys(em: EntityManager): Promise<number> {
  const rows = await sql(em).query<{ n: number }>(
    `with gone as (delete from idempotency_keys where created_at < now() - make_interval(secs => $1) returning 1) select count(*)::int as n from gone`,
    [IDEMPOTENCY_TTL_MS / 1000],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Runs `handler` at most once per key within the TTL: the first response is stored and returned again for a retry
 * with the same body. A failure (an AppError or anything else) releases the key, since nothing was accepted. A
 * handler whose work can outlive its process (stored, then the process killed before it answers) calls `reserve` with
 * its response just before storing the work, and `scope.stored` tells from a reserved response whether the work was
 * stored, answering the response to replay (the reserved one, completed with what the store decided) or undefined:
 * a retry after the lease then replays it instead of doing the work again.
 */
export async function withIdempotency<T>(
  em: EntityManager,
  scope: { projectId: string; key: string | undefined; body: unknown; stored?: (reserved: T) => Promise<T | undefined> },
  handler: (reserve: (response: T) => Promise<void>) => Promise<{ status: number; body: T }>,
): Promise<{ status: number; body: T; replayed: boolean }> {
  const { projectId, key } = scope;
  if (!key) return { ...(await handler(async () => undefined)), replayed: false };
  const claim = await claimIdempotencyKey(em, projectId, key, requestHash(scope.body), scope.stored as ((r: unknown) => Promise<unknown>) | undefined);
  if (claim.kind === 'replay') return { status: claim.statusCode, body: claim.response as T, replayed: true };
  let result: { status: number; body: T };
  try {
    result = await handler((response) => reserveIdempotentResponse(em, projectId, key, claim.token, response));
  } catch (err) {
    await releaseIdempotencyKey(em, projectId, key, claim.token).catch(() => undefined);
    throw err;
  }
  await storeIdempotentResponse(em, projectId, key, claim.token, result.status, result.body);
  return { ...result, replayed: false };
}
