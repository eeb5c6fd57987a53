import { sql, statement } from '../db/sql';
import { uuidv7 } from '../ids';
import type { SecretBox } from '../domains/secret-box';
import { callWebhook, WebhookError, type WebhookResult } from '../automations/webhook';
import { endpointSecretContext, type AddressPolicy } from './webhook-endpoint.service';
import { standardWebhookHeaders, webhookIdOf } from './standard-webhooks';
import type { Pool } from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';

export interface AttemptSettings extends AddressPolicy {
  /** WEBHOOK_TIMEOUT: bound on one call (DNS, connect, request, answer). */
  timeoutMs: number;
  /** WEBHOOK_ENDPOINT_DISABLE_AFTER: an endpoint whose every attempt failed for this long is disabled. */
  disableAfterMs: number;
  /**
   * Tells the project's owners that the service disabled the endpoint (noticeEndpointDisabled): called by the attempt
   * that disables it and by any later one that finds the notice still due; what it throws fails the attempt, which is
   * retried.
   */
  noticeDisabled?: (endpointId: string) => Promise<unknown>;
}

/**
 * What one attempt did: `done` (2xx, or nothing left to do: already delivered, the endpoint deleted or disabled),
 * `retry` (a failure worth another attempt), `failed` (one that cannot succeed: a refused address, a redirect).
 */
export type AttemptOutcome =
  | { outcome: 'done'; status?: number; skipped?: string }
  /**
   * Not attempted: an earlier delivery of the same contact to the endpoint is still pending (README › Webhooks out ›
   * Order); `retrying` when that one has failed an attempt already (so it may be pending for long).
   */
  | { outcome: 'held'; behind: string; retrying: boolean }
  | { outcome: 'retry' | 'failed'; error: string; status?: number; /** The receiver's Retry-After (capped at an hour). */ retryAfterMs?: number };

export interface Target {
  id: string;
  status: string;
  payload: unknown;
  url: string;
  enabled: boolean;
  endpointId: string;
  secret: string;
  previousSecret: string | null;
  noticeDue: boolean;
  /** The earliest PENDING delivery of the same contact to the endpoint made before this one, if any... */
  behind: string | null;
  /** ...and whether it has been attempted already (it failed: it is being retried). */
  behindRetrying: boolean | null;
}

/**
 * What an attempt reads of its delivery, its endpoint and the earlier PENDING delivery of the same contact, for the
 * deliveries `where` names, an earlier one among `$1` not counting (a batch's own are in its chains already).
 */
const targetSql = (where: string, ownExcluded: boolean) => `select d.id, d.status, d.payload, e.url, e.enabled, e.id as "endpointId", e.secret,
          case when e.previous_secret_expires_at > now() then e.previous_secret end as "previousSecret",
          (not e.enabled and e.disabled_reason is not null and e.owners_notified_at is null) as "noticeDue",
          b.id as behind, b.attempts > 0 as "behindRetrying"
   from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
   left join lateral (
     select b.id, b.attempts from webhook_deliveries b
     where b.endpoint_id = d.endpoint_id and b.contact_id = d.contact_id and b.id < d.id and b.status = 'PENDING'${ownExcluded ? ' and b.id <> all($1::uuid[])' : ''}
     order by b.id limit 1
   ) b on true
   where ${where}`;

// Prepared statements (npm run sql:snapshots): an attempt runs the first (unless its batch read it with the second),
// and then the third or the fourth.
const ATTEMPT_TARGET = statement('webhook_attempt_target', targetSql('d.id = $1', false));
const BATCH_TARGETS = statement('webhook_attempt_batch_targets', targetSql('d.id = any($1::uuid[])', true));

/**
 * Successful attempts: stored, their deliveries SUCCEEDED, their endpoints' failure streaks (if any) ended; one round
 * trip for however many.
 */
