import { workerData } from 'node:worker_threads';
import pg from 'pg';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { AppError } from '../errors';
import { isRenderTimeout, primeMjml } from '../rendering/render';
import { writeWireMessage } from '../mail/mime';
import { WireWriter } from '../mail/wire-writer';
import { sql, statement } from '../db/sql';
import { signWritten, type DkimSigningKey } from '../mail/dkim-sign';
import { composeWireEmail, mimeMessageOf, prepareMessage, type MessageInput, type PreparedMessage } from '../compose/composer';

/**
 * Renders a batch of a campaign's messages to the bytes SMTP sends after DATA: the CPU-heavy part of a send (Liquid,
 * tracking, the text part, MIME encoding, the DKIM signature, dot-stuffing). It runs in the worker's render threads (render-pool.ts) or, without
 * threads, inline; either way it is the same composer as every other message.
 */

export interface RenderTask {
  /** Identifies `spec` (the campaign and its content): the prepared message is reused across batches under it. */
  key: string;
  /** Everything about the message that does not depend on the recipient (what prepareMessage takes). */
  spec: MessageInput;
  /**
   * An MJML body's HTML as the worker's main thread compiled it (render.ts `compiledMjml`): the thread takes it instead
   * of compiling the MJML itself.
   */
  mjmlHtml?: string;
  /** The sender domain's key: each message is signed here, off the worker's main thread. */
  dkim?: DkimSigningKey;
  /** The relay offers 8BITMIME: non-ASCII text parts go as UTF-8 octets (`8bit`) instead of quoted-printable. */
  eightBit?: boolean;
  /**
   * `data`: the contact's data. A campaign leaves it out: the batch's data is read here from Postgres in one statement
   * (ContactDataReader), as JSON text, and parsed here, so the worker's main thread never holds it. Read there with its
   * chunk, each contact's data (about 1 KB of JSON text in the benchmark) lived on that thread's heap until its batch
   * was handed over, long enough to be promoted: half of what its old generation took in, copied twice on the way and
   * once more into the thread (BENCHMARKS.md › Issue 28, sixth stop).
   */
  recipients: { id: string; contactId: string; email: string; data?: string | Record<string, unknown> }[];
}

interface MessageHead {
  id: string;
  subject: string;
  messageId: string;
  envelope: { from: string; to: string };
  /** Some part went as UTF-8 octets: MAIL FROM says BODY=8BITMIME. */
  eightBit: boolean;
}

export type RenderedMessage =
  /** `wire`: the whole message as it goes to SMTP after DATA: signed, dot-stuffed, with the terminating `.` line. */
  | (MessageHead & { wire: Buffer })
  /** This recipient's data makes the message invalid (e.g. too large once rendered): it is not sent. */
  | { id: string; invalid: string }
  /** The render ran out of its wall-clock budget (a busy machine): the recipient is tried again in a later pass. */
  | { id: string; retry: string };

type Unsent = { id: string; invalid: string } | { id: string; retry: string };

/**
 * A rendered batch as it crosses from a render thread: every message's bytes in one buffer, which the thread hands
 * over (transfers) instead of copying, so the main thread neither copies nor encodes the messages it sends.
 */
export interface PackedBatch {
  bytes: ArrayBuffer;
  messages: ((MessageHead & { start: number; end: number }) | Unsent)[];
}

const prepared = new Map<string, Promise<PreparedMessage>>();

/**
 * The bytes of a batch are written here (wire-writer.ts), one message after another, then copied out once per batch.
 * One per thread: a batch renders synchronously.
 */
let writer = new WireWriter();

const CONTACT_DATA = statement('render_contact_data', 'select id, data::text as data from contacts where id = any($1::uuid[])');

/** Reads the data of a batch's contacts from Postgres in one statement: JSON text by contact id. */
export class ContactDataReader {
  private readonly pool: pg.Pool;

