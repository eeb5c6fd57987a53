import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, type Sql } from '../db/sql';
import { uuidv7 } from '../ids';
import { decodeCursor, toPage, type CursorPage } from '../pagination';
import { notFound, validationError } from '../errors';
import type { SecretBox } from '../domains/secret-box';
import { refusedAddressReason } from '../automations/webhook';
import { newEndpointSecret, WEBHOOK_TEST_TYPE, type WebhookPayload } from './standard-webhooks';
import type { WebhookDeliveryStatus } from './webhook-endpoint.entity';

/** After a rotation the previous secret keeps signing (beside the new one) for this long. */
export const SECRET_ROTATION_GRACE_MS = 24 * 3_600_000;

/** The SSRF settings of the WEBHOOK step, which endpoints share (README › WEBHOOK steps › Which addresses can be called). */
export interface AddressPolicy {
  allowPrivateNetworks: boolean;
  allowedNetworks: readonly string[];
}

export interface EndpointRow {
  id: string;
  projectId: string;
  url: string;
  description: string | null;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  failingSince: Date | null;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const ENDPOINT_COLUMNS = `id, project_id as "projectId", url, description, event_types as "eventTypes", enabled, disabled_reason as "disabledReason",
  failing_since as "failingSince", case when previous_secret_expires_at > now() then previous_secret_expires_at end as "previousSecretExpiresAt",
  created_at as "createdAt", updated_at as "updatedAt"`;

/** The context that binds an endpoint's sealed secret to its row. */
export const endpointSecretContext = (endpointId: string) => `webhook-endpoint:${endpointId}`;

function inAllowedNetwork(address: string, policy: AddressPolicy): boolean {
  const ip = ipaddr.process(address);
  return policy.allowedNetworks.some((cidr) => {
    const [range, bits] = ipaddr.parseCIDR(cidr);
    return range.kind() === ip.kind() && ip.match(range, bits);
  });
}

/**
 * What is wrong with an endpoint URL, or null. https always; http only for an address the SSRF guard lets through
 * although it is not public (WEBHOOK_ALLOW_PRIVATE_NETWORKS, or an IP literal inside WEBHOOK_ALLOWED_NETWORKS): an
 * internal receiver, never the open internet in clear text. An IP literal the guard refuses is refused here already;
 * a name is checked at every call, against each address DNS gives.
 */
export function endpointUrlProblem(raw: string, policy: AddressPolicy): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'not a valid URL';
  }
  if (url.username || url.password) return 'must not contain credentials';
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const literal = isIP(host) !== 0;
  const internal = policy.allowPrivateNetworks || (literal && inAllowedNetwork(host, policy));
  if (url.protocol === 'http:' && !internal) return 'must be https (http only for an internal receiver the SSRF guard allows: WEBHOOK_ALLOWED_NETWORKS)';
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be https';
  if (literal && !internal) {
    const reason = refusedAddressReason(host);
    if (reason) return `${host} is refused: ${reason}`;
  }
  return null;
}

export interface EndpointInput {
  url: string;
  description?: string | null;
  eventTypes: string[];
  enabled?: boolean;
}

function checkUrl(url: string, policy: AddressPolicy): void {
  const problem = endpointUrlProblem(url, policy);
  if (problem) throw validationError([{ field: 'body.url', message: `The URL ${problem}`, code: 'invalid_url' }]);
}

const dedupe = (types: string[]) => [...new Set(types)];

/** Creates an endpoint; returns it with its secret, which is shown this once. */
export async function createEndpoint(em: EntityManager, box: SecretBox, policy: AddressPolicy, projectId: string, input: EndpointInput): Promise<EndpointRow & { secret: string }> {
  checkUrl(input.url, policy);
  const id = uuidv7();
  const secret = newEndpointSecret();
  const row = await sql(em).one<EndpointRow>(
    `insert into webhook_endpoints (id, project_id, url, description, event_types, enabled, secret) values ($1, $2, $3, $4, $5::jsonb, $6, $7)
     returning ${ENDPOINT_COLUMNS}`,
    [id, projectId, input.url, input.description ?? null, JSON.stringify(dedupe(input.eventTypes)), input.enabled ?? true, box.encrypt(secret, endpointSecretContext(id))],
  );
  return { ...row!, secret };
}

export async function listEndpoints(em: EntityManager, projectId: string, q: { limit: number; cursor?: string }): Promise<CursorPage<EndpointRow>> {
  const after = decodeCursor(q.cursor);
  const db = sql(em);
  const rows = await db.query<EndpointRow>(
    `select ${ENDPOINT_COLUMNS} from webhook_endpoints where project_id = $1 and ($2::uuid is null or id < $2) order by id desc limit $3`,
    [projectId, after ?? null, q.limit + 1],
  );
  const total = after ? 0 : Number((await db.one<{ n: string }>('select count(*)::text as n from webhook_endpoints where project_id = $1', [projectId]))!.n);
  return toPage(rows, q.limit, total);
}

export async function getEndpoint(db: Sql, projectId: string, id: string): Promise<EndpointRow> {
  const row = await db.one<EndpointRow>(`select ${ENDPOINT_COLUMNS} from webhook_endpoints where id = $1 and project_id = $2`, [id, projectId]);
  if (!row) throw notFound('Webhook endpoint');
  return row;
}