const RECORD_SUCCESSES = statement(
  'webhook_attempt_record_successes',
  `with v as (
     select * from unnest($1::uuid[], $2::uuid[], $3::int[], $4::int[], $5::text[]) as v(id, delivery_id, response_code, duration_ms, response_body)
   ), attempt as (
     insert into webhook_attempts (id, delivery_id, succeeded, response_code, duration_ms, response_body, error)
     select id, delivery_id, true, response_code, duration_ms, response_body, null from v
   ), delivery as (
     update webhook_deliveries d set status = 'SUCCEEDED', attempts = d.attempts + 1, last_response_code = v.response_code, updated_at = now()
     from v where d.id = v.delivery_id
   )
   update webhook_endpoints set failing_since = null where id = any($6::uuid[]) and failing_since is not null`,
);

/** A successful attempt, to record. */
export interface Success {
  deliveryId: string;
  endpointId: string;
  status: number | null;
  durationMs: number;
  responseBody: string | null;
}

async function recordSuccesses(source: EntityManager | Pool, rows: readonly Success[]): Promise<void> {
  await sql(source).run(RECORD_SUCCESSES, [
    rows.map(() => uuidv7()),
    rows.map((r) => r.deliveryId),
    rows.map((r) => r.status),
    rows.map((r) => r.durationMs),
    rows.map((r) => r.responseBody),
    [...new Set(rows.map((r) => r.endpointId))],
  ]);
}

/**
 * Successful attempts recorded together (the first pass's): written when `max` are waiting or `delayMs` after the
 * first; `flush()` writes the rest and throws what any write threw. Until written, a delivery is PENDING: another
 * batch's delivery of the same contact is held that much longer, and a crash sends it again (at least once).
 */
export function successBuffer(source: EntityManager | Pool, opts: { max: number; delayMs: number }) {
  let rows: Success[] = [];
  let timer: NodeJS.Timeout | undefined;
  const writes: Promise<void>[] = [];
  const write = () => {
    clearTimeout(timer);
    timer = undefined;
    if (rows.length === 0) return;
    const w = recordSuccesses(source, rows);
    w.catch(() => undefined); // awaited by flush(), which throws it
    writes.push(w);
    rows = [];
  };
  return {
    add: (row: Success): void => {
      rows.push(row);
      if (rows.length >= opts.max) write();
      else timer ??= setTimeout(write, opts.delayMs);
    },
    async flush(): Promise<void> {
      write();
      await Promise.all(writes);
    },
  };
}

/**
 * A failed attempt: stored, the delivery PENDING (to retry) or FAILED, and the endpoint's failure streak started or,
 * once older than the disable-after setting ($9, ms), the endpoint disabled; answers whether the owners' notice is due.
 */
const RECORD_FAILURE = statement(
  'webhook_attempt_record_failure',
  `with attempt as (
     insert into webhook_attempts (id, delivery_id, succeeded, response_code, duration_ms, response_body, error) values ($1, $2, false, $4, $5, $6, $7)
   ), delivery as (
     update webhook_deliveries set status = $8, attempts = attempts + 1, last_response_code = $4, updated_at = now() where id = $2
   )
   update webhook_endpoints set failing_since = coalesce(failing_since, now()),
     enabled = case when failing_since < now() - $9 * interval '1 millisecond' then false else enabled end,
     disabled_reason = case when failing_since < now() - $9 * interval '1 millisecond'
       then 'Every attempt failed since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') else disabled_reason end
   where id = $3
   returning (not enabled and disabled_reason is not null and owners_notified_at is null) as "noticeDue"`,
);

/**
 * Makes one HTTP attempt of a delivery and records it (webhook_attempts), with the delivery's status and the endpoint's
 * failure streak: a success ends the streak, a failure starts it or, once it is older than `disableAfterMs`, disables
 * the endpoint (its other deliveries then end CANCELLED at their next attempt).
 */
