import fs from 'node:fs';
import { ImapFlow } from 'imapflow';
import type { Config } from '../config';
import type { Sql } from '../db/sql';
import { logger } from '../logger';
import { inboundMessages } from '../metrics';
import { storeMailboxInbound } from './inbound.repository';
import { startInboundProcessing, type InboundMailStarter } from './inbound-start';
import { addressIn, field, headerBlock } from './report-fields';

/**
 * The bounce mailbox (README › Bounce mailbox (IMAP)): for relays that can only send their bounces and reports to a
 * mailbox. Each poll (the `bounce-mailbox` schedule's workflow, one activity) reads the configured folder and, per
 * batch of messages:
 *   1. stores each message (`inbound_messages`, source `imap`) under the key of its place on the server,
 *      `<user>@<host>:<port>/<folder>/<UIDVALIDITY>/<UID>` (unique, and the bytes' digest is unique too), so a message
 *      read again is the row stored before;
 *   2. hands the stored messages that still wait for processing to an `inbound-mail` workflow, as the inbound SMTP
 *      server does (inbound-start.ts);
 *   3. moves the batch to the processed folder (IMAP MOVE, or COPY + \Deleted + EXPUNGE where the server lacks MOVE).
 * Everything in the folder is unread work: a poll killed after 1 or 2 leaves the messages where they are, the next
 * attempt (the activity's retry, or the next poll) reads them again, finds their rows, hands on those not processed
 * yet, and moves them. Nothing is skipped (a message leaves the folder only after its row committed) and nothing is
 * processed twice (one row per message, applied once: inbound-apply.ts).
 *
 * A message over INBOUND_MAX_MESSAGE_SIZE is left in the folder (counted in the poll's result, logged) for the
 * operator: a bounce is a few kilobytes.
 */

/** Messages fetched, stored and moved together. */
const BATCH = 50;
/** Messages one poll takes at most; the rest waits for the next poll (an activity should not run for hours). */
const MAX_PER_POLL = 2000;
/** Recipient headers read from a message: the envelope a mailbox keeps (delivery agents write them). */
const RECIPIENT_HEADERS = ['delivered-to', 'x-original-to', 'envelope-to'];
const MAX_RECIPIENTS = 20;

type MailboxConfig = NonNullable<Config['bounceMailbox']>;

export interface BounceMailboxPoll {
  /** `<user>@<host>:<port>/<folder>`. */
  mailbox: string;
  uidValidity: string;
  /** Messages read and stored (new rows). */
  stored: number;
  /** Messages read whose row already existed (read before by a poll that stopped before moving them). */
  duplicates: number;
  moved: number;
  /** Messages over the size limit, left in the folder. */
  tooLarge: number;
  /** The `inbound-mail` runs that got the messages. */
  workflowIds: string[];
}

export interface BounceMailboxDeps {
  mailbox: MailboxConfig;
  maxMessageBytes: number;
  db: Sql;
  temporal: InboundMailStarter;
  /** Called after each batch (the activity heartbeats). */
  progress?: (done: number) => void;
}

/** The IMAP client for the configured mailbox; not connected. */
function bounceMailboxClient(m: MailboxConfig): ImapFlow {
  const client = new ImapFlow({
    host: m.host,
    port: m.port,
    secure: m.tls === 'on',
    // starttls: required (a server without it fails the poll); off: never, even when offered.
    doSTARTTLS: m.tls === 'starttls' ? true : m.tls === 'off' ? false : undefined,
    auth: { user: m.user, pass: m.password },
    logger: false,
    disableAutoIdle: true,
    connectionTimeout: 30_000,
  });
  // A dropped connection is reported by the command that was running; without a listener the event would crash the process.
  client.on('error', (err: unknown) => logger.warn({ err, host: m.host }, 'bounce mailbox: connection error'));
  return client;
}

/** The envelope a mailbox message came with, as far as its headers keep it: Return-Path and the delivered-to addresses. */
function envelopeOf(raw: Buffer): { mailFrom: string; rcptTo: string[] } {
  const { fields } = headerBlock(raw.subarray(0, 64 * 1024).toString('utf8'));
  const returnPath = field(fields, 'return-path');
  // `Return-Path: <>` is the null sender of bounces and reports; without the header, the From stands in (not null).
  const mailFrom = returnPath !== undefined ? (addressIn(returnPath) ?? '') : (addressIn(field(fields, 'from')) ?? 'unknown');
  const rcptTo = fields
    .filter((f) => RECIPIENT_HEADERS.includes(f.name))
    .map((f) => addressIn(f.value))
    .filter((a): a is string => !!a)
    .slice(0, MAX_RECIPIENTS);
  return { mailFrom: mailFrom.slice(0, 998), rcptTo };
}

