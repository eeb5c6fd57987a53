import { AppError } from '../errors';
import { buildMime } from '../mail/mime';
import { composeEmail, mimeMessageOf, prepareMessage, type MessageInput, type PreparedMessage } from '../compose/composer';

/**
 * Renders a batch of a campaign's messages to raw MIME: the CPU-heavy part of a send (Liquid, tracking, the text
 * part, MIME encoding). It runs in the worker's render threads (render-pool.ts) or, without threads, inline; either
 * way it is the same composer as every other message.
 */

/** Everything about the message that does not depend on the recipient (what prepareMessage takes), DKIM aside. */
export type RenderSpec = Omit<MessageInput, 'dkim'>;

export interface RenderTask {
  /** Identifies `spec` (the campaign and its content): the prepared message is reused across batches under it. */
  key: string;
  spec: RenderSpec;
  recipients: { id: string; contactId: string; email: string; data: Record<string, unknown> }[];
}

export type RenderedMessage =
  | { id: string; subject: string; messageId: string; envelope: { from: string; to: string[] }; raw: string }
  /** This recipient's data makes the message invalid (e.g. too large once rendered): it is not sent. */
  | { id: string; invalid: string };

const prepared = new Map<string, Promise<PreparedMessage>>();

export default async function renderBatch(task: RenderTask): Promise<RenderedMessage[]> {
  let message = prepared.get(task.key);
  if (!message) {
    if (prepared.size > 50) prepared.clear(); // a render thread serves few campaigns at once
    message = prepareMessage(task.spec);
    prepared.set(task.key, message);
    message.catch(() => prepared.delete(task.key));
  }
  const ready = await message;
  return task.recipients.map((r): RenderedMessage => {
    try {
      const email = composeEmail(ready, { contactId: r.contactId, email: r.email, data: r.data, emailId: r.id });
      return { id: r.id, subject: email.subject, messageId: email.messageId, envelope: email.envelope, raw: buildMime(mimeMessageOf(email)) };
    } catch (err) {
      if (err instanceof AppError) return { id: r.id, invalid: err.message };
      throw err;
    }
  });
}