export async function attemptDelivery(
  source: EntityManager | Pool,
  box: SecretBox,
  settings: AttemptSettings,
  deliveryId: string,
  /** `read`: what the batch read of it (readBatchTargets); `recordSuccess`: where a success is recorded instead of at once. */
  opts: { read?: Target; recordSuccess?: (s: Success) => void } = {},
): Promise<AttemptOutcome> {
  const db = sql(source);
  const { read } = opts;
  // What the batch read at its start serves when it needs no second look: still to send, to an enabled endpoint, and
  // behind nothing (a staler reading would at worst send once more what another run just sent: at least once).
  const t = read?.status === 'PENDING' && read.enabled && !read.behind ? read : await db.one<Target>(ATTEMPT_TARGET, [deliveryId]);
  if (!t) return { outcome: 'done', skipped: 'the endpoint or delivery was deleted' };
  if (t.status === 'SUCCEEDED') return { outcome: 'done', skipped: 'delivered already' };
  if (!t.enabled) {
    if (t.noticeDue) await settings.noticeDisabled?.(t.endpointId);
    await db.run(`update webhook_deliveries set status = 'CANCELLED', updated_at = now() where id = $1 and status = 'PENDING'`, [deliveryId]);
    return { outcome: 'done', skipped: 'the endpoint is disabled' };
  }
  if (t.behind) return { outcome: 'held', behind: t.behind, retrying: t.behindRetrying === true };
  const secrets = [box.decrypt(t.secret, endpointSecretContext(t.endpointId))];
  if (t.previousSecret) secrets.push(box.decrypt(t.previousSecret, endpointSecretContext(t.endpointId)));
  const webhookId = webhookIdOf(deliveryId);

  let result: WebhookResult | undefined;
  let failure: WebhookError | undefined;
  const started = Date.now();
  try {
    result = await callWebhook({
      url: t.url,
      secret: '',
      payload: t.payload,
      idempotencyKey: webhookId,
      timeoutMs: settings.timeoutMs,
      allowPrivateNetworks: settings.allowPrivateNetworks,
      allowedNetworks: settings.allowedNetworks,
      signatureHeaders: (body, ts) => standardWebhookHeaders(secrets, webhookId, ts, body),
      keepAlive: true,
    });
  } catch (err) {
    failure = err instanceof WebhookError ? err : new WebhookError(String(err), 'NETWORK', true);
  }
  const status = result?.status ?? failure?.status ?? null;
  const durationMs = result?.durationMs ?? Date.now() - started;
  if (!failure) {
    const success = { deliveryId, endpointId: t.endpointId, status, durationMs, responseBody: result?.responseSnippet ?? null };
    if (opts.recordSuccess) opts.recordSuccess(success);
    else await recordSuccesses(source, [success]);
    return { outcome: 'done', status: status ?? undefined };
  }
  const after = await db.one<{ noticeDue: boolean }>(RECORD_FAILURE, [
    uuidv7(),
    deliveryId,
    t.endpointId,
    status,
    durationMs,
    failure.responseSnippet ?? null,
    failure.message,
    failure.retryable ? 'PENDING' : 'FAILED',
    settings.disableAfterMs,
  ]);
  if (after?.noticeDue) await settings.noticeDisabled?.(t.endpointId);
  return { outcome: failure.retryable ? 'retry' : 'failed', error: failure.message, status: status ?? undefined, retryAfterMs: failure.retryAfterMs };
}

/**
 * The targets of a batch's deliveries in one statement (the first pass's), each `behind` counting only deliveries of
 * other batches: the batch's own earlier ones of a contact come before it in its chain.
 */
export async function readBatchTargets(source: EntityManager | Pool, deliveryIds: readonly string[]): Promise<Map<string, Target>> {
  return new Map((await sql(source).query<Target>(BATCH_TARGETS, [deliveryIds])).map((t) => [t.id, t]));
}

/** A delivery whose retries ran out: FAILED (unless something else settled it meanwhile). */
export async function giveUpDelivery(source: EntityManager | Pool, deliveryId: string): Promise<void> {
  await sql(source).run(`update webhook_deliveries set status = 'FAILED', updated_at = now() where id = $1 and status = 'PENDING'`, [deliveryId]);
}

