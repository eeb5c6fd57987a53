import { sql } from '../db/sql';
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
  /** Not attempted: an earlier delivery of the same contact to the endpoint is still pending (README › Webhooks out › Order). */
  | { outcome: 'held'; behind: string }
  | { outcome: 'retry' | 'failed'; error: string; status?: number; /** The receiver's Retry-After (capped at an hour). */ retryAfterMs?: number };

interface Target {
  status: string;
  payload: unknown;
  url: string;
  enabled: boolean;
  endpointId: string;
  secret: string;
  previousSecret: string | null;
  noticeDue: boolean;
  /** The earliest PENDING delivery of the same contact to the endpoint made before this one, if any. */
  behind: string | null;
}

/**
 * Makes one HTTP attempt of a delivery and records it (webhook_attempts), with the delivery's status and the endpoint's
 * failure streak: a success ends the streak, a failure starts it or, once it is older than `disableAfterMs`, disables
 * the endpoint (its other deliveries then end CANCELLED at their next attempt).
 */
export async function attemptDelivery(source: EntityManager | Pool, box: SecretBox, settings: AttemptSettings, deliveryId: string): Promise<AttemptOutcome> {
  const db = sql(source);
  const t = await db.one<Target>(
    `select d.status, d.payload, e.url, e.enabled, e.id as "endpointId", e.secret,
            case when e.previous_secret_expires_at > now() then e.previous_secret end as "previousSecret",
            (not e.enabled and e.disabled_reason is not null and e.owners_notified_at is null) as "noticeDue",
            (select b.id from webhook_deliveries b where b.endpoint_id = d.endpoint_id and b.contact_id = d.contact_id and b.id < d.id and b.status = 'PENDING'
             order by b.id limit 1) as behind
     from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id where d.id = $1`,
    [deliveryId],
  );
  if (!t) return { outcome: 'done', skipped: 'the endpoint or delivery was deleted' };
  if (t.status === 'SUCCEEDED') return { outcome: 'done', skipped: 'delivered already' };
  if (!t.enabled) {
    if (t.noticeDue) await settings.noticeDisabled?.(t.endpointId);
    await db.run(`update webhook_deliveries set status = 'CANCELLED', updated_at = now() where id = $1 and status = 'PENDING'`, [deliveryId]);
    return { outcome: 'done', skipped: 'the endpoint is disabled' };
  }
  if (t.behind) return { outcome: 'held', behind: t.behind };
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
    });
  } catch (err) {
    failure = err instanceof WebhookError ? err : new WebhookError(String(err), 'NETWORK', true);
  }
  const status = result?.status ?? failure?.status ?? null;
  await db.run(
    `insert into webhook_attempts (id, delivery_id, succeeded, response_code, duration_ms, response_body, error) values ($1, $2, $3, $4, $5, $6, $7)`,
    [uuidv7(), deliveryId, !failure, status, result?.durationMs ?? Date.now() - started, result?.responseSnippet ?? failure?.responseSnippet ?? null, failure?.message ?? null],
  );
  const final = failure ? (failure.retryable ? 'PENDING' : 'FAILED') : 'SUCCEEDED';
  await db.run(`update webhook_deliveries set status = $2, attempts = attempts + 1, last_response_code = $3, updated_at = now() where id = $1`, [deliveryId, final, status]);
  if (!failure) {
    await db.run('update webhook_endpoints set failing_since = null where id = $1 and failing_since is not null', [t.endpointId]);
    return { outcome: 'done', status: status ?? undefined };
  }
  const after = await db.one<{ noticeDue: boolean }>(
    `update webhook_endpoints set failing_since = coalesce(failing_since, now()),
       enabled = case when failing_since < now() - $2 * interval '1 millisecond' then false else enabled end,
       disabled_reason = case when failing_since < now() - $2 * interval '1 millisecond'
         then 'Every attempt failed since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') else disabled_reason end
     where id = $1
     returning (not enabled and disabled_reason is not null and owners_notified_at is null) as "noticeDue"`,
    [t.endpointId, settings.disableAfterMs],
  );
  if (after?.noticeDue) await settings.noticeDisabled?.(t.endpointId);
  return { outcome: failure.retryable ? 'retry' : 'failed', error: failure.message, status: status ?? undefined, retryAfterMs: failure.retryAfterMs };
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

/**
 * The first attempt of a batch's deliveries, `concurrency` chains at once, each chain (a contact's deliveries) in
 * order: a delivery that is done, or failed for good, is settled and its chain goes on; one to retry, or held behind
 * an earlier delivery of its contact, stops its chain there with the wait before its next attempt (`waitOf`). Nothing
 * is started after `deadlineMs`: the rest is left, unsettled, to one activity per delivery.
 */
export async function firstPass(
  attempt: (deliveryId: string) => Promise<AttemptOutcome>,
  chains: readonly string[][],
  opts: { concurrency: number; deadlineMs: number; waitOf: (outcome: AttemptOutcome | null) => number },
): Promise<FirstPass> {
  const pass: FirstPass = { settled: [], waits: {} };
  const queue = [...chains];
  const lane = async () => {
    for (let chain = queue.shift(); chain !== undefined; chain = queue.shift()) {
      for (const id of chain) {
        if (Date.now() > opts.deadlineMs) return;
        let outcome: AttemptOutcome | null;
        try {
          outcome = await attempt(id);
        } catch {
          outcome = null; // the database or the owners' notice failed: the slow way retries it
        }
        if (outcome?.outcome === 'done') pass.settled.push({ deliveryId: id, ...outcome });
        else if (outcome?.outcome === 'failed') pass.settled.push({ deliveryId: id, outcome: 'gave_up', error: outcome.error });
        else {
          pass.waits[id] = opts.waitOf(outcome);
          break;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency, queue.length) }, lane));
  return pass;
}
