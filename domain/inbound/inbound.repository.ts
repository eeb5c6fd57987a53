import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, statement, type Sql } from '../db/sql';
import { uuidv7 } from '../ids';

/**
 * The stored inbound messages (`inbound_messages`): written by the inbound SMTP server before it answers 250, read and
 * finished by the activity of the `inbound-mail` workflow of its batch.
 */

type InboundStatus = 'RECEIVED' | 'PROCESSED' | 'FAILED';

export interface NewInboundMessage {
  mailFrom: string;
  rcptTo: string[];
  remoteAddress: string | null;
  helo: string | null;
  raw: Buffer;
}

export interface StoredInbound {
  id: string;
  /** Already stored before (the same bytes delivered again): not stored a second time. */
  duplicate: boolean;
  status: InboundStatus;
}

export interface InboundRow {
  id: string;
  receivedAt: Date;
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer | null;
  status: InboundStatus;
  kind: string | null;
  outcome: Record<string, unknown> | null;
  /** `smtp` (the inbound server) or `imap` (the bounce mailbox, whose envelope is the operator's own mailbox). */
  source: InboundSource;
}

type InboundSource = 'smtp' | 'imap';

/** The same bytes are the same message: an MTA that lost our 250 delivers exactly what it delivered before. */
function inboundDigest(raw: Buffer): Buffer {
  return createHash('sha256').update(raw).digest();
}

const INBOUND_STORE = statement(
  'inbound_store',
  `with ins as (
    insert into inbound_messages (id, digest, mail_from, rcpt_to, remote_address, helo, size, raw)
    values ($1, $2, $3, $4, $5, $6, $7, $8)
    on conflict (digest) do nothing
    returning id, status
  )
  select id, status, false as duplicate from ins
  union all
  select id, status, true from inbound_messages where digest = $2 and not exists (select 1 from ins)`,
);

/** Stores a received message (durably: the server answers 250 only after the commit). */
export async function storeInbound(db: Sql, message: NewInboundMessage): Promise<StoredInbound> {
  const row = await db.one<{ id: string; status: InboundStatus; duplicate: boolean }>(INBOUND_STORE, [
    uuidv7(),
    inboundDigest(message.raw),
    message.mailFrom,
    message.rcptTo,
    message.remoteAddress,
    message.helo,
    message.raw.length,
    message.raw,
  ]);
  // A concurrent delivery of the same bytes inserted between the two halves: its row is the one.
  if (!row) return storeInbound(db, message);
  return row;
}

const INBOUND_STORE_MAILBOX = statement(
  'inbound_store_mailbox',
  `with ins as (
    insert into inbound_messages (id, digest, mail_from, rcpt_to, size, raw, source, source_ref)
    values ($1, $2, $3, $4, $5, $6, 'imap', $7)
    on conflict do nothing
    returning id, status
  )
  select id, status, false as duplicate from ins
  union all
  (select id, status, true from inbound_messages where (source_ref = $7 or digest = $2) and not exists (select 1 from ins) order by source_ref = $7 desc limit 1)`,
);

/**
 * Stores a message read from the bounce mailbox (source `imap`). `sourceRef` names it on the server (mailbox, folder,
 * UIDVALIDITY, UID): a message read again (a poll that stopped before moving it) is the same row, and so are the same
 * bytes seen under another UID (moved back by hand, a new UIDVALIDITY).
 */
export async function storeMailboxInbound(db: Sql, message: Pick<NewInboundMessage, 'mailFrom' | 'rcptTo' | 'raw'> & { sourceRef: string }): Promise<StoredInbound> {
  const row = await db.one<{ id: string; status: InboundStatus; duplicate: boolean }>(INBOUND_STORE_MAILBOX, [
    uuidv7(),
    inboundDigest(message.raw),
    message.mailFrom,
    message.rcptTo,
    message.raw.length,
    message.raw,
    message.sourceRef,
  ]);
  if (!row) return storeMailboxInbound(db, message);
  return row;
}