/** What the first pass settled, and how long each delivery it stopped at waits before its next attempt. */
export interface FirstPass {
  settled: ({ deliveryId: string } & (Extract<AttemptOutcome, { outcome: 'done' }> | { outcome: 'gave_up'; error: string }))[];
  waits: Record<string, number>;
}

/** The first look again at a chain held behind another batch's delivery, doubling up to the last. */
const HOLD_LOOK_MS = [100, 200, 400, 800, 1_600];

/**
 * The first attempt of a batch's deliveries, `concurrency` at once, each chain (a contact's deliveries) in order: a
 * delivery that is done, or failed for good, is settled and its chain goes on; one to retry stops its chain there with
 * the wait before its next attempt (`waitOf`). One held behind an earlier delivery of its contact that is itself on its
 * first attempt (in another batch's pass, most likely) is looked at again shortly, the lane doing other chains
 * meanwhile, for up to `holdForMs`; held longer, or behind one being retried, its chain stops there too. Nothing is
 * started after `deadlineMs`: the rest is left, unsettled, to one activity per delivery.
 */
export async function firstPass(
  attempt: (deliveryId: string) => Promise<AttemptOutcome>,
  chains: readonly string[][],
  opts: { concurrency: number; deadlineMs: number; waitOf: (outcome: AttemptOutcome | null) => number; holdForMs?: number },
): Promise<FirstPass> {
  const pass: FirstPass = { settled: [], waits: {} };
  interface Run {
    ids: readonly string[];
    /** The next delivery of the chain to attempt. */
    at: number;
    /** Not looked at again before this (ms). */
    notBefore: number;
    heldSince?: number;
    looks: number;
  }
  const runs: Run[] = chains.map((ids) => ({ ids, at: 0, notBefore: 0, looks: 0 }));
  const stop = (run: Run, outcome: AttemptOutcome | null) => void (pass.waits[run.ids[run.at]!] = opts.waitOf(outcome));
  /** Goes along one chain until it ends or stops; a chain to look at again later goes back in `runs`. */
  const advance = async (run: Run) => {
    for (; run.at < run.ids.length; run.at++) {
      if (Date.now() > opts.deadlineMs) return;
      const id = run.ids[run.at]!;
      let outcome: AttemptOutcome | null;
      try {
        outcome = await attempt(id);
      } catch {
        outcome = null; // the database or the owners' notice failed: the slow way retries it
      }
      if (outcome?.outcome === 'done') pass.settled.push({ deliveryId: id, ...outcome });
      else if (outcome?.outcome === 'failed') pass.settled.push({ deliveryId: id, outcome: 'gave_up', error: outcome.error });
      else if (outcome?.outcome === 'held' && !outcome.retrying && Date.now() - (run.heldSince ??= Date.now()) < (opts.holdForMs ?? 0)) {
        run.notBefore = Date.now() + HOLD_LOOK_MS[Math.min(run.looks++, HOLD_LOOK_MS.length - 1)]!;
        runs.push(run);
        return;
      } else return stop(run, outcome);
      run.heldSince = undefined;
      run.looks = 0;
    }
  };
  const lane = async () => {
    while (runs.length > 0 && Date.now() <= opts.deadlineMs) {
      const now = Date.now();
      const i = runs.findIndex((r) => r.notBefore <= now);
      if (i < 0) {
        const next = Math.min(...runs.map((r) => r.notBefore), opts.deadlineMs + 1);
        await new Promise((r) => setTimeout(r, next - now));
        continue;
      }
      await advance(runs.splice(i, 1)[0]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, runs.length) }, lane));
  // Chains still held when the pass ended wait as a held delivery does.
  for (const run of runs) if (run.heldSince !== undefined) stop(run, { outcome: 'held', behind: '', retrying: false });
  return pass;
}
