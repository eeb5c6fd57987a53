import { simpleParser, type ParsedMail } from 'mailparser';
import { stackEnv } from '../stack-env';

interface MailDevSummary {
  id: string;
  to: { address: string }[];
  subject: string;
}

async function list(): Promise<MailDevSummary[]> {
  const res = await fetch(`${stackEnv().mailboxUrl}/email`);
  return (await res.json()) as MailDevSummary[];
}

/** The raw message as the SMTP server received it, parsed. */
export async function fetchParsed(id: string): Promise<ParsedMail> {
  const res = await fetch(`${stackEnv().mailboxUrl}/email/${id}/source`);
  return simpleParser(Buffer.from(await res.arrayBuffer()));
}

/** Waits until the capture server has `count` messages to `to`, then returns them parsed. */
export async function waitForMail(to: string, opts: { count?: number; timeoutMs?: number } = {}): Promise<ParsedMail[]> {
  const count = opts.count ?? 1;
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  const address = to.toLowerCase();
  for (;;) {
    const matches = (await list()).filter((m) => m.to.some((t) => t.address.toLowerCase() === address));
    if (matches.length >= count) return Promise.all(matches.map((m) => fetchParsed(m.id)));
    if (Date.now() > deadline) throw new Error(`expected ${count} message(s) to ${to}, found ${matches.length}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Messages to `to` received so far (no waiting). */
export async function mailTo(to: string): Promise<number> {
  const address = to.toLowerCase();
  return (await list()).filter((m) => m.to.some((t) => t.address.toLowerCase() === address)).length;
}
