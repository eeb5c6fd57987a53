import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { sql } from '../db/sql';
import { uuidv7 } from '../ids';
import { validationError } from '../errors';
import { getEndpoint } from './webhook-endpoint.service';
import { WEBHOOK_DELIVERY_STATUSES, type WebhookDeliveryStatus } from './webhook-endpoint.entity';
import { endpointWants, eventPayload, webhookTypeOf } from './standard-webhooks';

/** The longest range one replay covers (README › Webhooks out › Replay). */
export const MAX_REPLAY_RANGE_MS = 31 * 86_400_000;

/** Events a replay reads per page (one activity). */
const REPLAY_PAGE = 500;

export interface ReplayRequest {
  replayId: string;
  projectId: string;
  endpointId: string;
  /** ISO 8601: events recorded at or after this... */
  from: string;
  /** ...and before this. */
  to: string;
}

/** Where a replay goes on: after this event (its `created_at` as Postgres prints it, exact to the microsecond). */
export interface ReplayCursor {
  createdAt: string;
  id: string;
}

/**
 * Checks a replay's range (from before to, at most MAX_REPLAY_RANGE_MS) and that the endpoint is the project's, and
 * names the replay. Nothing is stored: the replay is its workflow, and what it queues is idempotent.
 */
export async function prepareReplay(em: EntityManager, projectId: string, endpointId: string, range: { from: string; to: string }): Promise<ReplayRequest> {
  await getEndpoint(sql(em), projectId, endpointId);
  const from = Date.parse(range.from);
  const to = Date.parse(range.to);
  if (!(from < to)) throw validationError([{ field: 'body.to', message: 'to must be after from', code: 'invalid_range' }]);
  if (to - from > MAX_REPLAY_RANGE_MS) {
    throw validationError([{ field: 'body.to', message: `A replay covers at most ${MAX_REPLAY_RANGE_MS / 86_400_000} days: split the range`, code: 'range_too_large' }]);
  }
  return { replayId: uuidv7(), projectId, endpointId, from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

interface PageEvent {
  id: string;
  projectId: string;
  contactId: string;
  contactEmail: string | null;
  name: string;
  data: Record<string, unknown>;
  emailId: string | null;
  createdAt: Date;
  cursorAt: string;
}

/**
 * One page of a replay: the next REPLAY_PAGE events of the project in the range (in recorded order), and for each that
 * the endpoint wants (its event types now), a delivery: a new one where the endpoint has none for the event, the
 * existing one queued again where it ended FAILED or CANCELLED; one that is PENDING or SUCCEEDED is left as it is.
 * Answers the deliveries this replay queued for the page's events, in id order, and where to go on (null: done). A
 * retried page answers the same deliveries, and a second replay of the same range queues nothing twice.
 */
export async function queueReplayPage(
  pool: Pool | EntityManager,
  r: ReplayRequest,
  after: ReplayCursor | null,
): Promise<{ deliveries: { id: string; contactId: string | null }[]; next: ReplayCursor | null; events: number }> {
  const db = sql(pool);
  const endpoint = await db.one<{ eventTypes: string[] }>('select event_types as "eventTypes" from webhook_endpoints where id = $1 and project_id = $2', [r.endpointId, r.projectId]);
  if (!endpoint) return { deliveries: [], next: null, events: 0 };
  const events = await db.query<PageEvent>(
    `select e.id, e.project_id as "projectId", e.contact_id as "contactId", c.email as "contactEmail", e.name, e.data, e.email_id as "emailId",
            e.created_at as "createdAt", e.created_at::text as "cursorAt"
     from events e left join contacts c on c.id = e.contact_id
     where e.project_id = $1 and e.created_at >= $2 and e.created_at < $3
       and ($4::timestamptz is null or (e.created_at, e.id) > ($4::timestamptz, $5::uuid))
     order by e.created_at, e.id limit $6`,
    [r.projectId, r.from, r.to, after?.createdAt ?? null, after?.id ?? null, REPLAY_PAGE],
  );
  const wanted = events.filter((e) => endpointWants(endpoint.eventTypes, webhookTypeOf(e.name)));
  if (wanted.length) {
    await db.run(
      `insert into webhook_deliveries (id, endpoint_id, project_id, event_id, contact_id, type, payload, replay_id)
       select d.id, $1, $2, d.event_id, d.contact_id, d.type, d.payload, $3
       from unnest($4::uuid[], $5::uuid[], $6::uuid[], $7::text[], $8::jsonb[]) as d(id, event_id, contact_id, type, payload)
       on conflict (endpoint_id, event_id) do update set status = 'PENDING', replay_id = excluded.replay_id, updated_at = now()
         where webhook_deliveries.status in ('FAILED', 'CANCELLED')`,
      [
        r.endpointId,
        r.projectId,
        r.replayId,
        wanted.map(() => uuidv7()),
        wanted.map((e) => e.id),
        wanted.map((e) => e.contactId),
        wanted.map((e) => webhookTypeOf(e.name)),
        wanted.map((e) => JSON.stringify(eventPayload(e))),
      ],
    );
  }
  const deliveries = wanted.length
    ? await db.query<{ id: string; contactId: string | null }>(
        `select d.id, d.contact_id as "contactId" from webhook_deliveries d
         where d.endpoint_id = $1 and d.replay_id = $2 and d.event_id = any($3::uuid[]) and d.status = 'PENDING' order by d.id`,
        [r.endpointId, r.replayId, wanted.map((e) => e.id)],
      )
    : [];
  const last = events[events.length - 1];
  return { deliveries, next: events.length === REPLAY_PAGE && last ? { createdAt: last.cursorAt, id: last.id } : null, events: events.length };
}

/**
 * The deliveries a replay queued, by their status now (every status present, 0 where none). A later replay that queues
 * one of them again (it had ended FAILED or CANCELLED) counts it from then on.
 */
export async function replayDeliveryCounts(source: Pool | EntityManager, endpointId: string, replayId: string): Promise<Record<WebhookDeliveryStatus, number>> {
  const rows = await sql(source).query<{ status: WebhookDeliveryStatus; n: number }>(
    'select status, count(*)::int as n from webhook_deliveries where replay_id = $1 and endpoint_id = $2 group by status',
    [replayId, endpointId],
  );
  return Object.fromEntries(WEBHOOK_DELIVERY_STATUSES.map((s) => [s, rows.find((r) => r.status === s)?.n ?? 0])) as Record<WebhookDeliveryStatus, number>;
}