/**
 * The test tier's crash point (BOUNCE_MAILBOX_TEST_CRASH_FILE, honoured only with NODE_ENV=test): when the file exists
 * it is removed and the process is killed (SIGKILL) right after half of a batch is stored, before any of it is handed
 * on or moved: the worst moment for a restart.
 */
function crashPointForTests(m: MailboxConfig): void {
  if (!m.testCrashFile || !fs.existsSync(m.testCrashFile)) return;
  fs.rmSync(m.testCrashFile, { force: true });
  logger.warn('bounce mailbox: killed at the test crash point (BOUNCE_MAILBOX_TEST_CRASH_FILE)');
  process.kill(process.pid, 'SIGKILL');
}

/** One poll of the bounce mailbox; see the module comment. */
export async function pollBounceMailbox(deps: BounceMailboxDeps): Promise<BounceMailboxPoll> {
  const m = deps.mailbox;
  const name = `${m.user}@${m.host}:${m.port}/${m.folder}`;
  const client = bounceMailboxClient(m);
  await client.connect();
  try {
    await client.mailboxCreate(m.processedFolder); // created: false when it exists
    const lock = await client.getMailboxLock(m.folder);
    try {
      const box = client.mailbox;
      if (!box) throw new Error(`bounce mailbox: folder ${m.folder} could not be opened`);
      const result: BounceMailboxPoll = { mailbox: name, uidValidity: String(box.uidValidity), stored: 0, duplicates: 0, moved: 0, tooLarge: 0, workflowIds: [] };
      if (!box.exists) return result;
      const uids: number[] = [];
      for (const msg of await client.fetchAll('1:*', { uid: true, size: true })) {
        if ((msg.size ?? 0) > deps.maxMessageBytes) result.tooLarge++;
        else uids.push(msg.uid);
      }
      if (result.tooLarge) logger.warn({ mailbox: name, count: result.tooLarge, limit: deps.maxMessageBytes }, 'bounce mailbox: messages over INBOUND_MAX_MESSAGE_SIZE left in the folder');
      uids.sort((a, b) => a - b);
      for (let i = 0; i < Math.min(uids.length, MAX_PER_POLL); i += BATCH) {
        await pollBatch(deps, client, uids.slice(i, i + BATCH), result);
        deps.progress?.(i + BATCH);
      }
      return result;
    } finally {
      lock.release();
    }
  } finally {
    await client.logout().catch(() => client.close());
  }
}

async function pollBatch(deps: BounceMailboxDeps, client: ImapFlow, uids: number[], result: BounceMailboxPoll): Promise<void> {
  const m = deps.mailbox;
  // Read whole before storing: no other IMAP command may run while a FETCH streams.
  const messages: { uid: number; raw: Buffer }[] = [];
  for await (const msg of client.fetch(uids.join(','), { uid: true, source: true }, { uid: true })) {
    if (msg.source) messages.push({ uid: msg.uid, raw: msg.source });
  }
  const fresh: string[] = [];
  const waiting: string[] = [];
  for (const [n, msg] of messages.entries()) {
    if (n === Math.ceil(messages.length / 2)) crashPointForTests(m);
    const stored = await storeMailboxInbound(deps.db, { ...envelopeOf(msg.raw), raw: msg.raw, sourceRef: `${m.user}@${m.host}:${m.port}/${m.folder}/${result.uidValidity}/${msg.uid}` });
    inboundMessages.inc({ outcome: stored.duplicate ? 'duplicate' : 'stored' });
    if (stored.duplicate) result.duplicates++;
    else result.stored++;
    if (stored.status === 'RECEIVED') (stored.duplicate ? waiting : fresh).push(stored.id);
  }
  // A new row's id names a new run that takes the batch; a message stored by an earlier poll and still waiting goes in
  // it too. Without new rows, each waiting one gets the run named after itself (one that runs already covers it).
  if (fresh.length) result.workflowIds.push(await startInboundProcessing(deps.temporal, deps.db, [...fresh, ...waiting]));
  else for (const id of waiting) result.workflowIds.push(await startInboundProcessing(deps.temporal, deps.db, [id]));
  const moved = messages.length ? await client.messageMove(messages.map((x) => x.uid).join(','), m.processedFolder, { uid: true }) : false;
  result.moved += moved ? moved.uidMap?.size ?? messages.length : 0;
}