/** Changes what is given. Enabling an endpoint (again) clears its failure streak and the reason it was disabled. */
export async function updateEndpoint(em: EntityManager, policy: AddressPolicy, projectId: string, id: string, input: Partial<EndpointInput>): Promise<EndpointRow> {
  if (input.url !== undefined) checkUrl(input.url, policy);
  const row = await sql(em).one<EndpointRow>(
    `update webhook_endpoints set url = coalesce($3, url), description = case when $4 then $5 else description end,
       event_types = coalesce($6::jsonb, event_types), enabled = coalesce($7, enabled),
       failing_since = case when $7 then null else failing_since end, disabled_reason = case when $7 is not null then null else disabled_reason end,
       owners_notified_at = case when $7 is not null then null else owners_notified_at end,
       updated_at = now()
     where id = $1 and project_id = $2 returning ${ENDPOINT_COLUMNS}`,
    [id, projectId, input.url ?? null, input.description !== undefined, input.description ?? null, input.eventTypes ? JSON.stringify(dedupe(input.eventTypes)) : null, input.enabled ?? null],
  );
  if (!row) throw notFound('Webhook endpoint');
  return row;
}

/** Deletes an endpoint with its deliveries; running deliveries find it gone and stop. */
export async function deleteEndpoint(em: EntityManager, projectId: string, id: string): Promise<void> {
  if ((await sql(em).run('delete from webhook_endpoints where id = $1 and project_id = $2', [id, projectId])) === 0) throw notFound('Webhook endpoint');
}

/**
 * A new secret; the current one becomes the previous one and signs too for SECRET_ROTATION_GRACE_MS (a rotation within
 * that time drops the older of the two). Returns the new secret, shown this once.
 */
export async function rotateEndpointSecret(em: EntityManager, box: SecretBox, projectId: string, id: string): Promise<EndpointRow & { secret: string }> {
  const secret = newEndpointSecret();
  const row = await sql(em).one<EndpointRow>(
    `update webhook_endpoints set previous_secret = secret, previous_secret_expires_at = now() + $4 * interval '1 millisecond', secret = $3, updated_at = now()
     where id = $1 and project_id = $2 returning ${ENDPOINT_COLUMNS}`,
    [id, projectId, box.encrypt(secret, endpointSecretContext(id)), SECRET_ROTATION_GRACE_MS],
  );
  if (!row) throw notFound('Webhook endpoint');
  return { ...row, secret };
}

export interface AttemptRow {
  id: string;
  succeeded: boolean;
  responseCode: number | null;
  durationMs: number;
  responseBody: string | null;
  error: string | null;
  createdAt: Date;
}

export interface DeliveryRow {
  id: string;
  endpointId: string;
  eventId: string | null;
  type: string;
  payload: WebhookPayload;
  status: WebhookDeliveryStatus;
  attempts: number;
  lastResponseCode: number | null;
  createdAt: Date;
  updatedAt: Date;
}

const DELIVERY_COLUMNS = `id, endpoint_id as "endpointId", event_id as "eventId", type, payload, status, attempts, last_response_code as "lastResponseCode",
  created_at as "createdAt", updated_at as "updatedAt"`;

/** An endpoint's deliveries, newest first, each with its attempts (oldest first). */
export async function listDeliveries(
  em: EntityManager,
  projectId: string,
  endpointId: string,
  q: { limit: number; cursor?: string; status?: WebhookDeliveryStatus },
): Promise<CursorPage<DeliveryRow & { attemptList: AttemptRow[] }>> {
  const db = sql(em);
  await getEndpoint(db, projectId, endpointId);
  const after = decodeCursor(q.cursor);
  const rows = await db.query<DeliveryRow>(
    `select ${DELIVERY_COLUMNS} from webhook_deliveries where endpoint_id = $1 and ($2::uuid is null or id < $2) and ($3::text is null or status = $3)
     order by id desc limit $4`,
    [endpointId, after ?? null, q.status ?? null, q.limit + 1],
  );
  const total = after
    ? 0
    : Number((await db.one<{ n: string }>('select count(*)::text as n from webhook_deliveries where endpoint_id = $1 and ($2::text is null or status = $2)', [endpointId, q.status ?? null]))!.n);
  const page = toPage(rows, q.limit, total);
  const attempts = await db.query<AttemptRow & { deliveryId: string }>(
    `select id, delivery_id as "deliveryId", succeeded, response_code as "responseCode", duration_ms as "durationMs", response_body as "responseBody", error, created_at as "createdAt"
     from webhook_attempts where delivery_id = any($1::uuid[]) order by id`,
    [page.data.map((d) => d.id)],
  );
  return { ...page, data: page.data.map((d) => ({ ...d, attemptList: attempts.filter((a) => a.deliveryId === d.id) })) };
}

/** A `webhook.test` delivery to the endpoint (sent like any delivery: a disabled endpoint's ends CANCELLED). */
export async function createTestDelivery(em: EntityManager, projectId: string, endpointId: string): Promise<DeliveryRow> {
  const db = sql(em);
  await getEndpoint(db, projectId, endpointId);
  const payload: WebhookPayload = {
    type: WEBHOOK_TEST_TYPE,
    timestamp: new Date().toISOString(),
    data: { endpointId, message: 'A test event from Mailwright: your endpoint receives and verifies webhooks.' },
  };
  return (await db.one<DeliveryRow>(
    `insert into webhook_deliveries (id, endpoint_id, project_id, event_id, type, payload) values ($1, $2, $3, null, $4, $5::jsonb) returning ${DELIVERY_COLUMNS}`,
    [uuidv7(), endpointId, projectId, WEBHOOK_TEST_TYPE, JSON.stringify(payload)],
  ))!;
}

/** Makes a delivery due again (whatever its status): the same body and `webhook-id` are sent again. */
export async function retryDelivery(em: EntityManager, projectId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow> {
  const row = await sql(em).one<DeliveryRow>(
    `update webhook_deliveries set status = 'PENDING', updated_at = now() where id = $1 and endpoint_id = $2 and project_id = $3 returning ${DELIVERY_COLUMNS}`,
    [deliveryId, endpointId, projectId],
  );
  if (!row) throw notFound('Webhook delivery');
  return row;
}