/** Notes that the messages' workflow was started, and which (the sweeper leaves them alone for a while). */
export async function markInboundStarted(db: Sql, ids: string[], workflowId: string): Promise<void> {
  await db.run(`update inbound_messages set started_at = now(), workflow_id = $2 where id = any($1::uuid[]) and status = 'RECEIVED'`, [ids, workflowId]);
}

/**
 * Messages still waiting for processing whose workflow was never started, or was started more than `staleMs` ago
 * (Temporal was away when they came, or their run was terminated): the sweeper starts them (again; the workflow id
 * makes that safe).
 */
export async function pendingInbound(db: Sql, staleMs: number, limit: number): Promise<string[]> {
  const rows = await db.query<{ id: string }>(
    `select id from inbound_messages where status = 'RECEIVED' and (started_at is null or started_at < now() - make_interval(secs => $1))
     order by received_at limit $2`,
    [staleMs / 1000, limit],
  );
  return rows.map((r) => r.id);
}

const INBOUND_COLUMNS = `id, received_at as "receivedAt", mail_from as "mailFrom", rcpt_to as "rcptTo", status, kind, outcome, source`;

const INBOUND_READ = statement(
  'inbound_read',
  `select ${INBOUND_COLUMNS}, case when status = 'RECEIVED' then raw end as raw from inbound_messages where id = any($1::uuid[])`,
);

/** Messages to classify, unlocked (parsing is slow): their bytes only while they are still to process. */
export async function readInbound(em: EntityManager, ids: string[]): Promise<InboundRow[]> {
  return sql(em).query<InboundRow>(INBOUND_READ, [ids]);
}

const INBOUND_LOCK = statement(
  'inbound_lock',
  `select ${INBOUND_COLUMNS}, null::bytea as raw from inbound_messages where id = any($1::uuid[]) order by id for update`,
);

/**
 * Messages locked for applying, in id order, without their bytes (read and classified before the transaction): a
 * second run of the same messages waits, then sees them PROCESSED.
 */
export async function lockInbound(em: EntityManager, ids: string[]): Promise<InboundRow[]> {
  return sql(em).query<InboundRow>(INBOUND_LOCK, [ids]);
}

const INBOUND_FINISH = statement(
  'inbound_finish',
  `update inbound_messages m set status = v.status, kind = v.kind, outcome = v.outcome, project_id = v.project_id, email_id = v.email_id,
     contact_id = v.contact_id, processed_at = now()
   from unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::uuid[], $6::uuid[], $7::uuid[])
     as v(id, status, kind, outcome, project_id, email_id, contact_id)
   where m.id = v.id`,
);

export interface InboundFinish {
  id: string;
  status: Exclude<InboundStatus, 'RECEIVED'>;
  kind: string;
  outcome: Record<string, unknown>;
  projectId: string | null;
  emailId: string | null;
  contactId: string | null;
}

/** Records what processing found on the messages' rows, in one statement for a batch. */
export async function finishInbound(em: EntityManager, rows: readonly InboundFinish[]): Promise<void> {
  if (rows.length === 0) return;
  const col = <K extends keyof InboundFinish>(k: K) => rows.map((r) => r[k]);
  await sql(em).run(INBOUND_FINISH, [col('id'), col('status'), col('kind'), rows.map((r) => JSON.stringify(r.outcome)), col('projectId'), col('emailId'), col('contactId')]);
}

/** Drops the bytes of processed messages older than the retention; what processing found stays. Returns how many. */
export async function purgeInboundBytes(db: Sql, retentionMs: number): Promise<number> {
  return db.run(
    `update inbound_messages set raw = null
     where id in (select id from inbound_messages where raw is not null and status <> 'RECEIVED' and received_at < now() - make_interval(secs => $1) limit 10000)`,
    [retentionMs / 1000],
  );
}

/** Whether `domain` is a verified sender domain of some project (its bounce host's mail is ours to take). */
export async function verifiedDomainExists(db: Sql, domain: string): Promise<boolean> {
  return (await db.one(`select 1 as ok from domains where lower(name) = $1 and status = 'VERIFIED' limit 1`, [domain.toLowerCase()])) !== undefined;
}