  constructor(databaseUrl: string) {
    // One connection: a thread reads one batch at a time. Idle, it closes and lets the process exit.
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: 1, application_name: 'mailwright-render', idleTimeoutMillis: 30_000, allowExitOnIdle: true });
    // A connection that drops while idle is replaced by the next read; a read that fails fails its batch.
    this.pool.on('error', () => undefined);
  }

  async read(contactIds: string[]): Promise<Map<string, string>> {
    const rows = await sql(this.pool).query<{ id: string; data: string }>(CONTACT_DATA, [contactIds]);
    const byId = new Map<string, string>();
    for (const row of rows) byId.set(row.id, row.data);
    return byId;
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/** A recipient whose contact was deleted after its chunk was read: tried again in a later pass, which skips it. */
const DELETED = 'The contact was deleted while its message was being made';

/** Renders a batch into one buffer (what a thread and the inline pool both do); `reader` reads data left out of it. */
export async function renderPacked(task: RenderTask, reader?: ContactDataReader): Promise<PackedBatch> {
  const missing = task.recipients.filter((r) => r.data === undefined).map((r) => r.contactId);
  let read: Map<string, string> | null = null;
  if (missing.length) {
    if (!reader) throw new Error('renderPacked: recipients without data and no ContactDataReader');
    read = await reader.read(missing);
  }
  let message = prepared.get(task.key);
  if (!message) {
    if (prepared.size > 50) prepared.clear(); // a render thread serves few campaigns at once
    if (task.mjmlHtml !== undefined) primeMjml(task.spec.content.body, task.mjmlHtml);
    message = prepareMessage(task.spec);
    prepared.set(task.key, message);
    message.catch(() => prepared.delete(task.key));
  }
  const ready = await message;
  // A batch of very large messages grew the buffer: start the next one small again.
  if (writer.buf.length > 16 * 1024 * 1024) writer = new WireWriter();
  writer.reset();
  const eightBitRelay = task.eightBit === true;
  const messages = task.recipients.map((r): PackedBatch['messages'][number] => {
    const given = r.data ?? read!.get(r.contactId);
    if (given === undefined) return { id: r.id, retry: DELETED };
    try {
      const data = typeof given === 'string' ? (JSON.parse(given) as Record<string, unknown>) : given;
      // Parsed here for this message alone, unless the task carried it as an object (then a copy is made).
      const recipient = { contactId: r.contactId, email: r.email, data, dataIsOwned: typeof given === 'string', emailId: r.id };
      const start = writer.pos;
      const composed = composeWireEmail(ready, recipient);
      const email = composed.email;
      const eightBit = writeWireMessage(writer, mimeMessageOf(email), { eightBit: eightBitRelay }, composed.htmlSegments ?? undefined).eightBit;
      // The signature goes in front of the written message (the field is ASCII: the message's octets stay as they are).
      if (task.dkim) signWritten(writer, start, task.dkim);
      return { id: r.id, subject: email.subject, messageId: email.messageId, envelope: { from: email.envelope.from, to: r.email }, eightBit: eightBitRelay && eightBit, start, end: writer.pos };
    } catch (err) {
      if (isRenderTimeout(err)) return { id: r.id, retry: (err as Error).message };
      if (err instanceof AppError) return { id: r.id, invalid: err.message };
      throw err;
    }
  });
  // Not from Buffer's shared pool: this memory is the batch's alone, so it can be transferred.
  const bytes = writer.take();
  return { bytes: bytes.buffer as ArrayBuffer, messages };
}

/** The messages of a batch, each with its own view of the batch's bytes. */
export function unpack(batch: PackedBatch): RenderedMessage[] {
  return batch.messages.map((m) =>
    !('subject' in m) ? m : { id: m.id, subject: m.subject, messageId: m.messageId, envelope: m.envelope, eightBit: m.eightBit, wire: Buffer.from(batch.bytes, m.start, m.end - m.start) },
  );
}

/** A render thread's reader, made on its first batch from the database URL the pool gives its threads. */
let threadReader: ContactDataReader | undefined;

/** The render thread's entry (piscina): the batch, with its buffer marked for transfer. */
export default async function renderBatch(task: RenderTask) {
  threadReader ??= new ContactDataReader((workerData as { databaseUrl: string }).databaseUrl);
  const batch = await renderPacked(task, threadReader);
  return move({ [transferableSymbol]: [batch.bytes], [valueSymbol]: batch });
}
